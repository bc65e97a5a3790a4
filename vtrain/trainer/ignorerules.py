"""Ignore files (``.gitignore``, ``.vtrainignore``) in gitignore syntax: the rules that matter for a source tree.

``#`` comments, ``!`` negation (last match wins), a trailing ``/`` for directories only, patterns
with an inner or leading ``/`` anchored to the ignore file's directory, ``*``/``?``/``[...]`` that
never cross ``/``, and ``**`` for any number of directories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    base: str  # directory of the ignore file, relative to the package root ("" for the root)


def translate(pattern: str) -> tuple[str, bool, bool] | None:
    """One ignore-file line → (regex over a path relative to the file's dir, negate, dir_only)."""
    line = pattern.rstrip("\n")
    # Trailing spaces are ignored unless escaped.
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        stripped += " "
    line = stripped
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    elif line.startswith("\\"):
        line = line[1:] if line[1:2] in ("#", "!") else line
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    body = _glob_to_regex(line)
    prefix = "" if anchored else "(?:.*/)?"
    return f"^{prefix}{body}$", negate, dir_only


def _glob_to_regex(glob: str) -> str:
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*" and glob.startswith("**", i) and (i == 0 or glob[i - 1] == "/"):
            if glob[i + 2 : i + 3] == "/":
                out.append("(?:.*/)?")
                i += 3
                continue
            if i + 2 == n:
                out.append(".*")
                i += 2
                continue
        if c == "*":
            while i + 1 < n and glob[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 2 if glob[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                inner = glob[i + 1 : end]
                if inner[:1] in ("!", "^"):
                    inner = "^" + inner[1:]
                out.append("[" + inner.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass
class IgnoreRules:
    """Rules from every ignore file seen so far, in precedence order (last match wins)."""

    _rules: list[_Rule] = field(default_factory=list)
    _last: list[_Rule] = field(default_factory=list)

    def add_lines(self, lines: list[str], *, base: str = "", last: bool = False) -> None:
        target = self._last if last else self._rules
        for line in lines:
            parsed = translate(line)
            if parsed is not None:
                regex, negate, dir_only = parsed
                target.append(_Rule(re.compile(regex), negate, dir_only, base))

    def add_file(self, path: Path, *, base: str = "", last: bool = False) -> None:
        """`last` rules (``.vtrainignore``) beat every ``.gitignore``, deeper ones included."""
        text = path.read_text(encoding="utf-8", errors="replace")
        self.add_lines(text.splitlines(), base=base, last=last)

    def ignored(self, rel: str, *, is_dir: bool) -> bool:
        result = False
        for rule in (*self._rules, *self._last):
            if rule.dir_only and not is_dir:
                continue
            if rule.base:
                if not rel.startswith(rule.base + "/"):
                    continue
                sub = rel[len(rule.base) + 1 :]
            else:
                sub = rel
            if rule.regex.match(sub):
                result = not rule.negate
        return result


__all__ = ["IgnoreRules", "translate"]
