"""Which files of a trainer get packaged, what they hash to, and which look like secrets.

Exclusion follows ``.gitignore`` files (in every directory) and a root ``.vtrainignore`` (applied
last, so it may re-include with ``!``), on top of junk that is never packaged (VCS data,
virtualenvs, caches, stale build output).

Implements the gitignore rules that matter for a source tree: ``#`` comments, ``!`` negation
(last match wins), a trailing ``/`` for directories only, patterns with an inner or leading ``/``
anchored to the ignore file's directory, ``*``/``?``/``[...]`` that never cross ``/``, and ``**``
for any number of directories. As in git, a file inside an excluded directory cannot be
re-included: the caller prunes excluded directories while walking.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vtrain.constants import AIP_OUTPUT_DIRS, LOCAL_RUNS_DIR
from vtrain.errors import PackagingError
from vtrain.userpaths import describe_oserror, path_problem, shown

# Never packaged, whatever the ignore files say: VCS data, environments, caches, build output.
_ALWAYS_DIRS = {
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    ".ipynb_checkpoints",
    ".eggs",
}
_ALWAYS_ROOT_DIRS = {"build", "dist"}  # stale build output at the package root
_ALWAYS_FILES = re.compile(r"(.*\.py[co]|\.DS_Store|\.coverage)$")


def is_always_excluded(rel: str, *, is_dir: bool) -> bool:
    name = rel.rsplit("/", 1)[-1]
    if is_dir:
        return name in _ALWAYS_DIRS or name.endswith(".egg-info") or rel in _ALWAYS_ROOT_DIRS
    return bool(_ALWAYS_FILES.fullmatch(name))


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


HASH_LEN = 12
IGNORE_FILES = (".gitignore",)  # read in every directory, like git
VTRAIN_IGNORE = ".vtrainignore"  # read at the package root, applied last (it may re-include with `!`)

# (file-name glob, why). Matched case-insensitively against the base name.
_CREDENTIAL_NAMES: tuple[tuple[str, str], ...] = (
    (".env", "dotenv file"),
    (".env.*", "dotenv file"),
    ("*.pem", "PEM key or certificate"),
    ("id_rsa*", "SSH key"),
    ("id_dsa*", "SSH key"),
    ("id_ecdsa*", "SSH key"),
    ("id_ed25519*", "SSH key"),
    ("*.p12", "PKCS#12 key store"),
    ("*.pfx", "PKCS#12 key store"),
    ("credentials.json", "credentials file"),
    ("application_default_credentials.json", "Google user credentials"),
    ("client_secret*.json", "OAuth client secret"),
    (".netrc", "login credentials"),
    (".git-credentials", "login credentials"),
)
_HARMLESS_ENV = {".env.example", ".env.sample", ".env.template", ".env.dist"}
# Content signatures; split so that this file does not match itself.
_CREDENTIAL_CONTENT: tuple[tuple[re.Pattern[bytes], re.Pattern[bytes] | None, str], ...] = (
    (
        re.compile(rb'"type"\s*:\s*"service' rb'_account"'),
        re.compile(rb'"private' rb'_key"'),
        "service-account key",
    ),
    (
        re.compile(rb'"type"\s*:\s*"authorized' rb'_user"'),
        re.compile(rb'"refresh' rb'_token"'),
        "Google user credentials",
    ),
    (re.compile(rb"-----BEGIN [A-Z ]*PRIVATE" rb" KEY-----"), None, "private key"),
)


@dataclass
class Scan:
    """The files of a package as they will be packaged, and what that content hashes to."""

    root: Path
    files: list[str] = field(default_factory=list)  # POSIX paths relative to root, sorted
    digest: str = ""
    credentials: list[tuple[str, str]] = field(default_factory=list)  # (path, why)


def hash_entries(entries: Iterable[tuple[str, bytes]]) -> str:
    # Length-prefixed, so no two different trees can produce the same byte stream.
    h = hashlib.sha256()
    for rel, data in entries:
        name = rel.encode()
        h.update(b"%d\0%s\0%d\0" % (len(name), name, len(data)))
        h.update(data)
    return h.hexdigest()[:HASH_LEN]


def credential_reason(rel: str, data: bytes) -> str | None:
    """Why a file looks like a secret, or None. Names first, then content signatures."""
    base = rel.rsplit("/", 1)[-1].lower()
    if base not in _HARMLESS_ENV:
        for pattern, why in _CREDENTIAL_NAMES:
            if fnmatch.fnmatchcase(base, pattern):
                return why
    for first, second, why in _CREDENTIAL_CONTENT:
        if first.search(data) and (second is None or second.search(data)):
            return why
    return None


def scan_package(package_dir: Path, *, skip: Iterable[Path] = ()) -> Scan:
    """Select the files that will be packaged (excludes applied) and hash them; reads only.

    Anything the walk cannot read (a directory or file this user may not read, a path past the
    OS's length limit) is a one-line PackagingError, never a silently smaller package; so is a
    selected file whose name is not UTF-8, which no sdist (a tar of UTF-8 names) can carry.
    """
    scan = select_files(package_dir, skip=skip)
    root = scan.root

    def entries() -> Iterable[tuple[str, bytes]]:
        for rel in scan.files:
            data = (root / rel).read_bytes()
            why = credential_reason(rel, data)
            if why:
                scan.credentials.append((rel, why))
            yield rel, data

    with readable_errors(root):
        scan.digest = hash_entries(entries())
    return scan


def select_files(package_dir: Path, *, skip: Iterable[Path] = ()) -> Scan:
    """The files that will be packaged (excludes applied), without reading them: what `validate`
    needs to judge the layout as `package` will. Errors as :func:`scan_package`'s."""
    root = check_package_dir(package_dir)
    with readable_errors(root):
        return _select(root, skip)


@contextlib.contextmanager
def readable_errors(root: Path) -> Iterator[None]:
    """An OSError while walking or reading the trainer → one line naming the file and the fix."""
    try:
        yield
    except OSError as err:
        where = err.filename if isinstance(err.filename, str) else str(root)
        rel = os.path.relpath(where, root) if where.startswith(str(root)) else where
        fix = "make it readable" if err.errno in (errno.EACCES, errno.EPERM) else "move or rename it"
        raise PackagingError(f"cannot read {shown(rel)} in trainer package {root}: {describe_oserror(err)}; "
                             f"{fix}, or list it in {VTRAIN_IGNORE}") from None


def _raise(err: OSError) -> None:
    raise err


def _is_marked(full: Path) -> bool:
    """A virtualenv or `vtrain local` outputs (--output-dir out), whatever the directory's name."""
    try:
        return (full / "pyvenv.cfg").exists() or _is_local_output(full)
    except OSError as err:  # a directory this user may not search: name it, not the file probed
        raise OSError(err.errno, err.strerror, str(full)) from None


def _select(root: Path, skip: Iterable[Path]) -> Scan:
    skip_set = {os.path.abspath(p) for p in skip}
    rules = IgnoreRules()
    vtrainignore = root / VTRAIN_IGNORE
    if vtrainignore.is_file():
        rules.add_file(vtrainignore, base="", last=True)
    selected: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise):
        here = Path(dirpath)
        outputs = _run_outputs(here)
        rel_dir = here.relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        for name in IGNORE_FILES:
            if name in filenames:
                rules.add_file(here / name, base=rel_dir)
        keep = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            full = here / d
            if (
                is_always_excluded(rel, is_dir=True)
                or d in outputs  # ... or the outputs of `--output-dir .`, beside the sources
                or os.path.abspath(full) in skip_set
                or full.is_symlink()
                or rules.ignored(rel, is_dir=True)
                or _is_marked(full)
            ):
                continue
            keep.append(d)
        dirnames[:] = keep
        for f in filenames:
            rel = f"{rel_dir}/{f}" if rel_dir else f
            if (
                (here / f).is_file()
                and not is_always_excluded(rel, is_dir=False)
                and not rules.ignored(rel, is_dir=False)
            ):
                selected.append(rel)
    undecodable = [rel for rel in selected if not _is_utf8(rel)]
    if undecodable:
        names = ", ".join(shown(rel) for rel in undecodable[:5])
        more = f" and {len(undecodable) - 5} more" if len(undecodable) > 5 else ""
        raise PackagingError(f"file names in trainer package {root} are not valid UTF-8, which a package "
                             f"cannot carry: {names}{more}; rename them, or list them in {VTRAIN_IGNORE}")
    return Scan(root=root, files=sorted(selected))


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.walk gives undecodable bytes as lone surrogates
        return False
    return True


def _is_local_output(directory: Path) -> bool:
    """A base output directory `vtrain local` has run into: it holds the runs folder."""
    return (directory / LOCAL_RUNS_DIR).is_dir()


def _run_outputs(directory: Path) -> set[str]:
    """The folders a local run wrote into `directory` when it is itself the output directory: the
    runs folder and Vertex's model/, checkpoints/, logs/ (never a Python package of the trainer's)."""
    if not _is_local_output(directory):
        return set()
    return {LOCAL_RUNS_DIR} | {d for d in AIP_OUTPUT_DIRS.values() if not (directory / d / "__init__.py").exists()}


def check_package_dir(package_dir: Path | str | None) -> Path:
    if package_dir is None:
        raise PackagingError("no trainer package: set `trainer.package` in the job file")
    bad = path_problem(str(package_dir))
    if bad:
        raise PackagingError(f"the trainer package path {shown(str(package_dir))} {bad}")
    root = Path(package_dir).expanduser()
    try:
        if not root.exists():
            if root.is_symlink():
                raise PackagingError(f"trainer package {root} is a symlink that leads nowhere (a loop, or a "
                                     "missing target)")
            raise PackagingError(f"trainer package directory {root} does not exist")
        if not root.is_dir():
            raise PackagingError(f"trainer package {root} is not a directory")
        if not (root / "pyproject.toml").is_file() and not (root / "setup.py").is_file():
            raise PackagingError(
                f"trainer package {root} has no pyproject.toml or setup.py; `vtrain init` writes a ready one"
            )
    except OSError as err:
        raise PackagingError(f"cannot look at trainer package {root}: {describe_oserror(err)}") from None
    return root.absolute()
