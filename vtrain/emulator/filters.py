"""The subset of the ListCustomJobs filter language (AIP-160) the emulator understands.

Supported, combined with `AND` (and `NOT`/`-` per term), values quoted or bare:
`state=JOB_STATE_RUNNING`, `state!=...`, `display_name="x"`, `display_name:"prefix*"`,
`labels.KEY=VALUE`, `labels.KEY:*`, `labels:KEY`, and `create_time|update_time|start_time|
end_time` compared (=, !=, <, <=, >, >=) with an RFC 3339 timestamp. `OR` and parentheses,
which the real API accepts, are answered with 400 so a test never silently gets a wrong list.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from google.cloud.aiplatform_v1.types import JobState

from vtrain.emulator.errors import invalid_argument

Predicate = Callable[[Any], bool]

_TERM_RE = re.compile(
    r"^(?P<neg>NOT\s+|-)?(?P<field>[A-Za-z_][A-Za-z0-9_.\-]*)\s*(?P<op><=|>=|!=|=|<|>|:)\s*"
    r'(?P<value>"(?:[^"\\]|\\.)*"|[^\s"()]+)$'
)
_TIME_FIELDS = ("create_time", "update_time", "start_time", "end_time")
_STATES = {s.name for s in JobState}


def _split_and(text: str) -> list[str]:
    """Split on AND outside quotes; reject OR and parentheses outside quotes."""
    terms, current, quoted, i = [], [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        if not quoted:
            if ch in "()":
                raise invalid_argument("Unsupported filter: parentheses are not supported by the emulator.")
            word = re.match(r"\s+(AND|OR)\s+", text[i:])
            if word:
                if word.group(1) == "OR":
                    raise invalid_argument("Unsupported filter: OR is not supported by the emulator.")
                terms.append("".join(current).strip())
                current, i = [], i + word.end()
                continue
        current.append(ch)
        i += 1
    if quoted:
        raise invalid_argument(f"Invalid filter: unterminated string in '{text}'.")
    terms.append("".join(current).strip())
    return [t for t in terms if t]


def _unquote(value: str) -> str:
    if value.startswith('"') and value.endswith('"'):
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def _timestamp(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as err:
        raise invalid_argument(f"Invalid filter: '{value}' is not an RFC 3339 timestamp.") from err


def _compare(op: str, left: Any, right: Any) -> bool:
    return {
        "=": left == right,
        "!=": left != right,
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }[op]


def _term(text: str) -> Predicate:
    m = _TERM_RE.match(text)
    if not m:
        raise invalid_argument(f"Invalid filter term '{text}'.")
    field, op, value = m["field"], m["op"], _unquote(m["value"])
    pred: Predicate
    if field == "state":
        if op not in ("=", "!=") or value not in _STATES:
            raise invalid_argument(
                f"Invalid filter: state supports = and != with a JobState name, got '{text}'."
            )
        number = JobState[value].value
        pred = (lambda j: j.state == number) if op == "=" else (lambda j: j.state != number)
    elif field == "display_name":
        if op == ":":
            pred = lambda j: fnmatch.fnmatchcase(j.display_name, value)  # noqa: E731
        elif op in ("=", "!="):
            pred = lambda j: _compare(op, j.display_name, value)  # noqa: E731
        else:
            raise invalid_argument(f"Invalid filter: display_name supports =, != and :, got '{text}'.")
    elif field == "labels" and op == ":":
        pred = lambda j: value in j.labels  # noqa: E731
    elif field.startswith("labels.") and op in ("=", "!=", ":"):
        key = field[len("labels.") :]
        if op == ":" and value == "*":
            pred = lambda j: key in j.labels  # noqa: E731
        elif op == "!=":
            pred = lambda j: j.labels.get(key) != value  # noqa: E731
        else:
            pred = lambda j: j.labels.get(key) == value  # noqa: E731
    elif field in _TIME_FIELDS and op != ":":
        when = _timestamp(value)

        def pred(j: Any, field: str = field) -> bool:
            if not j.HasField(field):
                return False
            return _compare(op, getattr(j, field).ToDatetime(tzinfo=timezone.utc), when)
    else:
        raise invalid_argument(f"Invalid filter: unsupported field or operator in '{text}'.")
    if m["neg"]:
        return lambda j, p=pred: not p(j)
    return pred


def compile_filter(text: str) -> Predicate:
    """Compile once per request; an empty filter matches everything."""
    preds = [_term(t) for t in _split_and(text.strip())] if text.strip() else []
    return lambda job: all(p(job) for p in preds)
