"""The image's requirement list: what a job file names (specifiers and requirements files) and what the
trainer itself declares.

A requirements file is read as pip reads one, as far as an image needs: one requirement per line,
``#`` comments, ``\\`` continuations, ``-r``/``--requirement`` of another file and
``-c``/``--constraint`` of a constraints file (both relative to the file naming them), and the index
options ``--index-url``/``-i``, ``--extra-index-url``, ``--find-links``/``-f`` and ``--no-index``,
which go to pip as options (they say where wheels come from, not what the image holds, so they are
not part of the image's tag). Anything else (``-e`` editable installs, ``--hash`` and other
per-requirement options) is refused with its file, line and column: an image holds wheels resolved
for its own platform, so a hash of one file cannot hold.

Files are someone else's text until checked. Each is read bounded (:data:`MAX_FILE_BYTES`, regular
files only: a FIFO, ``/dev/zero`` or a directory is refused before a byte is read); a NUL byte or
any other control character is refused with its position; and ``-r``/``-c`` inside a file may only
name files under the job's directory (symlinks resolved), so a requirements file cannot make vtrain
read ``/etc/shadow`` or ``/proc/self/environ``. The files the job file itself lists may be anywhere:
naming one there is the explicit permission. A refusal names the file and position, never what a
file outside the job's directory holds.

:func:`declared_requirements` reads the trainer's own dependencies as its build backend reports them:
PEP 621 ``project.dependencies`` straight from ``pyproject.toml`` when they are static, else the
backend's PEP 517 ``prepare_metadata_for_build_wheel`` on a copy of the selected files (setup.cfg,
setup.py ``install_requires``, dynamic dependencies), cached by the trainer's content hash.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import unicodedata
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from vtrain.errors import PackagingError
from vtrain.foreign import printable
from vtrain.userpaths import absolute, cache_folder, describe_oserror, path_problem, read_bounded

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_WITH_VALUE = {"--index-url": "--index-url", "-i": "--index-url", "--extra-index-url": "--extra-index-url",
               "--find-links": "--find-links", "-f": "--find-links"}
_INCLUDE = {"-r": "-r", "--requirement": "-r", "-c": "-c", "--constraint": "-c"}
_MAX_DEPTH = 8
#: A requirements file larger than this is not one (1 MiB is tens of thousands of pinned lines).
MAX_FILE_BYTES = 1 << 20
#: Characters a requirements line may hold besides visible ones: a tab (pip reads it as a space).
_ALLOWED_CONTROLS = frozenset("\t")
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


@dataclass(frozen=True)
class RequirementSet:
    """What the job file's requirement entries come to: specifiers, pip's index options, constraints."""

    requirements: tuple[str, ...] = ()
    index_args: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    files: tuple[Path, ...] = ()  # every requirements and constraints file read (included ones too), absolute


def control_position(text: str) -> tuple[int, str] | None:
    """(1-based column, the character shown escaped) of the first control or format character in `text`."""
    for column, char in enumerate(text, start=1):
        if char not in _ALLOWED_CONTROLS and (not char.isprintable() or unicodedata.category(char) in _HIDDEN):
            return column, printable(char)
    return None


def requirement_problem(text: str) -> str | None:
    """Why `text` is not a requirement specifier such as ``numpy==1.26.4``; None when it is one."""
    value = text.strip()
    if not value:
        return "an empty requirement; give a specifier such as numpy==1.26.4"
    found = control_position(value)
    if found is not None:
        return (f"a control character ({found[1]}) at column {found[0]} of requirement '{printable(value[:60])}': "
                "a requirement is plain text such as numpy==1.26.4")
    if value.startswith("-"):
        return (f"'{printable(value)}' is a pip option, not a requirement; put index options in a requirements "
                "file (an entry ending in .txt)")
    option = re.search(r"\s(--?[A-Za-z][\w-]*)", value)
    if option is not None:
        return (f"{option.group(1)} at column {option.start(1) + 1} of requirement '{printable(value[:60])}' is "
                f"{_option_words(option.group(1))}")
    try:
        Requirement(value)
    except InvalidRequirement:
        return f"'{printable(value[:80])}' is not a requirement specifier such as numpy==1.26.4 or tf-keras>=2.17"
    return None


def _option_words(flag: str) -> str:
    if flag == "--hash":
        return ("not supported: the image's wheels are resolved for its own Python and platform, so a hash of one "
                "file cannot hold; pin the version instead (name==version)")
    return "a per-requirement pip option, which an image's requirements do not take"


def read_requirements(entries: Sequence[str], is_file: Sequence[bool], *,
                      root: Path | None = None) -> RequirementSet:
    """The entries read: specifiers as given, files line by line. One line per mistake (PackagingError).
    `root` is the job's directory: ``-r``/``-c`` inside a file must name a file under it (None: under the
    directory of the file the job file named)."""
    reqs: list[str] = []
    options: list[str] = []
    constraints: list[str] = []
    files: list[Path] = []
    for entry, file in zip(entries, is_file, strict=True):
        if file:
            path = Path(entry)
            top = absolute(root) if root is not None else absolute(path).parent
            _read_file(path, _Reading(reqs, options, constraints, top, files), 0, constraint=False)
            continue
        problem = requirement_problem(entry)
        if problem is not None:
            raise PackagingError(problem)
        reqs.append(entry.strip())
    return RequirementSet(tuple(reqs), tuple(options), tuple(constraints), tuple(dict.fromkeys(files)))


@dataclass
class _Reading:
    reqs: list[str]
    options: list[str]
    constraints: list[str]
    root: Path
    files: list[Path]


def _file_text(path: Path, what: str) -> str:
    problem = path_problem(str(path))
    if problem is not None:
        raise PackagingError(f"{what} {printable(str(path))} {problem}")
    try:
        data = read_bounded(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        raise PackagingError(f"{what} not found: {printable(str(path))} (a relative path starts at the job file's "
                             "directory)") from None
    except OSError as err:
        if err.errno is not None and os.strerror(err.errno) != err.strerror:  # read_bounded's own words
            why = str(err.strerror)
        else:
            why = describe_oserror(err)
        raise PackagingError(f"cannot read {what} {printable(str(path))}: {why}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise PackagingError(f"{what} {printable(str(path))}:{line}: not UTF-8 text (byte {err.start + 1})") from None


def _logical_lines(text: str, path: Path) -> list[tuple[int, str]]:
    """(line number, text) with comments dropped and ``\\`` continuations joined; controls refused."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.split("\n"), start=1):
        raw = raw[:-1] if raw.endswith("\r") else raw
        found = control_position(raw)
        if found is not None:
            raise PackagingError(f"{printable(str(path))}:{number}:{found[0]}: a control character ({found[1]}); a "
                                 "requirements file is plain text")
        if pending is not None:
            start, before = pending
            raw, number = before + raw, start
            pending = None
        if raw.endswith("\\"):
            pending = (number, raw[:-1])
            continue
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line:
            out.append((number, line))
    if pending is not None and pending[1].strip():
        out.append((pending[0], re.sub(r"(^|\s)#.*$", "", pending[1]).strip()))
    return out


def _read_file(path: Path, reading: _Reading, depth: int, *, constraint: bool) -> None:
    what = "constraints file" if constraint else "requirements file"
    if depth > _MAX_DEPTH:
        raise PackagingError(f"{printable(str(path))}: requirements files include each other more than {_MAX_DEPTH} "
                             "deep (a loop?)")
    text = _file_text(path, what)
    reading.files.append(absolute(path))
    for number, line in _logical_lines(text, path):
        where = f"{printable(str(path))}:{number}"
        if not line.startswith("-"):
            problem = requirement_problem(line)
            if problem is not None:
                raise PackagingError(f"{where}: {problem}")
            (reading.constraints if constraint else reading.reqs).append(line)
            continue
        try:
            words = _split(line)
        except ValueError as err:
            raise PackagingError(f"{where}: cannot read this line: {err}") from None
        flag, _, inline = words[0].partition("=")
        value = inline or (words[1] if len(words) > 1 else "")
        if flag in _INCLUDE:
            if not value:
                raise PackagingError(f"{where}: {flag} needs a file name")
            nested = _nested(path, value, reading.root, where, flag)
            _read_file(nested, reading, depth + 1, constraint=constraint or _INCLUDE[flag] == "-c")
        elif flag == "--no-index":
            reading.options.append("--no-index")
        elif flag in _WITH_VALUE:
            if not value:
                raise PackagingError(f"{where}: {flag} needs a value")
            if _WITH_VALUE[flag] == "--find-links" and "://" not in value:
                value = str(absolute(path.parent / value))  # relative to the file, as pip reads it
            reading.options += [_WITH_VALUE[flag], value]
        else:
            raise PackagingError(f"{where}: {printable(flag)} is not supported in an image's requirements (only "
                                 "requirement lines, -r, -c, --index-url, --extra-index-url, --find-links and "
                                 "--no-index): an image holds wheels")


def _split(line: str) -> list[str]:
    import shlex

    return shlex.split(line)


def _nested(parent: Path, value: str, root: Path, where: str, flag: str) -> Path:
    """The file `-r VALUE` in `parent` names, refused unless it lies under `root` (symlinks resolved)."""
    problem = path_problem(value)
    if problem is not None:
        raise PackagingError(f"{where}: {flag} names a path that {problem}")
    resolved = absolute(parent.parent / value)
    if not resolved.is_relative_to(root):
        raise PackagingError(f"{where}: {flag} {printable(value)} is outside the job's directory "
                             f"{printable(str(root))}: a requirements file may include only files under it (list "
                             "a file elsewhere in the job file's trainer.build.requirements instead)")
    return resolved


# --------------------------------------------------------------------------- what the trainer declares


def declared_requirements(root: Path, files: Sequence[str], digest: str, *, cache: Path | None = None) -> tuple[
        str, ...]:
    """The trainer's own dependencies (Requires-Dist) as its build backend reports them.

    `files` are the trainer's selected files (relative to `root`), `digest` their content hash (the
    cache key). Static PEP 621 ``project.dependencies`` are read from ``pyproject.toml``; anything else
    asks the backend for the wheel's metadata, built from a copy of the selected files."""
    static = _static_dependencies(root)
    if static is not None:
        return static
    folder = cache_folder("trainer-requires", cache)
    entry = folder / f"{digest}.json"
    try:
        known = json.loads(read_bounded(entry, MAX_FILE_BYTES))
        if isinstance(known, list) and all(isinstance(r, str) for r in known):
            return tuple(known)
    except (OSError, ValueError):
        pass
    found = _backend_dependencies(root, files)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}")
        tmp.write_text(json.dumps(list(found)))
        os.replace(tmp, entry)
    except OSError:
        pass  # a cache that cannot be written only costs the next build a backend run
    return found


def _static_dependencies(root: Path) -> tuple[str, ...] | None:
    """PEP 621 dependencies when pyproject.toml declares them statically; None when the backend must say."""
    try:
        data = tomllib.loads(read_bounded(root / "pyproject.toml", MAX_FILE_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise PackagingError(f"cannot read the trainer's pyproject.toml in {printable(str(root))}: "
                             f"{printable(str(err))}") from None
    project = data.get("project")
    if not isinstance(project, dict) or "dependencies" in (project.get("dynamic") or []):
        return None
    deps = project.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise PackagingError(f"{printable(str(root / 'pyproject.toml'))}: project.dependencies must be a list of "
                             "requirement strings")
    for dep in deps:
        problem = requirement_problem(dep)
        if problem is not None:
            raise PackagingError(f"{printable(str(root / 'pyproject.toml'))}: project.dependencies: {problem}")
    return tuple(d.strip() for d in deps)


def _backend_dependencies(root: Path, files: Sequence[str]) -> tuple[str, ...]:
    from build import BuildBackendException, BuildException, FailedProcessError, ProjectBuilder
    from build.env import DefaultIsolatedEnv

    from vtrain.trainer.backend import _captured_runner, _tail
    from vtrain.trainer.packaging import temp_prefix

    with tempfile.TemporaryDirectory(prefix=temp_prefix("build")) as tmp:
        src = Path(tmp) / "src"
        for rel in files:
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, src / rel)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                builder = ProjectBuilder(src, runner=_captured_runner)
                if not builder.check_dependencies("wheel"):
                    meta = Path(builder.metadata_path(Path(tmp) / "meta"))
                else:
                    with DefaultIsolatedEnv() as env:
                        builder = ProjectBuilder.from_isolated_env(env, src, runner=_captured_runner)
                        env.install(builder.build_system_requires)
                        env.install(builder.get_requires_for_build("wheel"))
                        meta = Path(builder.metadata_path(Path(tmp) / "meta"))
        except (BuildBackendException, FailedProcessError) as err:
            raise PackagingError(f"reading the trainer's dependencies from its build backend failed: {err}"
                                 f"{_tail(err.exception)}") from None
        except (BuildException, OSError) as err:
            raise PackagingError(f"reading the trainer's dependencies from its build backend failed: {err}") from None
        text = read_bounded(meta / "METADATA", 16 * MAX_FILE_BYTES).decode("utf-8", "replace")
    requires = Parser().parsestr(text).get_all("Requires-Dist") or []
    return tuple(str(r).strip() for r in requires)
