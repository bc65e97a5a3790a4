"""What comes off the wire, read once and bounded: the body, its JSON, the list query parameters.

Every route reads its input through these, so whatever the input, the answer is a Google-style
400 and never a dropped connection, a 500 or a Python message:

- :func:`read_body`: chunked or one valid Content-Length, at most ``MAX_BODY`` bytes (a real
  CustomJob is a few KiB; Vertex's own limit is not documented, 1 MiB is far above any job).
- :func:`json_body`: the one JSON parser of request bodies: UTF-8, valid JSON, nested at most
  ``MAX_DEPTH`` deep (protobuf's JSON parser refuses deeper messages too), and an object
  (``null``, a list or a number is "Expected an object").
- :func:`check_fields`: the field types of bodies the emulator has no proto for (Cloud
  Logging's entries:list, IAM's testIamPermissions), as the real JSON parser checks them.
- :func:`page_params`: pageSize (int32, not negative), pageToken (one this emulator issued) and
  readMask (see :mod:`vtrain.emulator.masks`) of every list call.
- :func:`error_body`: the JSON error of every answer, including the HTTP layer's own (a bad
  request line, 411, 413, 414, 431, 501), as Google's front end answers them.
"""

from __future__ import annotations

import json
from email.message import Message
from http import HTTPStatus
from io import BufferedIOBase
from typing import Any

from vtrain.emulator.errors import invalid_argument

#: Largest request body read.
MAX_BODY = 1024 * 1024
#: Deepest JSON nesting accepted (protobuf's json_format default max_recursion_depth).
MAX_DEPTH = 100
#: A page token is the sequence number of the last job served: at most 20 digits.
MAX_TOKEN_DIGITS = 20
INT32 = (-(2**31), 2**31)

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    405: "NOT_FOUND", 409: "ALREADY_EXISTS", 411: "INVALID_ARGUMENT", 413: "INVALID_ARGUMENT",
    414: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 431: "INVALID_ARGUMENT", 500: "INTERNAL",
    501: "UNIMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}  # fmt: skip


class Refused(Exception):
    """A request the HTTP layer cannot take (bad length, too big): answered, then the connection closed."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_body(code: int, message: str) -> dict[str, Any]:
    status = _STATUS_NAMES.get(code, "UNKNOWN" if code < 500 else "INTERNAL")
    return {"error": {"code": code, "message": message, "status": status}}


def reason_phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return ""


def body_length(command: str, headers: Message) -> int | None:
    """The body's length from the headers (None: chunked), refused before a byte of it is read."""
    encoding = (headers.get("Transfer-Encoding") or "").strip().lower()
    lengths = headers.get_all("Content-Length") or []
    if encoding:
        if encoding != "chunked" or lengths:
            raise Refused(400, "Bad Request: unsupported Transfer-Encoding")
        return None
    if not lengths:
        if command == "POST":
            raise Refused(411, "Length Required: POST requests require a Content-Length header")
        return 0
    values = {v.strip() for v in lengths}
    value = next(iter(values))
    if len(values) != 1 or not (value.isascii() and value.isdigit()):
        raise Refused(400, f"Bad Request: invalid Content-Length {', '.join(lengths)[:100]!r}")
    if len(value) > 18 or int(value) > MAX_BODY:
        raise Refused(413, f"Payload Too Large: a request body holds at most {MAX_BODY} bytes")
    return int(value)


def read_body(rfile: BufferedIOBase, length: int | None) -> bytes:
    """`length` bytes (None: chunked); ConnectionError when the client stops mid-body."""
    if length is None:
        return _read_chunked(rfile)
    body = rfile.read(length) if length else b""
    if len(body) < length:
        raise ConnectionError("the client closed the connection mid-body")
    return body


def _read_chunked(rfile: BufferedIOBase) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = rfile.readline(1024).strip().split(b";", 1)[0]
        try:
            size = int(line[:16], 16) if len(line) <= 16 else -1
        except ValueError:
            raise Refused(400, "Bad Request: invalid chunk size") from None
        if size < 0:
            raise Refused(400, "Bad Request: invalid chunk size")
        if total + size > MAX_BODY:
            raise Refused(413, f"Payload Too Large: a request body holds at most {MAX_BODY} bytes")
        if size == 0:
            while rfile.readline(1024).strip():  # trailers
                pass
            return b"".join(parts)
        chunk = rfile.read(size)
        if len(chunk) < size:
            raise ConnectionError("the client closed the connection mid-body")
        parts.append(chunk)
        total += size
        rfile.readline(1024)  # the CRLF after each chunk


def _depth(text: str) -> int:
    """The deepest nesting of `text`'s arrays and objects (strings skipped), without recursion."""
    deepest = depth = 0
    quoted = escaped = False
    for ch in text:
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def json_body(raw: bytes, what: str) -> dict[str, Any]:
    """The body as a JSON object (empty: `{}`); a 400 INVALID_ARGUMENT naming `what` otherwise."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid_argument("Invalid JSON payload received. The body is not UTF-8.") from None
    if not text.strip():
        return {}
    if ("[" in text or "{" in text) and text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise invalid_argument(f"Invalid JSON payload received. Nested deeper than {MAX_DEPTH} levels.")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as err:
        where = f" at line {err.lineno} column {err.colno}" if isinstance(err, json.JSONDecodeError) else ""
        raise invalid_argument(f"Invalid JSON payload received. Not valid JSON{where}.") from None
    if not isinstance(doc, dict):
        kind = "null" if doc is None else type(doc).__name__.replace("str", "a string").replace("list", "an array")
        raise invalid_argument(f"Invalid JSON payload received. Expected an object for {what}, got {kind}.")
    return doc


#: JSON field types of hand-checked bodies: name → (type as the real parser names it, check).
def _string(value: Any) -> bool:
    return isinstance(value, str)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _int32(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return False
    text = str(value)
    return text.isascii() and text.lstrip("-").isdigit() and len(text) <= 12 and INT32[0] <= int(text) < INT32[1]


FIELD_TYPES = {"string": ("TYPE_STRING", _string), "strings": ("TYPE_STRING (repeated)", _strings),
               "int32": ("TYPE_INT32", _int32)}


def check_fields(doc: dict[str, Any], fields: dict[str, str], what: str) -> dict[str, Any]:
    """Unknown names and wrong types are 400s, worded as the real JSON parser words them."""
    for key, value in doc.items():
        if key not in fields:
            raise invalid_argument(
                f'Invalid JSON payload received. Unknown name "{key[:100]}" at \'{what}\': Cannot find field.'
            )
        kind, valid = FIELD_TYPES[fields[key]]
        if not valid(value):
            raise invalid_argument(f"Invalid value at '{key}' ({kind}), {json.dumps(value)[:100]}")
    return doc


def empty_body(raw: bytes, what: str) -> None:
    """A request whose fields all come from the path (cancel): `{}` or nothing, still parsed."""
    check_fields(json_body(raw, what), {}, what)


#: Vertex's page size for the Metadata, TensorBoard and Model lists: the default and the most.
PAGE_SIZE = 100


def page_params(query: dict[str, str], *, default: int | None = None, most: int | None = None) -> tuple[int, str]:
    """pageSize and pageToken of a list call, checked as Vertex checks them; with `default` and `most`, the
    size a page gets (0 means `default`, more than `most` is `most`)."""
    raw_size = query.get("pageSize") or "0"
    if not _int32(raw_size):
        raise invalid_argument(f"Invalid value at 'page_size' (TYPE_INT32), \"{raw_size[:30]}\"")
    size = int(raw_size)
    if size < 0:
        raise invalid_argument("page_size must not be negative.")
    token = query.get("pageToken", "")
    if token and not (token.isascii() and token.isdigit() and len(token) <= MAX_TOKEN_DIGITS and int(token) > 0):
        raise invalid_argument(f"Invalid page token '{token[:40]}'. Use a nextPageToken from a previous page.")
    if default is not None:
        size = min(size or default, default if most is None else most)
    return size, token


def parse_message(doc: Any, message: Any, what: str) -> dict[str, Any]:
    """`doc` parsed strictly into the proto-plus `message` type, then back to its JSON form: an unknown
    field or a wrong type is one 400 naming `what`."""
    from google.protobuf import json_format

    try:
        parsed = json_format.ParseDict(doc, message.pb()())
    except (json_format.ParseError, TypeError, AttributeError) as err:
        raise invalid_argument(f"Invalid JSON payload received for {what}. {str(err)[:300]}") from None
    return dict(json_format.MessageToDict(parsed))


__all__ = ["MAX_BODY", "MAX_DEPTH", "PAGE_SIZE", "Refused", "body_length", "check_fields", "empty_body", "error_body",
           "json_body", "page_params", "parse_message", "read_body", "reason_phrase"]
