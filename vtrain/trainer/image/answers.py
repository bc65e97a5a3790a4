"""What a registry answered, read bounded and shown safely: the body of any answer, never more than a
limit (a 4 GiB manifest costs no memory), and an error body of any shape as one printable line."""

from __future__ import annotations

import json
import re
from typing import Any

import requests

from vtrain.errors import PackagingError
from vtrain.foreign import printable

#: An error body is read this far: only its message is kept.
ERROR_LIMIT = 64 << 10


def read(answer: requests.Response, limit: int, registry: str, what: str) -> bytes:
    """At most `limit` bytes of an answer's body (decoded); a longer one is refused, having read at most
    `limit` + 1 bytes (a 4 GiB manifest costs no memory)."""
    length = answer.headers.get("Content-Length", "")
    if length.strip().isdigit() and int(length) > limit:
        raise PackagingError(f"registry {registry}: {what} is {int(length):,} bytes, over the {limit:,} a registry "
                             "answer may have; refused unread")
    chunks: list[bytes] = []
    size = 0
    for chunk in answer.iter_content(chunk_size=64 << 10):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            answer.close()
            raise PackagingError(f"registry {registry}: {what} is over the {limit:,} bytes a registry answer may "
                                 "have; refused")
    return b"".join(chunks)


def discard(answer: requests.Response) -> None:
    """Read a small leftover body so the connection can be reused; a large one just closes it."""
    try:
        read(answer, ERROR_LIMIT, "", "")
    except (PackagingError, requests.RequestException):
        answer.close()


def parse_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def message(answer: requests.Response) -> str:
    """The registry's own error message, as one printable line, whatever the body's shape: the OCI
    ``{"errors": [{"code", "message"}]}``, another JSON shape (a list, a dict, a string), HTML (its
    title), text (its first line) or bytes (nothing). Read bounded; "" when nothing useful."""
    try:
        data = read(answer, ERROR_LIMIT, "", "")
    except PackagingError:
        data = b""
    except requests.RequestException:
        return ""
    doc = parse_json(data)
    text = _from_json(doc) if doc is not None else _from_text(data)
    text = " ".join(text.split())
    return printable(text, limit=300) if text else ""


def _from_json(doc: Any, depth: int = 0) -> str:
    if depth > 4:
        return ""
    if isinstance(doc, str):
        return doc
    if isinstance(doc, list):
        return next((found for item in doc[:8] if (found := _from_json(item, depth + 1))), "")
    if isinstance(doc, dict):
        for key in ("errors", "message", "detail", "details", "error", "error_description", "code"):
            found = _from_json(doc.get(key), depth + 1) if key in doc else ""
            if found:
                return found
    return ""


def _from_text(data: bytes) -> str:
    if b"\0" in data[:1024]:
        return ""  # bytes, not words
    text = data.decode("utf-8", "replace")
    if text.count("\ufffd") > len(text) // 10:
        return ""
    if "<html" in text[:512].lower() or "<!doctype" in text[:512].lower():
        found = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        return found.group(1).strip() if found else ""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


__all__ = ["ERROR_LIMIT", "discard", "message", "parse_json", "read"]
