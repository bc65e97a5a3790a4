"""What others wrote: its text made safe to print (here) and its data read bounded (:mod:`vtrain.foreign.data`).

Text that someone else wrote, made safe to print: the one way vtrain shows foreign text.

A trainer's output, a log entry, a registry's or Vertex's error message, a file name, a string in a
profile: none of it is vtrain's, and any of it can carry bytes a terminal obeys. An OSC sequence
retitles the window, a CSI clears it, a carriage return moves the cursor back over vtrain's own
``[chief-0]`` prefix so the trainer can forge a ``[vtrain]`` line. :func:`printable` shows every
such character escaped (``\\x1b``, ``\\r``, ``\\u202e``), on every output path, terminal or not,
so what is printed is exactly one line of visible characters that cannot move the cursor.

Imports nothing of vtrain: every stage may print through it, and it ships to the replicas with the
runtime (errors, the DiLoCo syncer's lines about its peers).

The rule, in one place (docs/guides/foreign-text.md): vtrain composes a line from its own words and
foreign parts, each foreign part through :func:`printable` (or :func:`prefixed` for text of many
lines: each line gets vtrain's prefix). Files vtrain keeps (a replica's log under the run dir) stay
byte for byte; whatever is printed from them goes through here.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories that print nothing visible yet act: C0/C1 controls and DEL (Cc), format
#: characters such as bidi overrides and zero-width joiners (Cf), line and paragraph separators
#: (Zl, Zp), surrogates (Cs, a lone one cannot be encoded) and unassigned or private code points.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\x1b": "\\x1b"}
#: A line longer than this is cut (a trainer that prints a 100 MB line must not fill the screen).
LINE_LIMIT = 16_384


def _escaped(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape (a file name)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: str | bytes, *, limit: int | None = LINE_LIMIT) -> str:
    """`text` as one line of visible characters: every control, format or separator character escaped.

    Bytes are decoded as UTF-8, undecodable bytes shown as ``\\xNN``; a lone surrogate (from
    ``surrogateescape``) is shown the same way. A newline inside `text` is escaped too: split
    multi-line text first (:func:`printable_lines`). Past `limit` characters the rest is replaced
    by a count, so one hostile line stays bounded on screen.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "backslashreplace")
    more = 0
    if limit is not None and len(text) > limit:  # escape only what is shown: a 100 MB line costs no more
        text, more = text[:limit], len(text) - limit
    if text.isprintable():  # no character of Unicode's Other or Separator classes but the space: as it is
        return f"{text}… ({more:,} more characters)" if more else text
    pieces: list[str] = []
    size = 0
    for used, char in enumerate(text):
        piece = _escaped(char) if (char.isascii() and not char.isprintable()) or unicodedata.category(
            char) in _HIDDEN else char  # fmt: skip
        if limit is not None and size + len(piece) > limit:  # the escapes made it longer: cut here
            more += len(text) - used
            break
        pieces.append(piece)
        size += len(piece)
    shown = "".join(pieces)
    return f"{shown}… ({more:,} more characters)" if more else shown


def printable_lines(text: str | bytes, *, limit: int | None = LINE_LIMIT) -> list[str]:
    """`text` split at newlines (``\\n`` and ``\\r\\n``), each line made :func:`printable`.

    A bare ``\\r`` is not a line break here: it stays in its line, escaped, so it cannot return the
    cursor over a prefix that vtrain printed before it.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "backslashreplace")
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [printable(p[:-1] if p.endswith("\r") else p, limit=limit) for p in parts]


def prefixed(prefix: str, text: str | bytes, *, limit: int | None = LINE_LIMIT) -> list[str]:
    """`text` as lines, each ``prefix`` + the line made printable: a multi-line log entry keeps vtrain's
    ``[chief-0] `` prefix on every line, so no line of it can pass for one of vtrain's own. Empty text
    is one line with the prefix alone."""
    return [f"{prefix}{line}" for line in printable_lines(text, limit=limit) or [""]]


__all__ = ["LINE_LIMIT", "prefixed", "printable", "printable_lines"]
