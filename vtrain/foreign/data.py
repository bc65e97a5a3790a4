"""Data that someone else wrote, read within bounds and checked field by field: the one reader.

A profile a trainer wrote, a run's ``result.json``, an answer from a Google API: vtrain reads them
as JSON and then uses their numbers. Each may be anything: a FIFO, /dev/zero, 3 GB, binary, 100,000
arrays deep (``json.loads`` then recurses into a ``RecursionError``), an array where an object
belongs, ``true`` where a count belongs, ``1e999`` (which Python reads as infinity) or ``NaN``.

:func:`read_json` and :func:`parse_json` read such a document bounded (regular files only, a size
cap, a nesting cap) and :class:`Doc` hands out its fields checked (a finite number of the right type
and range; a bool is not a number): whatever is wrong raises :class:`Unreadable`, one line that
names the source and the field (``run/profile/chief-0.json: unreadable: steps.median_s is inf;
allowed: a finite number ≥ 0``) and never repeats the document's content. Each foreign format has
one validator built on :class:`Doc`, next to the code that reads it; the caller states the fallback
(or refuses).

Imports only the ground: every stage may read through it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from vtrain.foreign import printable
from vtrain.userpaths import describe_oserror, read_bounded

#: Default caps: no document vtrain reads comes near them (a profile is ~2 KB, a result.json of a
#: long run a few MB); JSON nesting as protobuf's JSON parser allows it.
MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 100
#: The largest whole number a count or byte size may be (beyond it arithmetic on floats overflows).
MAX_COUNT = 10**18


class Unreadable(ValueError):
    """A foreign document (or one of its fields) vtrain cannot use; ``str`` is the one line to show."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(source, reason)
        self.source = source
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.source}: unreadable: {self.reason}"


def source_name(path: Path | str) -> str:
    """A file name as messages show it (it is foreign text too)."""
    return printable(str(path), limit=300)


def _deepest(value: Any, limit: int) -> int:
    """The nesting of `value`'s lists and dicts, without recursion; stops counting past `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def parse_json(data: bytes | str, source: str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """`data` as JSON, or :class:`Unreadable` naming `source`: not UTF-8, too large, too deep, not JSON.

    ``NaN``/``Infinity``/``1e999`` are parsed (as float); the format's validator says where they are."""
    size = len(data)
    if size > max_bytes:
        raise Unreadable(source, f"{size:,} bytes; at most {max_bytes:,} are read")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise Unreadable(source, f"not UTF-8 text (a binary file?): byte {err.start:,} cannot be decoded") from None
    else:
        text = data
    if not text.strip():
        raise Unreadable(source, "empty")
    try:
        value = json.loads(text)
    except RecursionError:
        raise Unreadable(source, f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as err:
        where = f" at line {err.lineno} column {err.colno}" if isinstance(err, json.JSONDecodeError) else ""
        raise Unreadable(source, f"not JSON{where}") from None
    if _deepest(value, max_depth) > max_depth:
        raise Unreadable(source, f"JSON nested deeper than {max_depth} levels")
    return value


def read_json(path: Path | str, *, source: str | None = None, max_bytes: int = MAX_BYTES,
              max_depth: int = MAX_DEPTH) -> Any:  # fmt: skip
    """The JSON document in regular file `path`, read bounded (:func:`~vtrain.userpaths.read_bounded`);
    :class:`Unreadable` naming the file for a missing, special, huge, binary, deep or broken one."""
    name = source or source_name(path)
    try:
        data = read_bounded(path, max_bytes)
    except OSError as err:
        raise Unreadable(name, describe_oserror(err)) from None
    return parse_json(data, name, max_bytes=max_bytes, max_depth=max_depth)


def kind(value: Any) -> str:
    """What `value` is, in words, without its content (a string or a list is not repeated)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("-inf" if value < 0 else "inf")
    if isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 24 else f"a {len(text)}-digit number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _bound(minimum: float | None, maximum: float | None) -> str:
    if maximum == MAX_COUNT:  # no real count comes near it: not worth saying
        maximum = None
    if minimum is not None and maximum is not None:
        return f" from {minimum:g} to {maximum:g}"
    if minimum is not None:
        return f" ≥ {minimum:g}"
    return f" ≤ {maximum:g}" if maximum is not None else ""


class Doc:
    """A parsed document, or a part of it, with where it came from; its fields come out checked.

    ``Doc(value, "result.json").mapping("restarts").items("events")`` and so on: each accessor
    returns the field (``None`` when absent or null and not `required`) or raises :class:`Unreadable`
    naming the field's path (``restarts.events[2].at``) and what is allowed."""

    def __init__(self, value: Any, source: str, path: str = "") -> None:
        self.value = value
        self.source = source
        self.path = path

    def _at(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        shown = key if key.isidentifier() else json.dumps(printable(key, limit=60))
        return f"{self.path}.{shown}" if self.path else shown

    def fail(self, field: str, value: Any, allowed: str) -> Unreadable:
        return Unreadable(self.source, f"{field or 'the document'} is {kind(value)}; allowed: {allowed}")

    def require_object(self) -> Doc:
        """This part, which must be a JSON object."""
        if not isinstance(self.value, dict):
            raise self.fail(self.path, self.value, "an object")
        return self

    def _get(self, key: str, required: bool, allowed: str) -> Any:
        self.require_object()
        value = self.value.get(key)
        if value is None and required:
            raise Unreadable(self.source, f"{self._at(key)} is missing; allowed: {allowed}")
        return value

    def mapping(self, key: str, *, required: bool = False) -> Doc | None:
        """The object at `key` as a Doc (None: absent or null)."""
        value = self._get(key, required, "an object")
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(self._at(key), value, "an object")
        return Doc(value, self.source, self._at(key))

    def mapping_or_empty(self, key: str) -> Doc:
        found = self.mapping(key)
        return found if found is not None else Doc({}, self.source, self._at(key))

    def entries(self, key: str) -> Iterator[tuple[str, Doc]]:
        """Each (name, value) of the object at `key` (nothing when absent)."""
        found = self.mapping(key)
        for name, value in (found.value if found is not None else {}).items():
            yield name, Doc(value, self.source, found._at(name) if found is not None else name)

    def items(self, key: str) -> Iterator[Doc]:
        """Each element of the array at `key` (nothing when absent or null)."""
        value = self._get(key, False, "an array")
        if value is None:
            return
        if not isinstance(value, list):
            raise self.fail(self._at(key), value, "an array")
        for i, item in enumerate(value):
            yield Doc(item, self.source, f"{self._at(key)}[{i}]")

    def elements(self) -> list[Doc]:
        """This part's elements, which must be an array."""
        if not isinstance(self.value, list):
            raise self.fail(self.path, self.value, "an array")
        return [Doc(item, self.source, f"{self.path}[{i}]") for i, item in enumerate(self.value)]

    def number(self, key: str | int, *, minimum: float | None = 0.0, maximum: float | None = None,
               required: bool = False) -> float | None:  # fmt: skip
        """A finite number (int or float, never a bool) within [minimum, maximum]."""
        allowed = f"a finite number{_bound(minimum, maximum)}"
        value = self._index(key, required, allowed)
        if value is None:
            return None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok:
            try:
                ok = math.isfinite(value) and abs(value) <= 1e300
            except OverflowError:  # an int too large for a float
                ok = False
        if not ok or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise self.fail(self._at(key), value, allowed)
        return float(value)

    def integer(self, key: str | int, *, minimum: int | None = 0, maximum: int | None = MAX_COUNT,
                required: bool = False, whole_floats: bool = False) -> int | None:  # fmt: skip
        """A whole number (never a bool; a float such as 12.0 only with `whole_floats`) within range."""
        allowed = f"a whole number{_bound(minimum, maximum)}"
        value = self._index(key, required, allowed)
        if value is None:
            return None
        if whole_floats and isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or \
                (minimum is not None and value < minimum) or (maximum is not None and value > maximum):  # fmt: skip
            raise self.fail(self._at(key), value, allowed)
        return value

    def text(self, key: str | int, *, required: bool = False, limit: int = 1024) -> str | None:
        """A string of at most `limit` characters (shown through :func:`vtrain.foreign.printable` by callers)."""
        value = self._index(key, required, "a string")
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(self._at(key), value, "a string")
        if len(value) > limit:
            raise Unreadable(self.source, f"{self._at(key)} is a string of {len(value):,} characters; "
                                          f"allowed: at most {limit:,}")  # fmt: skip
        return value

    def string(self, *, limit: int = 1024) -> str:
        """This part, which must be a string of at most `limit` characters."""
        if not isinstance(self.value, str) or len(self.value) > limit:
            raise self.fail(self.path, self.value, f"a string of at most {limit:,} characters")
        return self.value

    def flag(self, key: str, *, required: bool = False) -> bool | None:
        value = self._index(key, required, "true or false")
        if value is not None and not isinstance(value, bool):
            raise self.fail(self._at(key), value, "true or false")
        return value

    def _index(self, key: str | int, required: bool, allowed: str) -> Any:
        if isinstance(key, int):
            if not isinstance(self.value, list):
                raise self.fail(self.path, self.value, "an array")
            return self.value[key] if key < len(self.value) else None
        return self._get(key, required, allowed)


def as_mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one (for fields a validator already checked)."""
    return value if isinstance(value, dict) else {}


__all__ = ["MAX_BYTES", "MAX_COUNT", "MAX_DEPTH", "Doc", "Unreadable", "as_mapping", "kind", "parse_json",
           "read_json", "source_name"]
