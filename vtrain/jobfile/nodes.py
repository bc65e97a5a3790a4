"""The node types the job file's schema is built from (:mod:`vtrain.jobfile.schema`), and what they share:
the problem collector, durations, did-you-mean. Each node checks one raw YAML value, records every
problem with its position, and returns the value normalized (or None). A node type that knows its
JSON Schema has a `json_schema()` method (`vtrain schema`, :mod:`vtrain.jobfile.json_schema`).
Every node also carries what its key declares besides its shape (:class:`Declared`: doc, default,
examples), so a key is documented where it is declared.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vtrain.durations import EXAMPLES as DURATION_EXAMPLES
from vtrain.durations import MAX_SECONDS, DurationError, parse_seconds
from vtrain.durations import PATTERN as DURATION_PATTERN
from vtrain.errors import Problem
from vtrain.jobfile.yamlpos import PathKey, Positions, format_path

MAX_DURATION_S = MAX_SECONDS
#: Vertex's integer values are int64 (proto3 JSON writes them as strings).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """' did you mean X?' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = difflib.get_close_matches(str(word).lower(), list(lowered), n=1, cutoff=0.6)
        close = [lowered[c] for c in close]
    return f" did you mean '{close[0]}'?" if close else ""


def parse_duration(value: Any) -> int | None:
    """Whole seconds by vtrain's one duration grammar (:mod:`vtrain.durations`); None if invalid."""
    try:
        return int(parse_seconds(value, limit=None))  # Duration says the bound in its own words
    except DurationError:
        return None


class Checker:
    """Collects problems with positions while checking values against the schema."""

    def __init__(self, positions: Positions) -> None:
        self.positions = positions
        self.problems: list[Problem] = []

    def add(self, path: PathKey, message: str, *, key: bool = False, severity: str = "error") -> None:
        pos = self.positions.of(path, key=key)
        self.problems.append(
            Problem(format_path(path), message, pos.file, pos.line, pos.column, severity)
        )


_NUL = "contains a NUL byte (\\0), which no path, argument or environment value can hold; remove it"


def _fits_int64(value: int, path: PathKey, ck: Checker) -> bool:
    """Whole numbers reach Vertex (or a replica) as int64: False, and said, for one that does not fit."""
    if INT64_MIN <= value <= INT64_MAX:
        return True
    ck.add(path, f"must fit a 64-bit integer (at most {INT64_MAX:,}), got one of {abs(value).bit_length()} bits")
    return False


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"the text '{value}'"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


@dataclass(frozen=True, kw_only=True)
class Declared:
    """What a key declares besides its shape, written once on its node: the JSON Schema (`vtrain schema`), the
    reference table and the guard tests read it here, so a key's documentation cannot drift from the key.
    `default`: what the job config builds when the key is left out (None: nothing, or no single value);
    `vertex_default`: Vertex applies it, vtrain sends nothing; `examples`: valid values other than the default
    (editors offer them; the tests render each); `vtrain_only`: why the key never reaches the request ('' when
    it does); `rest`: the dotted CustomJob REST path a top-level plain field is copied to with no builder code,
    and `rest_number` its proto field number (under CustomJobSpec for ``jobSpec.…``), which keeps
    MessageToDict's order (:func:`vtrain.jobfile.schema.plain_fields`; a test holds both against the protos).
    """

    doc: str = ""
    default: Any = None
    vertex_default: bool = False
    examples: tuple[Any, ...] = ()
    vtrain_only: str = ""
    rest: str = ""
    rest_number: int = 0


@dataclass(frozen=True)
class Str(Declared):
    choices: tuple[str, ...] = ()

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not self.choices:
            ck.add(path, f"expected text, got {_type_name(value)}; quote it: '{ck.positions.text(path, value)}'")
            return None
        if not isinstance(value, str):
            allowed = f" (one of: {', '.join(self.choices)})" if self.choices else ""
            hint = ""
            if isinstance(value, bool):
                hint = (f"; YAML reads yes/no/on/off/true/false as booleans, quote the text: "
                        f"'{ck.positions.text(path, value)}'")
            ck.add(path, f"expected text{allowed}, got {_type_name(value)}{hint}")
            return None
        if "\x00" in value:
            ck.add(path, _NUL)
            return None
        if self.choices:
            word = value.strip().lower()
            if any("_" in choice for choice in self.choices):
                word = word.replace("-", "_")
            if word not in self.choices:
                ck.add(
                    path,
                    f"'{value}' is not allowed; allowed: {', '.join(self.choices)};"
                    f"{did_you_mean(value, self.choices)}".rstrip(";"),
                )
                return None
            return word
        return value


@dataclass(frozen=True)
class Int(Declared):
    minimum: int | None = None
    maximum: int | None = None
    allow_auto: bool = False

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, str) and value.strip().lower() == "auto":
            if self.allow_auto:
                return "auto"
            ck.add(path, "'auto' is only for cluster.reduction_server.replicas; give a whole number here")
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            extra = " or 'auto'" if self.allow_auto else ""
            ck.add(path, f"expected a whole number{extra}, got {_type_name(value)}")
            return None
        if self.minimum is not None and value < self.minimum:
            ck.add(path, f"must be at least {self.minimum}, got {value}")
            return None
        if self.maximum is not None and value > self.maximum:
            ck.add(path, f"must be at most {self.maximum}, got {value}")
            return None
        if not _fits_int64(value, path, ck):
            return None
        return value


@dataclass(frozen=True)
class Scalar(Declared):
    """A number or a text (tuning values); booleans and nulls are refused: Vertex has neither."""

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, str) and "\x00" in value:
            ck.add(path, _NUL)  # a trial passes its value as an argument: a NUL would end the local study
            return None
        if isinstance(value, int) and not isinstance(value, bool) and not _fits_int64(value, path, ck):
            return None
        if isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            if isinstance(value, float) and not math.isfinite(value):
                ck.add(path, f"expected a finite number, got {value}; give a finite one")
                return None
            return value
        hint = "; YAML reads yes/no/on/off/true/false as booleans, quote the text" if isinstance(value, bool) else ""
        ck.add(path, f"expected a number or a text, got {_type_name(value)}{hint}")
        return None

    def json_schema(self) -> dict[str, Any]:
        return {"type": ["number", "string"]}


@dataclass(frozen=True)
class OneOrList(Declared):
    """One item, or a list of them (`metric: {...}` or `metric: [{...}, {...}]`)."""

    item: Any

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, list):
            if not value:
                ck.add(path, "expected at least one entry, got an empty list")
                return None
            out = [self.item.check(v, (*path, i), ck) for i, v in enumerate(value)]
            return None if any(v is None for v in out) else out
        checked = self.item.check(value, path, ck)
        return None if checked is None else [checked]


@dataclass(frozen=True)
class Bool(Declared):
    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if not isinstance(value, bool):
            ck.add(path, f"expected true or false, got {_type_name(value)}")
            return None
        return value


@dataclass(frozen=True)
class Duration(Declared):
    zero_ok: bool = False  # 0 is a value of its own (scheduling.max_wait: wait indefinitely)

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if (seconds := parse_duration(value)) is None:
            problem = f"expected a duration like {DURATION_EXAMPLES}, got {_type_name(value)}"
        elif seconds <= 0 and not (seconds == 0 and self.zero_ok):
            problem = "must be longer than 0s"
        elif seconds > MAX_DURATION_S:
            problem = f"must be at most {MAX_DURATION_S}s (10,000 years, the longest a protobuf Duration holds)"
        else:
            return seconds
        return ck.add(path, problem)  # None: the problem is reported


@dataclass(frozen=True)
class Number(Declared):
    """A finite real number in [minimum, maximum] (or below `below` / above `above`, exclusive).

    Text that reads as a number is one: YAML 1.1 reads ``1e-3`` (no dot) as text, and a number is
    what was meant. `as_written` keeps an int an int (tuning ranges); otherwise the value is a float.
    """

    minimum: float | None = None
    maximum: float | None = None
    below: float | None = None
    above: float | None = None
    as_written: bool = False

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                ck.add(path, f"expected a number, got {_type_name(value)}; e.g. 0.001 or 1.0e-3")
                return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            ck.add(path, f"expected a number, got {_type_name(value)}")
            return None
        if self.as_written and isinstance(value, int) and not _fits_int64(value, path, ck):
            return None
        if isinstance(value, int) and abs(value).bit_length() > 1000:  # math.isfinite would overflow
            ck.add(path, f"expected a finite number, got one of {abs(value).bit_length()} bits; give a bound like 1e6")
            return None
        if not math.isfinite(value):
            ck.add(path, f"expected a finite number, got {value}; give a bound like 1e6")
            return None
        checks: tuple[tuple[float | None, str, Callable[[float], bool]], ...] = (
            (self.minimum, "at least", lambda m: value >= m), (self.maximum, "at most", lambda m: value <= m),
            (self.below, "below", lambda m: value < m), (self.above, "above", lambda m: value > m))
        for limit, words, holds in checks:
            if limit is not None and not holds(limit):
                ck.add(path, f"must be {words} {limit:g}, got {value:g}")
                return None
        return value if self.as_written else float(value)

    def json_schema(self) -> dict[str, Any]:
        """For `vtrain schema`: the bounds in JSON Schema's words, or the number's text (YAML 1.1's 1e-3)."""
        words = {"minimum": self.minimum, "maximum": self.maximum, "exclusiveMaximum": self.below,
                 "exclusiveMinimum": self.above}
        text = {"type": "string", "pattern": "^\\s*[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?\\s*$"}
        return {"anyOf": [{"type": "number", **{k: v for k, v in words.items() if v is not None}}, text]}


@dataclass(frozen=True)
class Seconds(Declared):
    """A duration that may be 0 or fractional, in seconds: `0.5s`, `2s`, `1m30s`, or a bare number."""

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        try:
            return parse_seconds(value)
        except DurationError:
            ck.add(path, f"expected seconds (a number) or a duration like 0.5s, 30s or 2m, got {_type_name(value)}")
            return None

    def json_schema(self) -> dict[str, Any]:
        """For `vtrain schema`: seconds as a number, or a duration such as 0.5s, 30s, 1m30s."""
        return {"anyOf": [{"type": "number", "minimum": 0},
                          {"type": "string", "pattern": DURATION_PATTERN}]}


@dataclass(frozen=True)
class EnvValue(Declared):
    """Environment values are text on Vertex; numbers are accepted and written as text."""

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, str) and "\x00" in value:
            ck.add(path, _NUL)  # a process environment is NUL-terminated C strings
            return None
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return ck.positions.text(path, value)  # ZIP: 01234 stays "01234" (YAML 1.1 reads octal 668)
        if isinstance(value, bool):
            ck.add(path, f"expected text, got a boolean; quote it: '{ck.positions.text(path, str(value).lower())}'")
        elif value is None:
            ck.add(path, "expected text, got nothing (null); quote it: ''")
        else:
            ck.add(path, f"expected text or a number, got {_type_name(value)}; an environment value is one string")
        return None


@dataclass(frozen=True)
class ListOf(Declared):
    item: Any
    single_ok: bool = False

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if self.single_ok and isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            ck.add(path, f"expected a list, got {_type_name(value)}")
            return None
        out = [self.item.check(v, (*path, i), ck) for i, v in enumerate(value)]
        return None if any(v is None for v in out) else out


@dataclass(frozen=True)
class MapOf(Declared):
    value: Any

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if not isinstance(value, dict):
            ck.add(path, f"expected a mapping of names to values, got {_type_name(value)}")
            return None
        bad = [k for k in value if "\x00" in str(k)]
        for key in bad:
            ck.add((*path, key), _NUL, key=True)
        out = {k: self.value.check(v, (*path, k), ck) for k, v in value.items()}
        return None if bad or any(v is None for v in out.values()) else out


@dataclass(frozen=True)
class RawFields(Declared):
    """A mapping of raw REST (camelCase) fields, passed through to the request (`vertex:`). Only the JSON
    shape is checked here; the names and values are checked against the installed aiplatform_v1 proto by
    :mod:`vtrain.jobfile.rules.passthrough`, which knows the message each mapping stands for."""

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if not isinstance(value, dict):
            ck.add(path, f"expected a mapping of camelCase Vertex AI fields, got {_type_name(value)}")
            return None
        return value if self._json(value, path, ck) else None

    def _json(self, value: Any, path: PathKey, ck: Checker) -> bool:
        if isinstance(value, dict):
            bad = [k for k in value if not isinstance(k, str)]
            for key in bad:
                ck.add((*path, key), f"field names are text, got {_type_name(key)}", key=True)
            return not bad and all([self._json(v, (*path, k), ck) for k, v in value.items()])
        if isinstance(value, list):
            return all([self._json(v, (*path, i), ck) for i, v in enumerate(value)])
        if isinstance(value, str) and "\x00" in value:
            ck.add(path, _NUL)
            return False
        if isinstance(value, float) and not math.isfinite(value):
            ck.add(path, f"expected a finite number, got {value}")
            return False
        if value is None or isinstance(value, (str, int, float, bool)):
            return True
        ck.add(path, f"expected a JSON value, got {_type_name(value)}")
        return False

    def json_schema(self) -> dict[str, Any]:
        return {"type": "object"}


@dataclass(frozen=True)
class Obj(Declared):
    fields: dict[str, Any]
    required: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if not isinstance(value, dict):
            ck.add(path, f"expected a mapping with keys {', '.join(self.fields)}, got {_type_name(value)}")
            return None
        out: dict[str, Any] = {}
        written: dict[str, str] = {}  # canonical name -> the spelling that gave it first
        ok = True
        for key, raw in value.items():
            name = self.aliases.get(key, key)
            if name not in self.fields:
                where = format_path(path) or "the top level"
                ck.add(
                    (*path, key),
                    f"unknown key '{key}' in {where}; allowed: {', '.join(self.fields)};"
                    f"{did_you_mean(key, tuple(self.fields))}".rstrip(";"),
                    key=True,
                )
                continue  # reported; the rest of the file is still checked
            if name in written:
                # `replicas` and `replica_count` (or `workers` and `worker`) name one key: merging them
                # would let whichever came last win in silence, so it is a duplicate like any other.
                ck.add((*path, key), self._duplicate(path, key, written[name], name, ck), key=True)
                self.fields[name].check(raw, (*path, key), ck)  # its value's own problems, reported too
                continue
            written[name] = key
            if name != key:
                ck.positions.alias((*path, key), (*path, name))
            checked = self.fields[name].check(raw, (*path, key), ck)
            ok = ok and checked is not None
            out[name] = checked
        for name in self.required:
            if name not in out and name not in value:
                where = f"in {format_path(path)}" if path else "at the top level"
                # A key `--set KEY=null` removed is blamed on that flag (it left a key position), not the file.
                removed = (*path, name) in ck.positions.keys
                ck.add((*path, name) if removed else path,
                       f"missing required key '{name}' {where}; add it (required: {', '.join(self.required)})",
                       key=True)
                ok = False
        return out if ok else None

    @staticmethod
    def _duplicate(path: PathKey, key: str, first: str, name: str, ck: Checker) -> str:
        """The message for a second spelling of one key, naming where the first one is."""
        at = ck.positions.of((*path, first), key=True)
        where = f"at {at.file or '<config>'}"
        if at.line is not None:
            where += f":{at.line}" + (f":{at.column}" if at.column is not None else "")
        elif (at.file or "").startswith("--set"):
            where = f"by {at.file}"
        if first == name:
            same = f"'{key}' is another name for '{name}', already given {where}"
        elif key == name:
            same = f"'{first}' (another name for '{name}') is already given {where}"
        else:
            same = f"'{key}' and '{first}' both mean '{name}', already given {where}"
        return f"duplicate key: {same}; keep only one"
