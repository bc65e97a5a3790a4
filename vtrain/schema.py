"""The job file's shape (version 1), checked on the raw YAML before any object is built.

Every problem is collected, never just the first: unknown keys get the nearest
valid key suggested, wrong types say what was expected. What passes comes out
normalized (durations in seconds, enum words lower-case, env values as text),
ready for :mod:`vtrain.config` to turn into dataclasses.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from vtrain.constants import SCHEDULING_STRATEGIES, STRATEGIES
from vtrain.errors import Problem
from vtrain.yamlpos import PathKey, Positions, format_path

RESERVATION_AFFINITIES = ("none", "any", "specific")
#: `tuning:` words; vtrain/tuning/model.py maps them to StudySpec's enums.
TUNING_GOALS = ("maximize", "minimize")
TUNING_PARAMETER_TYPES = ("double", "integer", "discrete", "categorical")
TUNING_SCALES = ("linear", "log", "reverse_log")
TUNING_ALGORITHMS = ("default", "random", "grid")
TUNING_EARLY_STOPPING = ("median", "none")
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")

MAX_DURATION_S = 315_576_000_000
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
_DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """' did you mean X?' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = difflib.get_close_matches(str(word).lower(), list(lowered), n=1, cutoff=0.6)
        close = [lowered[c] for c in close]
    return f" did you mean '{close[0]}'?" if close else ""


def parse_duration(value: Any) -> int | None:
    """Seconds from `90s`, `30m`, `24h`, `7d`, `1h30m` or a bare number of seconds; None if invalid."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if value >= 0 and math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    text = value.strip().lower().replace(" ", "")
    if text.isdigit():
        return int(text)
    pos, total = 0, 0.0
    for match in _DURATION_RE.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        return None
    return int(total)


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


@dataclass(frozen=True)
class Str:
    choices: tuple[str, ...] = ()

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not self.choices:
            ck.add(path, f"expected text, got {_type_name(value)}; quote it: '{value}'")
            return None
        if not isinstance(value, str):
            allowed = f" (one of: {', '.join(self.choices)})" if self.choices else ""
            hint = ""
            if isinstance(value, bool):
                hint = "; YAML reads yes/no/on/off/true/false as booleans, quote the text"
            ck.add(path, f"expected text{allowed}, got {_type_name(value)}{hint}")
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
class Int:
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
        return value


@dataclass(frozen=True)
class Number:
    """A finite number (int or float), as tuning ranges and discrete values are."""

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, str):
            try:  # YAML 1.1 reads 1e-3 (no dot) as text; a number is what was meant
                value = float(value)
            except ValueError:
                ck.add(path, f"expected a number, got {_type_name(value)}; e.g. 0.001 or 1.0e-3")
                return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            ck.add(path, f"expected a number, got {_type_name(value)}")
            return None
        if not math.isfinite(value):
            ck.add(path, f"expected a finite number, got {value}; give a bound like 1e6")
            return None
        return value


@dataclass(frozen=True)
class Scalar:
    """A number or a text (tuning values); booleans and nulls are refused: Vertex has neither."""

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            if isinstance(value, float) and not math.isfinite(value):
                ck.add(path, f"expected a finite number, got {value}; give a finite one")
                return None
            return value
        hint = "; YAML reads yes/no/on/off/true/false as booleans, quote the text" if isinstance(value, bool) else ""
        ck.add(path, f"expected a number or a text, got {_type_name(value)}{hint}")
        return None


@dataclass(frozen=True)
class OneOrList:
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
class Bool:
    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if not isinstance(value, bool):
            ck.add(path, f"expected true or false, got {_type_name(value)}")
            return None
        return value


@dataclass(frozen=True)
class Duration:
    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        seconds = parse_duration(value)
        if seconds is None:
            ck.add(path, f"expected a duration like 90s, 30m, 24h or 7d, got {_type_name(value)}")
            return None
        if seconds <= 0:
            ck.add(path, "must be longer than 0s")
            return None
        if seconds > MAX_DURATION_S:
            ck.add(path, f"must be at most {MAX_DURATION_S}s (10,000 years, the longest a protobuf Duration holds)")
            return None
        return seconds


@dataclass(frozen=True)
class EnvValue:
    """Environment values are text on Vertex; numbers are accepted and written as text."""

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, bool):
            ck.add(path, f"expected text, got a boolean; quote it: '{str(value).lower()}'")
        elif value is None:
            ck.add(path, "expected text, got nothing (null); quote it: ''")
        else:
            ck.add(path, f"expected text or a number, got {_type_name(value)}; an environment value is one string")
        return None


@dataclass(frozen=True)
class ListOf:
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
class MapOf:
    value: Any

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if not isinstance(value, dict):
            ck.add(path, f"expected a mapping of names to values, got {_type_name(value)}")
            return None
        out = {k: self.value.check(v, (*path, k), ck) for k, v in value.items()}
        return None if any(v is None for v in out.values()) else out


@dataclass(frozen=True)
class Obj:
    fields: dict[str, Any]
    required: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)

    def check(self, value: Any, path: PathKey, ck: Checker) -> Any:
        if not isinstance(value, dict):
            ck.add(path, f"expected a mapping with keys {', '.join(self.fields)}, got {_type_name(value)}")
            return None
        out: dict[str, Any] = {}
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
            if name != key:
                ck.positions.alias((*path, key), (*path, name))
            checked = self.fields[name].check(raw, (*path, key), ck)
            ok = ok and checked is not None
            out[name] = checked
        for name in self.required:
            if name not in out and name not in value:
                where = f"in {format_path(path)}" if path else "at the top level"
                ck.add(path, f"missing required key '{name}' {where}; add it (required: {', '.join(self.required)})",
                       key=True)
                ok = False
        return out if ok else None


_machine_fields = {
    "machine_type": Str(),
    "accelerator": Str(),
    "accelerator_count": Int(minimum=0),
    "tpu_topology": Str(),
    "boot_disk": Obj({"type": Str(BOOT_DISK_TYPES), "size_gb": Int()}),
}


def _pool(allow_auto: bool = False) -> Obj:
    return Obj(
        {
            "replicas": Int(minimum=0, maximum=2**63 - 1, allow_auto=allow_auto),  # replicaCount is an int64
            **_machine_fields,
            "args": ListOf(Str(), single_ok=True),
            "env": MapOf(EnvValue()),
        },
        aliases={"replica_count": "replicas"},
    )


JOB_SCHEMA = Obj(
    {
        "version": Int(minimum=1, maximum=1),
        "name": Str(),
        "project": Str(),
        "region": Str(),
        "staging_bucket": Str(),
        "base_output_dir": Str(),
        "service_account": Str(),
        "network": Str(),
        "reserved_ip_ranges": ListOf(Str(), single_ok=True),
        "labels": MapOf(Str()),
        "tensorboard": Str(),
        "enable_web_access": Bool(),
        "enable_dashboard_access": Bool(),
        "persistent_resource_id": Str(),
        "kms_key": Str(),
        "trainer": Obj(
            {
                "package": Str(),
                "package_uris": ListOf(Str(), single_ok=True),
                "container": Obj(
                    {"image_uri": Str(), "command": ListOf(Str(), single_ok=True)},
                    required=("image_uri",),
                ),
                "module": Str(),
                "image": Str(),
                "args": ListOf(Str(), single_ok=True),
                "env": MapOf(EnvValue()),
            }
        ),
        "distribution_strategy": Str(STRATEGIES),
        "cluster": Obj(
            {
                "chief": _pool(),
                "workers": _pool(),
                "parameter_servers": _pool(),
                "reduction_server": _pool(allow_auto=True),
                "evaluator": _pool(),
            },
            required=("chief",),
            aliases={"worker": "workers", "ps": "parameter_servers", "reducers": "reduction_server"},
        ),
        "scheduling": Obj(
            {
                "timeout": Duration(),
                "restart_job_on_worker_restart": Bool(),
                "disable_retries": Bool(),
                "strategy": Str(SCHEDULING_STRATEGIES),
                "max_wait": Duration(),
            }
        ),
        "reservation": Obj({"affinity": Str(RESERVATION_AFFINITIES), "name": Str()}),
        "tuning": Obj(
            {
                "metric": OneOrList(Obj({"name": Str(), "goal": Str(TUNING_GOALS)}, required=("name", "goal"))),
                "parameters": MapOf(
                    Obj(
                        {
                            "type": Str(TUNING_PARAMETER_TYPES),
                            "min": Number(),
                            "max": Number(),
                            "scale": Str(TUNING_SCALES),
                            "values": ListOf(Scalar()),
                        },
                        required=("type",),
                    )
                ),
                "algorithm": Str(TUNING_ALGORITHMS),
                "max_trials": Int(minimum=1, maximum=2**31 - 1),
                "parallel_trials": Int(minimum=1, maximum=2**31 - 1),
                "max_failed_trials": Int(minimum=0, maximum=2**31 - 1),
                "early_stopping": Str(TUNING_EARLY_STOPPING),
            },
            required=("metric", "parameters", "max_trials"),
            aliases={"metrics": "metric"},
        ),
    },
    required=("name", "trainer", "cluster"),
)


def check_job(data: Any, positions: Positions) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Check raw job-file data against the schema; return (normalized data or None, problems)."""
    ck = Checker(positions)
    if data is None:
        ck.add((), "the job file is empty; it needs at least name, trainer and cluster")
        return None, ck.problems
    out = JOB_SCHEMA.check(data, (), ck)
    return out, ck.problems
