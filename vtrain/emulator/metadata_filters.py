"""The list filters and orderBy of Vertex ML Metadata and TensorBoard resources (AIP-160), as far as the
REST reference documents them and the SDK sends them.

ListContextsRequest.filter (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.metadataStores.contexts/list):
attribute filters (`display_name = "test"`, `schema_title`, `create_time`, `update_time` with RFC 3339
times), `metadata.FIELD.string_value|number_value|bool_value`, `parent_contexts:"NAME"` and
`child_contexts:"NAME"` (several names comma-separated: any of them), `labels.KEY`; artifacts and
executions take `in_context("NAME")`, `uri` and `state`; TensorBoards `is_default`. Terms combine with
AND, OR, NOT and parentheses (filters.py's grammar, the SDK's `_make_filter_string` output included).
Any other field is a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from vtrain.emulator.errors import invalid_argument
from vtrain.emulator.filters import MAX_FILTER, Predicate, _compare, _Parser, _timestamp, _unquote

_QUOTED = r'"(?:[^"\\]|\\.)*"'
_TERM_RE = re.compile(
    rf"(?:(?P<call>in_context)\s*\(\s*(?P<arg>{_QUOTED})\s*\))|"
    r"(?:(?P<field>[A-Za-z_][A-Za-z0-9_.\-]*)\s*(?P<op><=|>=|!=|=|<|>|:)\s*"
    rf"(?P<value>{_QUOTED}(?:\s*,\s*{_QUOTED})*|[^\s\"()]+))"
)
_SIMPLE = {"display_name": "displayName", "schema_title": "schemaTitle", "schema_version": "schemaVersion",
           "uri": "uri", "state": "state", "description": "description"}  # fmt: skip
_TIMES = {"create_time": "createTime", "update_time": "updateTime"}
_ORDER = {**_TIMES, "display_name": "displayName"}
MAX_ORDER = 500

#: What a filter term reads of the store: ("in_context", NAME) the contexts an artifact or execution is
#: in; ("children", NAME) a context's child contexts.
Membership = Callable[[str, str], set[str]]


def compile_metadata_filter(text: str, fields: frozenset[str], members: Membership) -> Predicate:
    """A predicate over REST dicts; `fields` are the terms this collection takes (beyond the common ones)."""
    if len(text) > MAX_FILTER:
        raise invalid_argument(f"Invalid filter: longer than {MAX_FILTER} characters.")
    if not text.strip():
        return lambda item: True

    def term(m: re.Match[str]) -> Predicate:
        return _term(m, fields, members)

    return _Parser(text, term, _TERM_RE, 'schema_title="system.Experiment"').parse()


def _term(m: re.Match[str], fields: frozenset[str], members: Membership) -> Predicate:
    text = m.group(0)
    if m["call"]:
        if "in_context" not in fields:
            raise invalid_argument(f"Invalid filter: in_context() is not supported here: '{text[:200]}'.")
        context = _unquote(m["arg"])
        return lambda item: context in members("in_context", item.get("name", ""))
    field, op, raw = m["field"], m["op"], m["value"]
    values = [_unquote(v) for v in re.findall(_QUOTED, raw)] if raw.startswith('"') else [raw]
    value = values[0]
    if field in ("parent_contexts", "child_contexts") and field in fields and op == ":":
        wanted = set(values)
        if field == "child_contexts":
            return lambda item: bool(wanted & members("children", item.get("name", "")))
        return lambda item: bool(wanted & set(item.get("parentContexts", [])))
    if len(values) > 1:
        raise invalid_argument(f"Invalid filter: several values only for parent_contexts: '{text[:200]}'.")
    if field in _SIMPLE and (field in fields or field in ("display_name", "schema_title", "schema_version",
                                                         "description")) and op in ("=", "!=", ":"):  # fmt: skip
        key = _SIMPLE[field]
        if op == ":":
            return lambda item: value in str(item.get(key, ""))
        return lambda item: _compare(op, str(item.get(key, "")), value)
    if field == "is_default" and "is_default" in fields and op in ("=", "!=") and value in ("true", "false"):
        flag = value == "true"
        return lambda item: _compare(op, bool(item.get("isDefault", False)), flag)
    if field in _TIMES and op != ":":
        when, key = _timestamp(value), _TIMES[field]
        return lambda item: key in item and _compare(op, _timestamp(item[key]), when)
    if field.startswith("labels.") and op in ("=", "!=", ":"):
        label = field[len("labels.") :]
        if op == ":" and value == "*":
            return lambda item: label in item.get("labels", {})
        if op == "!=":
            return lambda item: item.get("labels", {}).get(label) != value
        return lambda item: item.get("labels", {}).get(label) == value
    meta = re.fullmatch(r"metadata\.([A-Za-z0-9_\-]+)\.(string|number|bool)_value", field)
    if meta and op != ":" and "metadata" in fields:
        key, kind = meta.group(1), meta.group(2)
        want: Any = value
        if kind == "number":
            try:
                want = float(value)
            except ValueError:
                raise invalid_argument(f"Invalid filter: '{value[:40]}' is not a number in '{text[:200]}'.") from None
        elif kind == "bool":
            want = value == "true"

        def pred(item: dict[str, Any]) -> bool:
            got = item.get("metadata", {}).get(key)
            if kind == "number" and not isinstance(got, (int, float)) or kind == "bool" and not isinstance(got, bool):
                return False
            return got is not None and _compare(op, got, want)

        return pred
    raise invalid_argument(f"Invalid filter: unsupported field or operator in '{text[:200]}'.")


def order_key(text: str) -> list[tuple[str, bool]]:
    """orderBy: `FIELD [desc]`, comma-separated, of create_time, update_time and display_name."""
    if len(text) > MAX_ORDER:
        raise invalid_argument(f"Invalid order_by: longer than {MAX_ORDER} characters.")
    order: list[tuple[str, bool]] = []
    for part in (p.strip() for p in text.split(",")) if text.strip() else ():
        words = part.split()
        direction_ok = len(words) == 1 or (len(words) == 2 and words[1] in ("asc", "desc"))
        if not words or words[0] not in _ORDER or not direction_ok:
            raise invalid_argument(f"Invalid order_by '{part[:100]}': use create_time, update_time or display_name, "
                                   "optionally followed by desc.")
        order.append((_ORDER[words[0]], len(words) == 2 and words[1] == "desc"))
    return order


def ordered(items: list[dict[str, Any]], order: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    """`items` sorted by `order` (stable: the last key first)."""
    for key, desc in reversed(order):
        items = sorted(items, key=lambda item: str(item.get(key, "")), reverse=desc)
    return items


__all__ = ["compile_metadata_filter", "order_key", "ordered"]
