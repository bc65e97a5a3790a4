"""YAML → plain data, keeping the file position of every key and value.

Errors must point at `file:line:col`, so the job file is composed into YAML
nodes and walked by hand: each key's and value's mark is recorded under its
key path. Duplicate keys, which PyYAML silently accepts (last one wins), are
reported here. Only `yaml.SafeLoader` is used: no Python object tags.

:func:`job_value` is the one conversion of a job value, whoever made it: every scalar this reader
constructs and every value of a job given as a mapping (:func:`vtrain.load_config`) passes through
it, and it raises nothing. A whole number of more digits than Python converts (4,300: past them
``int``/``str`` raise ``ValueError``) is a problem at its key, before PyYAML is asked to read it; so is
a scalar PyYAML cannot construct (``!!bool maybe``, ``!!int x``, a date with month 13); a YAML 1.1
date is the text as written (no job value is a date); ``str``/``int``/``float`` subclasses (a str enum,
``IntEnum``, numpy's ``float64``) become the plain value, as ``json.dumps`` writes them.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from vtrain.errors import Problem
from vtrain.userpaths import shown

PathKey = tuple[str | int, ...]


@dataclass(frozen=True)
class Position:
    file: str | None
    line: int | None = None
    column: int | None = None


@dataclass
class Positions:
    """Where each key path came from: the value's position and, for mapping entries, the key's."""

    values: dict[PathKey, Position] = field(default_factory=dict)
    keys: dict[PathKey, Position] = field(default_factory=dict)
    default: Position = field(default_factory=lambda: Position(None))
    #: The source text of each unquoted scalar YAML 1.1 read as something else (01234 → 668, 1.10 → 1.1,
    #: 0x1F → 31, 1:30 → 90, off → False): a field that is text takes what was written, not the number.
    texts: dict[PathKey, str] = field(default_factory=dict)

    def text(self, path: PathKey, value: Any) -> str:
        """`value` as the user wrote it when that is known, else as Python writes it."""
        return self.texts.get(tuple(path), str(value))

    def alias(self, written: PathKey, canonical: PathKey) -> None:
        """Make positions recorded under a key alias (`ps`) findable by the canonical name."""
        n = len(written)
        tables: tuple[dict[PathKey, Any], ...] = (self.values, self.keys, self.texts)
        for table in tables:
            for path in [p for p in table if p[:n] == written]:
                table.setdefault(canonical + path[n:], table[path])

    def of(self, path: PathKey, *, key: bool = False) -> Position:
        """Position of `path`, falling back to the nearest ancestor that has one."""
        table = self.keys if key else self.values
        probe = tuple(path)
        while probe:
            if probe in table:
                return table[probe]
            if not key and probe in self.keys:
                return self.keys[probe]
            probe = probe[:-1]
        return self.values.get((), self.default)


def format_path(path: PathKey) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part if part.isprintable() else part.encode("unicode_escape").decode("ascii")  # NUL, newline
            out += f".{text}" if out else text
    return out


_PLAIN_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})
#: A job file has hundreds of values (a few thousand at the very most: 100 env vars in each of
#: five pools); aliases (`*a`) that expand past this are a "billion laughs". Counted twice: while
#: the parser composes the text (so a million keys stop at the limit, not after all of them are
#: built) and while the walk expands aliases.
MAX_NODES = 20_000
#: A job file is a few kB; this bounds the reading and the parsing before either starts.
MAX_BYTES = 1 << 20


#: The most digits a whole number may have: CPython's default limit on int/str conversion (a lower
#: PYTHONINTMAXSTRDIGITS lowers it too). No job value is near it: Vertex takes 64-bit integers.
MAX_INT_DIGITS = 4300
_INT_TAG = "tag:yaml.org,2002:int"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
#: What PyYAML's SafeLoader raises for a scalar it cannot construct besides YAMLError (`!!int x`:
#: ValueError, `!!bool maybe`: KeyError, `!!float ""`: IndexError, `!!timestamp x`: AttributeError).
_CONSTRUCT_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, ArithmeticError)


def int_digits_limit() -> int:
    """The most digits a job's whole number may have here (see :data:`MAX_INT_DIGITS`)."""
    python = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    return min(MAX_INT_DIGITS, python) if python else MAX_INT_DIGITS


def _too_many_digits(digits: str) -> str:
    limit = int_digits_limit()
    return f"a whole number of {digits} digits; a job value has at most {limit:,} (Vertex takes 64-bit integers)"


def job_value(value: Any) -> tuple[Any, str | None]:
    """One scalar of a job (from YAML or from a caller's mapping) as job-file data: (the plain value,
    None), or (None, why it is not one). Never raises. Plain: exact ``str``, ``int``, ``float``,
    ``bool`` and None; a subclass of str, int or float is its plain value; a whole number of more
    than :func:`int_digits_limit` digits is refused (``str()`` of it would raise)."""
    if value is None or isinstance(value, bool):
        return value, None
    if isinstance(value, int):
        plain, limit = int.__index__(value), int_digits_limit()
        if plain.bit_length() > 3 * limit and abs(plain) >= 10**limit:  # under 3 bits a digit: surely fewer
            return None, _too_many_digits(f"more than {limit:,}")
        return plain, None
    if isinstance(value, float):
        return float.__float__(value), None
    if isinstance(value, str):
        return str.__str__(value), None
    member = " (an enum member: give its .value)" if isinstance(value, enum.Enum) else ""
    return None, (f"{type(value).__name__!r} is not job-file data{member}; use a mapping, list, str, int, float, "
                  "bool or None")


class _TooLarge(Exception):
    """The document has, or expands (through aliases) to, more than MAX_NODES values."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer stops at MAX_NODES nodes, rather than composing them all first."""

    composed = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.composed += 1
        if self.composed > MAX_NODES:
            raise _TooLarge
        return super().compose_node(parent, index)


def _pos(file: str, mark: yaml.Mark | None) -> Position:
    if mark is None:
        return Position(file)
    return Position(file, mark.line + 1, mark.column + 1)


def _yaml_error_problem(err: yaml.YAMLError, file: str) -> Problem:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    text = str(problem)
    if "'\\t'" in text or "\\t" in text:
        text = "tab character found; YAML indentation must use spaces, not tabs"
    else:
        context = getattr(err, "context", None)
        if context and text.startswith("but "):  # PyYAML splits "expected X but found Y" in two
            text, context = f"{context} {text}", None
        text = f"YAML syntax error: {text}" + (f" ({context})" if context else "")
    pos = _pos(file, mark)
    return Problem(path="", message=text, file=file, line=pos.line, column=pos.column)


def _escaped(key: str | int) -> str | int:
    return key.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(key, str) else key


class _Walker:
    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.positions = Positions(default=Position(file))
        self.problems: list[Problem] = []
        self.nodes = 0

    def walk(self, node: yaml.Node, path: PathKey) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooLarge
        # A block collection starts on the line after its key; a problem with the whole
        # section reads better at the key, so only scalars and flow collections are recorded.
        block = isinstance(node, yaml.CollectionNode) and not node.flow_style
        if not block or not path:
            self.positions.values[path] = _pos(self.file, node.start_mark)
        if isinstance(node, yaml.CollectionNode) and node.tag not in _PLAIN_TAGS:
            # Scalars with such tags fail in SafeLoader; collections are walked here, so refuse them here.
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            self._problem(path, node, f"unsupported YAML tag '{tag}'; use plain mappings, lists and values")
        if isinstance(node, yaml.MappingNode):
            own = {id(key_node) for key_node, _ in node.value}
            self.loader.flatten_mapping(node)
            result: dict[Any, Any] = {}
            written: set[str] = set()
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    self._problem(path, key_node, "mapping keys must be plain scalars")
                    continue
                key, ok = self._scalar(key_node, path)
                if not ok:
                    continue
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    self._problem(path, key_node, "mapping keys must be plain scalars")
                    continue
                key = key if isinstance(key, str) else str(key_node.value)  # `off:` is the key "off", not False
                if self._not_text(key, (*path, key), key_node):
                    continue
                child = (*path, key)
                if key in result and (id(key_node) not in own or key not in written):
                    pass  # a `<<:` merge supplied it: later entries override, as YAML merge keys do
                elif key in result:
                    first = self.positions.keys.get(child)
                    where = f" (first defined on line {first.line})" if first and first.line else ""
                    self._problem(child, key_node, f"duplicate key '{key}'{where}; keep only one")
                    continue
                if id(key_node) in own:
                    written.add(key)
                self.positions.keys[child] = _pos(self.file, key_node.start_mark)
                result[key] = self.walk(value_node, child)
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.walk(item, (*path, i)) for i, item in enumerate(node.value)]
        value, ok = self._scalar(node, path)
        if not ok:
            return None
        if not isinstance(value, str) and isinstance(node, yaml.ScalarNode) and node.style is None:
            self.positions.texts[path] = node.value
        if isinstance(value, str) and self._not_text(value, path, node):
            return _escaped(value)  # refused above; printable meanwhile
        return value

    def _scalar(self, node: yaml.Node, path: PathKey) -> tuple[Any, bool]:
        """A scalar node constructed as :func:`job_value` says; (None, False) with a problem when it cannot be."""
        if node.tag == _TIMESTAMP_TAG:
            return str(node.value), True  # YAML 1.1 reads 2024-01-01 as a date: a job value is the text
        if node.tag == _INT_TAG:  # counted before PyYAML converts it: int() past the limit raises
            digits = str(node.value).replace("_", "").lstrip("+-")
            if len(digits) > int_digits_limit() + 2:  # 0x, 0b
                self._problem(path, node, f"{_too_many_digits(f'{len(digits):,}')}; quote it if it is text")
                return None, False
        try:
            value = self.loader.construct_object(node, deep=True)
        except _CONSTRUCT_ERRORS:
            tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
            self._problem(path, node, f"'{shown(str(node.value))}' is not a valid {tag} value; remove the tag, or "
                                      "quote the text")
            return None, False
        plain, why = job_value(value)
        if why is not None:
            self._problem(path, node, why)
            return None, False
        return plain, True

    def _not_text(self, value: str, path: PathKey, node: yaml.Node) -> bool:
        """A lone surrogate (a double-quoted "\\ud800" makes one; the reader refuses them written raw) is no
        text: UTF-8 cannot encode it, so render, a terminal, a file and Vertex would all fail on it later."""
        if value.isascii():
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            code = ord(value[err.start])
            path = tuple(_escaped(k) for k in path)  # a key may hold it: the message must print
            self._problem(path, node, f"contains a lone surrogate (\\u{code:04x}, from a \\u escape) at character "
                                      f"{err.start + 1}, which is not text: UTF-8 cannot hold it; remove it, or "
                                      "write the character itself (or \\U and its 8 hex digits: YAML does not join "
                                      "a pair of \\u escapes)")
            return True
        return False

    def _problem(self, path: PathKey, node: yaml.Node, message: str) -> None:
        pos = _pos(self.file, node.start_mark)
        self.problems.append(
            Problem(format_path(path), message, file=pos.file, line=pos.line, column=pos.column)
        )


def load_yaml(text: str, file: str, *, what: str = "a job file") -> tuple[Any, Positions, list[Problem]]:
    """Parse one YAML document; return (data, positions, problems). Never raises on bad YAML.
    `what` names the input in the size messages ("a price file", "a --set value")."""
    if len(text) > MAX_BYTES:  # characters ≤ bytes: a cheap first bound, before any parsing
        return None, Positions(default=Position(file)), [
            Problem("", f"the file is {len(text):,} characters long; {what} needs far fewer than "
                        f"{MAX_BYTES:,}", file=file)]
    try:
        loader = _BoundedLoader(text)  # the reader refuses control characters and lone surrogates here
    except yaml.YAMLError as err:
        return None, Positions(default=Position(file)), [_yaml_error_problem(err, file)]
    try:
        node = loader.get_single_node()
        if node is None:
            return None, Positions(default=Position(file, 1, 1)), []
        walker = _Walker(loader, file)
        data = walker.walk(node, ())
        return data, walker.positions, walker.problems
    except yaml.YAMLError as err:
        return None, Positions(default=Position(file)), [_yaml_error_problem(err, file)]
    except RecursionError:
        return None, Positions(default=Position(file)), [Problem("", "the YAML is nested too deeply", file=file)]
    except _TooLarge:
        return None, Positions(default=Position(file)), [
            Problem("", f"the YAML has or expands to more than {MAX_NODES:,} values (aliases?); {what} needs "
                        "far fewer", file=file)]
    finally:
        loader.dispose()


def load_plain(text: str, file: str, *, what: str) -> Any:
    """Any YAML or JSON input that is not a job file (a `--set` value, a price file, a saved request)
    under the job file's limits: size, values after alias expansion, nesting, duplicate keys. Raises
    ValueError with one short line (position included) for the first problem."""
    data, _, problems = load_yaml(text, file, what=what)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        first = errors[0]
        where = f"line {first.line}: " if first.line else ""
        raise ValueError(f"{where}{first.path + ': ' if first.path else ''}{first.message}")
    return data


def iter_paths(data: Any, path: PathKey = ()) -> Iterator[PathKey]:
    """Every key path in plain data (for tests and overrides)."""
    yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from iter_paths(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from iter_paths(value, (*path, i))
