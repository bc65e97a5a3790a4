"""What a registry answered, read bounded and shown safely: the body of any answer, never more than a
limit (a 4 GiB manifest costs no memory), and an error body of any shape as one printable line.

:class:`BlobReader` is the one way a registry's blob is read, whoever reads it (a manifest, a config, a
base layer scanned for its C library, a layer pulled into the cache or streamed to another registry):
never more bytes than the blob's descriptor declares (or a limit when none is known), within a time
bound, and checked against its digest before its last byte is handed over, so nothing is used or cached
from a blob that is not what its digest says. A layer that never ends stops at its declared size, one
that trickles at its deadline; memory stays one chunk whatever the size.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from typing import Any

import requests
from urllib3 import exceptions as urllib3_errors

from vtrain import network
from vtrain.errors import PackagingError
from vtrain.foreign import printable

#: An error body is read this far: only its message is kept.
ERROR_LIMIT = 64 << 10
#: The most bytes a blob may declare (a layer of a Vertex GPU image is a few GB): above, it is refused unread.
MAX_BLOB = 32 << 30
#: The slowest transfer a blob's time bound allows for, in bytes a second, on top of the network deadline:
#: a 1 GB layer may take ~70 minutes, a 4 MiB manifest ~16 s more than the deadline.
MIN_RATE = 256 << 10
_CHUNK = 1 << 20
_DIGEST = re.compile(r"(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})")


def digest_problem(digest: object) -> str | None:
    """Why `digest` (as a manifest or a caller names it) is not one vtrain can check; None when it is."""
    if isinstance(digest, str) and _DIGEST.fullmatch(digest):
        return None
    return f"digest {printable(str(digest), limit=80)!r} is not sha256:<64 hex> (or sha512:<128 hex>)"


def size_problem(size: object, limit: int) -> str | None:
    """Why `size` (as a descriptor declares it) is not a blob size vtrain reads; None when it is one."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        return f"size {printable(str(size), limit=40)!r} is not a whole number of bytes"
    if size > limit:
        return f"declares {size:,} bytes, over the {limit:,} a blob may have; refused unread"
    return None


def blob_deadline(size: int) -> float:
    """Seconds a blob of `size` bytes may take: the network deadline, plus its bytes at :data:`MIN_RATE`."""
    return network.deadline() + size / MIN_RATE


class BlobReader:
    """A registry answer's body as stored, read bounded; `read(n)` gives at most `n` bytes, and b"" only once
    every byte came and the whole matched `digest`.

    Bounds: `size`, the bytes the blob's descriptor declares (a Content-Length that says otherwise is refused
    unread, and reading stops at `size`: a body that never ends costs nothing more), or, when no size is
    known (a manifest), at most `limit`; a time bound (:func:`blob_deadline`) checked before every read, each
    read waiting at most the attempt's timeout. `digest` (None: a manifest read by tag, nothing to check
    against) is checked once the last byte is in, before it is returned. Any breach is one PackagingError
    line naming the registry and `what`; a connection that fails mid-way is `network(why, error)`'s exception
    (the registry client's, retried) when given, else one."""

    def __init__(self, answer: requests.Response, *, registry: str, what: str, digest: str | None,
                 size: int | None, limit: int = MAX_BLOB,
                 network_error: Callable[[str, BaseException], Exception] | None = None) -> None:
        self._answer, self.registry, self.what, self.digest = answer, registry, what, digest
        self.size, self.limit, self._network_error = size, limit, network_error
        self.count = 0
        self.verified = False
        self._done = False
        algorithm = digest.split(":", 1)[0] if digest else "sha256"
        self._hash = hashlib.new(algorithm)
        bound = size if size is not None else limit
        self.seconds = blob_deadline(bound)
        self._deadline = time.monotonic() + self.seconds
        length = answer.headers.get("Content-Length", "").strip()
        if length.isdigit() and size is not None and int(length) != size:
            self._fail(f"answered {int(length):,} bytes for a blob its descriptor says is {size:,}")
        if length.isdigit() and size is None and int(length) > limit:
            self._fail(f"is {int(length):,} bytes, over the {limit:,} a registry answer may have; refused unread")
        if size == 0:
            self._end()

    def __enter__(self) -> BlobReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._answer.close()

    def _fail(self, why: str) -> None:
        self.close()
        raise PackagingError(f"registry {self.registry}: {self.what} {why}")

    def read(self, n: int | None = -1) -> bytes:
        """At most `n` bytes (all that is left, a chunk at a time, when n < 0); b"" at the end, once verified."""
        if self._done:
            return b""
        if time.monotonic() > self._deadline:
            self._fail(f"took longer than {self.seconds:,.0f} s to read ({self.count:,} of "
                       f"{self.size if self.size is not None else 'at most ' + format(self.limit, ',')} bytes); "
                       "refused (a registry that slow, or a body that trickles)")
        want = _CHUNK if n is None or n < 0 else max(1, min(n, _CHUNK))
        left = (self.size if self.size is not None else self.limit + 1) - self.count
        data = self._read1(min(want, left))
        if not data:
            if self.size is not None and self.count < self.size:
                self._broken(f"ended after {self.count:,} of the {self.size:,} bytes its descriptor declares")
            self._end()
            return b""
        self.count += len(data)
        if self.size is None and self.count > self.limit:
            self._fail(f"is over the {self.limit:,} bytes a registry answer may have; refused")
        self._hash.update(data)
        if self.size is not None and self.count == self.size:
            self._end()  # its declared bytes, checked: whatever the body holds past them is never read
        return data

    def read_all(self) -> bytes:
        """The whole body, verified (for what is small: a manifest, a config)."""
        chunks = []
        while chunk := self.read():
            chunks.append(chunk)
        return b"".join(chunks)

    def drain(self) -> None:
        """Read what is left (bounded as ever) to check the whole against the digest; the bytes are dropped."""
        while self.read():
            pass

    def _read1(self, amount: int) -> bytes:
        raw = self._answer.raw
        try:
            reader = getattr(raw, "read1", None)  # one receive at most: the time bound holds between reads
            data = reader(amount, decode_content=False) if reader is not None else raw.read(
                amount, decode_content=False)
        except (OSError, ValueError, requests.RequestException, urllib3_errors.HTTPError) as err:
            waited = isinstance(err, (TimeoutError, urllib3_errors.TimeoutError, requests.Timeout))
            self._broken(f"got nothing for {network.attempt_timeout():g} s" if waited else
                         f"was cut off ({printable(str(err) or type(err).__name__, limit=120)})", err)
        return bytes(data)

    def _broken(self, why: str, err: BaseException | None = None) -> None:
        """The transfer failed part-way: the client's retry when it gave one, else one line."""
        self.close()
        if self._network_error is not None:
            raise self._network_error(f"{self.what}: {why}", err or ConnectionError(why))
        raise PackagingError(f"registry {self.registry}: {self.what} {why}; try again")

    def _end(self) -> None:
        self.close()
        self._done = True
        if self.digest is not None:
            got = f"{self._hash.name}:{self._hash.hexdigest()}"
            if got != self.digest:
                raise PackagingError(f"registry {self.registry}: {self.what} is not what its digest says (its "
                                     f"{self.count:,} bytes hash to {got[:19]}…, not {self.digest[:19]}…); refused")
        self.verified = True


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


__all__ = ["ERROR_LIMIT", "MAX_BLOB", "MIN_RATE", "BlobReader", "blob_deadline", "digest_problem", "discard", "message",
           "parse_json", "read", "size_problem"]
