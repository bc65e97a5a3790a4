"""Job file → validated :class:`~vtrain.jobfile.config.JobConfig`: the one way every command loads a job.

The pipeline is: read YAML with positions (:mod:`vtrain.jobfile.yamlpos`) → apply `--set` overrides →
check the shape (:mod:`vtrain.jobfile.schema`) → build the job config (:mod:`vtrain.jobfile.config`) →
cross-field rules (:mod:`vtrain.jobfile.rules`). Every problem from every stage is reported together in
one :class:`~vtrain.errors.ConfigError`. Nothing here touches the network. This module sits
above both the job config and the rules, so neither imports the other in a circle.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from vtrain.errors import ConfigError, Problem
from vtrain.jobfile import rules, schema
from vtrain.jobfile.assemble import build_config
from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.yamlpos import (
    MAX_BYTES,
    MAX_NODES,
    PathKey,
    Position,
    Positions,
    format_path,
    job_value,
    load_yaml,
)
from vtrain.userpaths import absolute, describe_oserror, path_problem, read_bounded, shown


def apply_overrides(data: Any, overrides: Iterable[str], positions: Positions) -> tuple[Any, list[Problem]]:
    """Apply `key.path=value` overrides (value parsed as YAML) to a copy of the raw data."""
    problems: list[Problem] = []
    data = _deep_copy(data) if data is not None else {}
    for item in overrides:
        where = Position(f"--set {shown(item)}")  # a NUL or newline in argv is shown escaped
        if "=" not in item:
            problems.append(Problem("", "--set expects KEY.PATH=VALUE, e.g. cluster.workers.replicas=4",
                                    file=where.file))
            continue
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if not any(parts):
            problems.append(Problem("", "--set needs a key path before '='", file=where.file))
            continue
        if not all(parts):
            problems.append(Problem("", f"--set key path '{key.strip()}' has an empty part; write "
                                        f"{'.'.join(p for p in parts if p)}", file=where.file))
            continue
        try:
            value, texts = _override_value(raw)
        except _Unbounded as err:
            problems.append(Problem(key.strip(), str(err), file=where.file))
            continue
        node = data
        if not isinstance(node, dict):
            problems.append(Problem("", "the job file's top level is not a mapping", file=where.file))
            continue
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
                created = tuple(parts[: i + 1])  # a section --set made up: problems with it point at the flag
                positions.values[created] = where
                positions.keys[created] = where
            if not isinstance(child, dict):
                whole = f"; set the whole list: {'.'.join(parts[: i + 1])}=[...]" if isinstance(child, list) else ""
                problems.append(Problem(".".join(parts[: i + 1]),
                                        f"is not a mapping; cannot set a key inside it{whole}", file=where.file))
                break
            node = child
        else:
            if value is None:  # `--set key=null` removes the key (e.g. to swap package for package_uris)
                node.pop(parts[-1], None)
                gone = tuple(parts)  # and its positions: a removed key is not "written in the job file"
                for table in (positions.values, positions.keys, positions.texts):
                    for path in [p for p in table if p[: len(gone)] == gone]:
                        del table[path]
                positions.keys[gone] = where  # "name is required" after --set name=null blames the flag
                continue
            node[parts[-1]] = value
            path = tuple(parts)
            for old_path in [p for p in positions.texts if p[: len(path)] == path]:
                del positions.texts[old_path]  # what the job file wrote there is replaced
            positions.texts.update({(*path, *sub): text for sub, text in texts.items()})
            positions.values[path] = where
            positions.keys[path] = where
            for sub in _subpaths(value, path):
                positions.values[sub] = where
                positions.keys[sub] = where
    return data, problems


def override(key: str, value: Any) -> str:
    """The `--set KEY=VALUE` item that reads back as exactly `value` (strings, whole numbers, booleans, None, lists
    and mappings of them): YAML in flow style, every string double-quoted with each character that is not printable
    ASCII written as YAML's escape of its code point (``\\x..``, ``\\u....``, ``\\U........``). JSON is not
    that: it writes a character outside Unicode's basic plane as two ``\\u`` escapes, which YAML reads as two
    lone surrogates, and leaves U+0085 and U+2028 raw, which YAML reads as line breaks."""
    return f"{key}={_yaml_flow(value)}"


def _yaml_flow(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + "".join(_yaml_char(c) for c in value) + '"'
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_yaml_flow(str(k))}: {_yaml_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_yaml_flow(v) for v in value) + "]"
    raise TypeError(f"no YAML for a {type(value).__name__}")


def _yaml_char(char: str) -> str:
    code = ord(char)
    if char in '"\\':
        return "\\" + char
    if 0x20 <= code < 0x7F:
        return char
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class _Unbounded(ValueError):
    """A --set value past the job file's limits (an alias bomb, deep nesting)."""


def _override_value(raw: str) -> tuple[Any, dict[tuple[Any, ...], str]]:
    """A --set value as YAML, under the job file's limits, with the source text of its scalars that
    YAML 1.1 reads as numbers or booleans (see Positions.texts); text YAML cannot read stays text."""
    if not raw.strip():
        return "", {}
    data, positions, problems = load_yaml(raw, "--set", what="a --set value")
    if not problems:
        return data, positions.texts
    message = problems[0].message
    if "YAML syntax error" in message or "tab character" in message:
        return raw, {}  # `--set name=a: b` and the like: the text as written
    raise _Unbounded(message)


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _subpaths(value: Any, path: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((*path, k))
            out.extend(_subpaths(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((*path, i))
            out.extend(_subpaths(v, (*path, i)))
    return out


def parse_config(
    text: str,
    file: str = "<config>",
    *,
    source: Path | None = None,
    overrides: Iterable[str] = (),
    target: str = "vertex",
) -> JobConfig:
    """Parse and validate job-file text; raise ConfigError listing every problem."""
    data, positions, problems = load_yaml(text, file)
    if data is None and problems:
        raise ConfigError(problems)  # unreadable YAML: nothing more to check
    if data is not None and not isinstance(data, dict):
        pos = positions.of(())
        raise ConfigError([*problems, Problem("", "the job file must be a mapping of keys (name, trainer, cluster, "
                                              "...)", pos.file, pos.line, pos.column)])
    overrides = list(overrides)
    if overrides:
        data, override_problems = apply_overrides(data, overrides, positions)
        problems += override_problems
        if override_problems:
            raise ConfigError(problems)
    # Duplicate and unknown keys are reported but do not stop the checks: the rules still run on
    # the rest, so one run lists every problem. Values of the wrong type do stop them.
    checked, schema_problems = schema.check_job(data, positions)
    problems += schema_problems
    if checked is None:
        raise ConfigError(problems)
    config = build_config(checked, source=source, positions=positions)
    config, rule_problems = rules.validate(config, target=target)
    problems += rule_problems
    seen = {(p.path, p.message) for p in problems}
    if len(config.scheduling.fallback) > MAX_FALLBACKS:  # each entry is checked as a whole job: bound them
        pos = config.positions.of(("scheduling", "fallback"))
        problems.append(Problem("scheduling.fallback", f"at most {MAX_FALLBACKS} fallbacks, got "
                                f"{len(config.scheduling.fallback):,}; keep the ones worth trying", pos.file,
                                pos.line, pos.column))
    else:
        problems += [p for p in _check_fallbacks(text, file, source, overrides, target, config)
                     if (p.path, p.message.rsplit(" (with scheduling.fallback[", 1)[0]) not in seen]
    if any(p.severity == "error" for p in problems):
        raise ConfigError(problems)
    return replace(config, warnings=tuple(problems))


#: `submit --recover` tries fallbacks one stock-out at a time; more than this is a mistake, and each
#: is validated as a whole job file (so validate stays linear in the file's size).
MAX_FALLBACKS = 32
_FALLBACK_KEYS = {"region": "region", "machine_type": "cluster.chief.machine_type",
                  "accelerator": "cluster.chief.accelerator", "accelerator_count": "cluster.chief.accelerator_count"}


def fallback_overrides(entry: Mapping[str, Any]) -> list[str]:
    """A `scheduling.fallback` entry as `--set` overrides of the job file: the region and/or the chief's
    machine (workers and evaluator inherit it as usual). A new machine type without accelerator keys
    drops the chief's accelerator (machines like a2-highgpu-1g imply theirs)."""
    out = [f"{_FALLBACK_KEYS[key]}={value}" for key, value in entry.items() if key in _FALLBACK_KEYS]
    if "machine_type" in entry:
        out += [f"cluster.chief.{k}=null" for k in ("accelerator", "accelerator_count") if k not in entry]
    return [*out, "scheduling.fallback=null"]


def _check_fallbacks(text: str, file: str, source: Path | None, overrides: list[str], target: str,
                     config: JobConfig) -> list[Problem]:
    """Each fallback validated like the primary; its problems point at the fallback entry."""
    problems: list[Problem] = []
    for i, entry in enumerate(config.scheduling.fallback):
        try:
            parse_config(text, file, source=source, overrides=[*overrides, *fallback_overrides(entry)], target=target)
        except ConfigError as err:
            for p in err.problems:
                key = next((k for k, path in _FALLBACK_KEYS.items() if path == p.path and k in entry), None)
                pos = config.positions.of(("scheduling", "fallback", i, key) if key else ("scheduling", "fallback", i))
                if p.file and p.file.startswith("--set ") or key:
                    p = replace(p, file=pos.file, line=pos.line, column=pos.column)
                problems.append(replace(p, message=f"{p.message} (with scheduling.fallback[{i}])"))
    return problems


#: Where problems are reported for a job given to :func:`load_config` as YAML text (with lines and
#: columns) or as a mapping (by key path only: there is no text to point into).
TEXT_SOURCE = "<string>"
MAPPING_SOURCE = "<mapping>"
#: A mapping nested deeper than this is refused (a job file needs a handful of levels; a mapping that
#: contains itself would otherwise never end).
MAX_MAPPING_DEPTH = 64


def load_config(
    path: str | os.PathLike[str] | Mapping[str, Any],
    overrides: Iterable[str] = (),
    *,
    target: str = "vertex",
) -> JobConfig:
    """Load and validate a job. Raises ConfigError with every problem found.

    `path` is one of:

    - the path of a job file (a `str` without a line break, or a path-like object);
    - the job file's YAML text (a `str` with a line break); problems point at `<string>:LINE:COL`;
    - a mapping of the same keys (`{"name": ..., "trainer": {...}, "cluster": {...}}`), plain data
      only (mappings, lists, str, int, float, bool, None; a str or int enum member is its value);
      problems point at `<mapping>` and the key.

    Relative paths in a job given as text or a mapping (`trainer.package: ./trainer`) are taken from
    the current directory, as a job file's are from the file's directory.

    `target="local"` relaxes the rules that only matter when sending to Vertex
    (a gs:// staging bucket for package trainers), for `vtrain local`.
    """
    if isinstance(path, Mapping):
        return _load_mapping(path, overrides, target)
    if isinstance(path, str) and "\n" in path:  # a path has no line break; any YAML job of two keys has one
        return parse_config(path, TEXT_SOURCE, overrides=overrides, target=target)
    file = Path(path)
    where = shown(str(file))
    bad = path_problem(str(file))
    if bad:
        raise ConfigError([Problem("", f"the job file's path {bad}", file=where)])
    try:
        # Bounded and regular files only: a FIFO would hang the read, /dev/zero never end it.
        text = read_bounded(file, MAX_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem("", f"job file not found: {where}", file=where)]) from None
    except OSError as err:
        raise ConfigError([Problem("", f"cannot read the job file: {describe_oserror(err)}", file=where)]) from None
    except UnicodeDecodeError as err:
        raise ConfigError([Problem("", f"the job file is not UTF-8 text (byte {err.start + 1} is "
                                       f"{err.object[err.start:err.start + 1]!r}); save it as UTF-8",
                                   file=where)]) from None
    return parse_config(text, where, source=absolute(file), overrides=overrides, target=target)


def _load_mapping(data: Mapping[str, Any], overrides: Iterable[str], target: str) -> JobConfig:
    """A job given as a mapping: checked to be plain data, then read as the YAML text it dumps to (so it
    passes exactly the checks a job file does); its problems name the key, without the dump's lines."""
    problems: list[Problem] = []
    plain = _plain(data, (), problems, [0])
    if problems:
        raise ConfigError(problems)
    text = yaml.safe_dump(plain, sort_keys=False, allow_unicode=True)
    try:
        config = parse_config(text, MAPPING_SOURCE, overrides=overrides, target=target)
    except ConfigError as err:
        raise ConfigError([_unplaced(p) for p in err.problems + err.warnings]) from None
    positions = config.positions
    for table in (positions.values, positions.keys):
        for key, pos in table.items():
            if pos.file == MAPPING_SOURCE:
                table[key] = Position(MAPPING_SOURCE)
    positions.default = Position(MAPPING_SOURCE)
    return replace(config, warnings=tuple(_unplaced(w) for w in config.warnings))


def _unplaced(problem: Problem) -> Problem:
    """A problem in a mapping's YAML dump, without the dump's line and column (the user never saw it)."""
    return replace(problem, line=None, column=None) if problem.file == MAPPING_SOURCE else problem


def _plain(value: Any, path: PathKey, problems: list[Problem], count: list[int]) -> Any:
    """`value` as YAML's plain data (tuples as lists, mappings as dicts), or None with a problem."""
    count[0] += 1
    if len(path) > MAX_MAPPING_DEPTH or count[0] > MAX_NODES:
        if not any(p.message.startswith("the mapping is") for p in problems):
            problems.append(Problem("", f"the mapping is nested deeper than {MAX_MAPPING_DEPTH} levels or has "
                                        f"more than {MAX_NODES:,} values (does it contain itself?)",
                                    file=MAPPING_SOURCE))
        return None
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            plain_key, why = job_value(key)
            if why is not None or plain_key is None:
                problems.append(Problem(format_path(path), f"mapping keys must be text, got "
                                        f"{type(key).__name__!r}", file=MAPPING_SOURCE))
                continue
            out[plain_key] = _plain(item, (*path, str(plain_key)), problems, count)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(item, (*path, i), problems, count) for i, item in enumerate(value)]
    plain, why = job_value(value)  # the one conversion a job file's scalars pass through too
    if why is not None:
        problems.append(Problem(format_path(path), why, file=MAPPING_SOURCE))
    return plain


__all__ = ["MAPPING_SOURCE", "TEXT_SOURCE", "apply_overrides", "fallback_overrides", "load_config", "override",
           "parse_config"]
