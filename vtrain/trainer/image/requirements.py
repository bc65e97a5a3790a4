"""The image's requirement list from what a job file names: specifiers, and requirements files.

A requirements file is read as pip reads one, as far as an image needs: one requirement per line,
``#`` comments, ``-r``/``--requirement`` of another file (relative to the one naming it), and the
index options ``--index-url``/``-i``, ``--extra-index-url``, ``--find-links``/``-f`` and
``--no-index``, which go to pip as options (they say where wheels come from, not what the image
holds, so they are not part of the image's tag). Anything else (``-e`` editable installs, ``-c``
constraints, hashes) is refused with its file and line: an image holds wheels only.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from vtrain.errors import PackagingError
from vtrain.userpaths import describe_oserror

#: PEP 508's name, then extras, a version specifier, a URL or markers (pip judges the rest).
_SPECIFIER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\s*(?:\[[^\]]*\])?\s*(?:[<>=!~;@(].*)?")
_WITH_VALUE = {"--index-url": "--index-url", "-i": "--index-url", "--extra-index-url": "--extra-index-url",
               "--find-links": "--find-links", "-f": "--find-links"}
_MAX_DEPTH = 8


def requirement_problem(text: str) -> str | None:
    """Why `text` is not a requirement specifier such as ``numpy==1.26.4``; None when it is one."""
    value = text.strip()
    if not value:
        return "an empty requirement; give a specifier such as numpy==1.26.4"
    if value.startswith("-"):
        return (f"{value!r} is a pip option, not a requirement; put index options in a requirements file "
                "(an entry ending in .txt)")
    if not _SPECIFIER.fullmatch(value):
        return f"{value!r} is not a requirement specifier such as numpy==1.26.4 or tf-keras>=2.17"
    return None


def read_requirements(entries: Sequence[str], is_file: Sequence[bool]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(requirements, pip index options) of the entries; files read line by line. One line per mistake."""
    reqs: list[str] = []
    options: list[str] = []
    for entry, file in zip(entries, is_file, strict=True):
        if file:
            _read_file(Path(entry), reqs, options, 0)
            continue
        problem = requirement_problem(entry)
        if problem is not None:
            raise PackagingError(problem)
        reqs.append(entry.strip())
    return tuple(reqs), tuple(options)


def _read_file(path: Path, reqs: list[str], options: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise PackagingError(f"{path}: requirements files include each other more than {_MAX_DEPTH} deep (a loop?)")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PackagingError(f"requirements file not found: {path} (a relative path starts at the job file's "
                             "directory)") from None
    except IsADirectoryError:
        raise PackagingError(f"requirements file {path} is a directory; name the file") from None
    except UnicodeDecodeError:
        raise PackagingError(f"requirements file {path} is not UTF-8 text") from None
    except OSError as err:
        raise PackagingError(f"cannot read requirements file {path}: {describe_oserror(err)}") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        where = f"{path}:{number}"
        if not line.startswith("-"):
            problem = requirement_problem(line)
            if problem is not None:
                raise PackagingError(f"{where}: {problem}")
            reqs.append(line)
            continue
        try:
            words = shlex.split(line)
        except ValueError as err:
            raise PackagingError(f"{where}: cannot read {line!r}: {err}") from None
        flag, _, inline = words[0].partition("=")
        value = inline or (words[1] if len(words) > 1 else "")
        if flag in ("-r", "--requirement"):
            if not value:
                raise PackagingError(f"{where}: {flag} needs a file name")
            _read_file(path.parent / value, reqs, options, depth + 1)
        elif flag == "--no-index":
            options.append("--no-index")
        elif flag in _WITH_VALUE:
            if not value:
                raise PackagingError(f"{where}: {flag} needs a value")
            if _WITH_VALUE[flag] == "--find-links" and "://" not in value:
                value = str((path.parent / value).resolve())  # relative to the file, as pip reads it
            options += [_WITH_VALUE[flag], value]
        else:
            raise PackagingError(f"{where}: {flag} is not supported in an image's requirements (only requirement "
                                 "lines, -r, --index-url, --extra-index-url, --find-links and --no-index): an image "
                                 "holds wheels")
