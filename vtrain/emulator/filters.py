"""The ListCustomJobs filter language (AIP-160), as far as Vertex documents it for jobs.

ListCustomJobsRequest.filter (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.customJobs/list):
"display_name supports =, != comparisons, and : wildcard. state supports =, != comparisons.
create_time supports =, !=, <, <=, >, >= comparisons. create_time must be in RFC 3339 format.
labels supports general map functions that is: labels.key=value - key:value equality labels.key:*
- key existence", with examples combining terms by AND, OR and NOT. Terms combine with `AND`,
`OR` (which binds tighter, as AIP-160 says), `NOT`/`-` and parentheses; values quoted or bare.
`labels:KEY` (AIP-160's map presence) is taken too. Any other field (update_time, start_time,
end_time, name...) is a 400, as it is undocumented; a filter longer than MAX_FILTER or nested
deeper than MAX_NESTING is a 400 too.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from google.cloud.aiplatform_v1.types import JobState as _JobState

from vtrain.emulator.errors import invalid_argument

Predicate = Callable[[Any], bool]

_TERM_RE = re.compile(
    r"(?P<field>[A-Za-z_][A-Za-z0-9_.\-]*)\s*(?P<op><=|>=|!=|=|<|>|:)\s*"
    r'(?P<value>"(?:[^"\\]|\\.)*"|[^\s"()]+)'
)
_KEYWORD_RE = re.compile(r"(AND|OR|NOT)(?=[\s(]|$)")
_TIME_FIELDS = ("create_time",)
MAX_FILTER = 20000
MAX_NESTING = 32
JobState: Any = _JobState  # proto-plus ships no types: its enums read as plain ints to a checker
_STATES = {s.name for s in JobState}


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
    result: bool = {
        "=": left == right,
        "!=": left != right,
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }[op]
    return result


def _term(m: re.Match[str]) -> Predicate:
    text = m.group(0)
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
        raise invalid_argument(f"Invalid filter: unsupported field or operator in '{text[:200]}'.")
    return pred


class _Parser:
    """expression := and; and := or (AND or)*; or := unary (OR unary)*; unary := (NOT | -) unary | primary;
    primary := ( expression ) | term. OR binds tighter than AND (AIP-160)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.depth = text, 0, 0

    def fail(self, why: str) -> Exception:
        return invalid_argument(f"Invalid filter at character {self.pos + 1}: {why} in '{self.text[:200]}'.")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def keyword(self, word: str) -> bool:
        self.skip()
        m = _KEYWORD_RE.match(self.text, self.pos)
        if m and m.group(1) == word:
            self.pos = m.end()
            return True
        return False

    def parse(self) -> Predicate:
        pred = self.conjunction()
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("unexpected text (terms are joined by AND or OR)")
        return pred

    def conjunction(self) -> Predicate:
        preds = [self.disjunction()]
        while self.keyword("AND"):
            preds.append(self.disjunction())
        return preds[0] if len(preds) == 1 else (lambda j: all(p(j) for p in preds))

    def disjunction(self) -> Predicate:
        preds = [self.unary()]
        while self.keyword("OR"):
            preds.append(self.unary())
        return preds[0] if len(preds) == 1 else (lambda j: any(p(j) for p in preds))

    def unary(self) -> Predicate:
        negations = 0  # a loop, not recursion: NOT NOT ... cannot exhaust the stack
        while True:
            self.skip()
            if self.keyword("NOT"):
                negations += 1
            elif self.text.startswith("-", self.pos):
                self.pos += 1
                negations += 1
            else:
                break
        inner = self.primary()
        return (lambda j: not inner(j)) if negations % 2 else inner

    def primary(self) -> Predicate:
        self.skip()
        if self.text.startswith("(", self.pos):
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise self.fail(f"parentheses nested deeper than {MAX_NESTING}")
            self.pos += 1
            pred = self.conjunction()
            self.skip()
            if not self.text.startswith(")", self.pos):
                raise self.fail("a '(' is not closed")
            self.pos += 1
            self.depth -= 1
            return pred
        m = _TERM_RE.match(self.text, self.pos)
        if not m:
            if self.text.count('"', self.pos) % 2:
                raise self.fail("unterminated string")
            raise self.fail("expected a term such as state=JOB_STATE_RUNNING")
        self.pos = m.end()
        return _term(m)


def compile_filter(text: str) -> Predicate:
    """Compile once per request; an empty filter matches everything."""
    if len(text) > MAX_FILTER:
        raise invalid_argument(f"Invalid filter: longer than {MAX_FILTER} characters.")
    if not text.strip():
        return lambda job: True
    return _Parser(text).parse()
