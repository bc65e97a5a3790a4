"""Which files of a trainer get packaged, what they hash to, and which look like secrets.

Exclusion follows ``.gitignore`` files (in every directory) and a root ``.vtrainignore`` (applied
last, so it may re-include with ``!``), on top of junk that is never packaged (VCS data,
virtualenvs, caches, stale build output) and of vtrain's own files beside a trainer (the job file
in use, job files `vtrain init` wrote, ``vtrain.schema.json``): editing `args` changes no artifact.

Never a byte from outside the folder: a symlink that resolves outside it (a dataset, ``/etc/passwd``,
``~/.aws/credentials``) is left out, with one notice naming it, rather than refused: a link to a
dataset beside the sources is common and the sdist would not hold it anyway, while refusing would
make every such layout edit ``.vtrainignore``. The notice comes before any build, and an entry module
reached only through such a link fails the entry-module check. A link inside the folder counts only when the file
it names is selected on its own (a link to an ignored ``.env`` or to ``.git/config`` is left out too).

Secrets are judged by class (:func:`credential_name_reason`): names (dotenv, keys, ``.npmrc``,
``.pypirc``, ``.netrc``, AWS's ``credentials``, gcloud's databases…), the same names with a backup or
swap suffix (``.env~``, ``x.pem.bak``, ``.credentials.json.swp``), anything under ``.ssh/``,
``.gnupg/``, ``.aws/``, ``.config/gcloud/``, ``.docker/``…, and content signatures in files up to
:data:`CONTENT_SCAN_LIMIT`. Hashing streams (:func:`hash_entries`): memory stays bounded at any size.

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
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from vtrain.constants import AIP_OUTPUT_DIRS, LOCAL_RUNS_DIR, MODELINE, SCHEMA_FILE
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
#: A selected file this large gets a notice: it is read whole whenever a plan or a build needs its hash.
LARGE_FILE = 100 << 20
#: Content signatures are looked for in files up to this size (credential files are small; a 3 GB dataset
#: is not read for them, nor is anything larger). Names are judged whatever the size.
CONTENT_SCAN_LIMIT = 16 << 20
_CHUNK = 1 << 20

# (file-name glob, why). Matched case-insensitively against the base name, and against it with a
# backup or swap suffix taken off (`.env~`, `x.pem.bak`, `.credentials.swp`).
_CREDENTIAL_NAMES: tuple[tuple[str, str], ...] = (
    (".env", "dotenv file"),
    (".env.*", "dotenv file"),
    (".envrc", "direnv file"),
    ("*.pem", "PEM key or certificate"),
    ("*.key", "private key"),
    ("*.ppk", "PuTTY key"),
    ("id_rsa*", "SSH key"),
    ("id_dsa*", "SSH key"),
    ("id_ecdsa*", "SSH key"),
    ("id_ed25519*", "SSH key"),
    ("*.p12", "PKCS#12 key store"),
    ("*.pfx", "PKCS#12 key store"),
    ("*.jks", "Java key store"),
    ("*.keystore", "key store"),
    ("*.kdbx", "password database"),
    ("credentials", "cloud credentials file (AWS's name)"),
    ("credentials.json", "credentials file"),
    ("credentials.db", "gcloud credentials"),
    ("access_tokens.db", "gcloud credentials"),
    ("application_default_credentials.json", "Google user credentials"),
    ("client_secret*.json", "OAuth client secret"),
    (".netrc", "login credentials"),
    ("_netrc", "login credentials"),
    (".git-credentials", "login credentials"),
    (".npmrc", "npm registry token"),
    (".pypirc", "PyPI upload credentials"),
    (".dockercfg", "Docker registry login"),
    (".htpasswd", "password file"),
    (".pgpass", "PostgreSQL passwords"),
)
# Directories whose every file is a secret (a path holding these parts in a row, at any depth).
_CREDENTIAL_DIRS: tuple[tuple[tuple[str, ...], str], ...] = (
    ((".ssh",), "SSH directory"),
    ((".gnupg",), "GnuPG keyring"),
    ((".aws",), "AWS credentials directory"),
    ((".config", "gcloud"), "gcloud credentials directory"),
    ((".azure",), "Azure credentials directory"),
    ((".kube",), "Kubernetes credentials directory"),
    ((".docker",), "Docker login directory"),
    ((".password-store",), "password store"),
)
_BACKUP_SUFFIXES = (".bak", ".backup", ".orig", ".old", ".save", ".swp", ".swo", ".swn", ".tmp", "~")
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
_OVERLAP = 256  # bytes carried from one chunk to the next, so a signature split by a chunk border is seen


@dataclass
class Scan:
    """The files of a package as they will be packaged, and what that content hashes to."""

    root: Path
    files: list[str] = field(default_factory=list)  # POSIX paths relative to root, sorted
    digest: str = ""
    credentials: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (path, why): symlinks that lead out
    large: list[tuple[str, int]] = field(default_factory=list)  # (path, bytes) of files over LARGE_FILE
    links: dict[str, str] = field(default_factory=dict)  # selected symlink -> the selected file it names


def hash_entries(entries: Iterable[tuple[str, bytes | Path]],
                 on_data: Callable[[str, bytes], None] | None = None) -> str:
    """The content hash of (path, content) entries; a Path's bytes are streamed (bounded memory at any
    size). `on_data` sees each file's bytes as they pass (the content signatures)."""
    # Length-prefixed, so no two different trees can produce the same byte stream.
    h = hashlib.sha256()
    for rel, value in entries:
        name = rel.encode()
        if isinstance(value, bytes):
            h.update(b"%d\0%s\0%d\0" % (len(name), name, len(value)))
            h.update(value)
            if on_data is not None:
                on_data(rel, value)
            continue
        with open_regular(value) as fh:
            size = os.fstat(fh.fileno()).st_size
            h.update(b"%d\0%s\0%d\0" % (len(name), name, size))
            left = size
            while left > 0:
                chunk = fh.read(min(_CHUNK, left))
                if not chunk:
                    break
                h.update(chunk)
                left -= len(chunk)
                if on_data is not None:
                    on_data(rel, chunk)
            if left or fh.read(1):
                raise OSError(errno.EAGAIN, "it changed while it was read; run again", str(value))
    return h.hexdigest()[:HASH_LEN]


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading if it is a regular file (a FIFO cannot hang the open); else OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "it is not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _unbackup(base: str) -> list[str]:
    """`base` and the names it is a backup, swap or autosave copy of: `.env~` → `.env`."""
    names = [base]
    name = base
    changed = True
    while changed:
        changed = False
        if len(name) > 2 and name.startswith("#") and name.endswith("#"):  # emacs autosave
            name, changed = name[1:-1], True
        for suffix in _BACKUP_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
                if suffix in (".swp", ".swo", ".swn") and name.startswith(".") and len(name) > 1:
                    names.append(name)  # vim's swap of `x.pem` is `.x.pem.swp`
                    name = name[1:]
        if changed:
            names.append(name)
    return names


def credential_name_reason(rel: str) -> str | None:
    """Why a path looks like a secret by its name or its directory, or None."""
    lowered = rel.lower()
    parts = lowered.split("/")
    dirs = parts[:-1]
    for seq, why in _CREDENTIAL_DIRS:
        n = len(seq)
        if any(tuple(dirs[i : i + n]) == seq for i in range(len(dirs) - n + 1)):
            return why
    names = _unbackup(parts[-1])
    if any(base in _HARMLESS_ENV for base in names):
        return None
    for base in names:
        for pattern, why in _CREDENTIAL_NAMES:
            if fnmatch.fnmatchcase(base, pattern):
                return why if base == parts[-1] else f"a backup of a {why}"
    return None


class _Signatures:
    """Content signatures of credentials, looked for in a file's bytes as they stream past."""

    def __init__(self) -> None:
        self.found = [[False, second is None] for _, second, _ in _CREDENTIAL_CONTENT]
        self.tail = b""

    def feed(self, chunk: bytes) -> None:
        window = self.tail + chunk
        for state, (first, second, _) in zip(self.found, _CREDENTIAL_CONTENT, strict=True):
            if not state[0] and first.search(window):
                state[0] = True
            if not state[1] and second is not None and second.search(window):
                state[1] = True
        self.tail = window[-_OVERLAP:]

    def reason(self) -> str | None:
        for (first, second), (_, _, why) in zip(self.found, _CREDENTIAL_CONTENT, strict=True):
            if first and second:
                return why
        return None


def credential_reason(rel: str, data: bytes) -> str | None:
    """Why a file looks like a secret, or None. Names first, then content signatures."""
    why = credential_name_reason(rel)
    if why:
        return why
    signatures = _Signatures()
    signatures.feed(data[:CONTENT_SCAN_LIMIT])
    return signatures.reason()


def content_reasons(scan: Scan, files: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """Files of `scan` (all by default) up to CONTENT_SCAN_LIMIT whose bytes carry a credential signature."""
    found: list[tuple[str, str]] = []
    with readable_errors(scan.root):
        for rel in scan.files if files is None else files:
            if (scan.root / rel).stat().st_size > CONTENT_SCAN_LIMIT:
                continue
            signatures = _Signatures()
            with open_regular(scan.root / rel) as fh:
                left = CONTENT_SCAN_LIMIT
                while left > 0 and (chunk := fh.read(min(_CHUNK, left))):
                    signatures.feed(chunk)
                    left -= len(chunk)
                    signatures.feed(chunk)
            why = signatures.reason()
            if why:
                found.append((rel, why))
    return found


def check_contents(scan: Scan) -> Scan:
    """`scan` with the files whose content looks like a secret added to its credentials (names are in already)."""
    named = {rel for rel, _ in scan.credentials}
    scan.credentials += [(rel, why) for rel, why in content_reasons(scan, [f for f in scan.files if f not in named])]
    scan.credentials.sort()
    return scan


def scan_package(package_dir: Path, *, skip: Iterable[Path] = ()) -> Scan:
    """Select the files that will be packaged (excludes applied) and hash them all; reads only.

    Anything the walk cannot read (a directory or file this user may not read, a path past the
    OS's length limit) is a one-line PackagingError, never a silently smaller package; so is a
    selected file whose name is not UTF-8, which no sdist (a tar of UTF-8 names) can carry.
    """
    scan = check_contents(select_files(package_dir, skip=skip))
    with readable_errors(scan.root):
        scan.digest = hash_entries((rel, scan.root / rel) for rel in scan.files)
    return scan


def select_files(package_dir: Path, *, skip: Iterable[Path] = ()) -> Scan:
    """The files that will be packaged (excludes applied), without reading them: what `validate`
    needs to judge the layout as `package` will. Files whose names say they are secrets are in
    `credentials`; symlinks that lead out of the folder are left out (in `left_out`), and one notice
    says so, as one says which files are large. Errors as :func:`scan_package`'s."""
    root = check_package_dir(package_dir)
    with readable_errors(root):
        scan = _select(root, skip)
    _notice(scan)
    return scan


_noticed: set[tuple[str, str]] = set()


def _notice(scan: Scan) -> None:
    """One notice per trainer folder and kind in a process (a render plans several artifacts from it)."""
    from vtrain import network
    from vtrain.foreign import printable

    def once(kind: str, line: str) -> None:
        key = (str(scan.root), f"{kind}:{line}")
        if key not in _noticed:
            _noticed.add(key)
            network.note(line)

    if scan.left_out:
        names = ", ".join(printable(f"{rel} ({why})") for rel, why in scan.left_out[:5])
        more = f" and {len(scan.left_out) - 5} more" if len(scan.left_out) > 5 else ""
        once("out", f"trainer package {printable(str(scan.root))}: left out {len(scan.left_out)} symlink(s) that "
                    f"lead outside it or to a file it leaves out: {names}{more}; copy the file in if the trainer "
                    "needs it")
    if scan.large:
        names = ", ".join(f"{printable(rel)} ({size / (1 << 30):.1f} GiB)" if size >= 1 << 30
                          else f"{printable(rel)} ({size >> 20} MiB)" for rel, size in scan.large[:5])
        more = f" and {len(scan.large) - 5} more" if len(scan.large) > 5 else ""
        once("large", f"trainer package {printable(str(scan.root))}: {len(scan.large)} large file(s), read to hash "
                      f"them whenever the build backend keeps them: {names}{more}; list them in {VTRAIN_IGNORE} "
                      "if the trainer does not need them")


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


def _inside(path: str, real_root: str) -> bool:
    return path == real_root or path.startswith(real_root.rstrip(os.sep) + os.sep)


def _is_job_file(full: Path, name: str) -> bool:
    """vtrain's own files beside a trainer: the generated schema, and job files `vtrain init` wrote
    (their first line is the schema modeline). Never trainer files: editing `args` changes no artifact."""
    if name == SCHEMA_FILE:
        return True
    if not name.lower().endswith((".yaml", ".yml")):
        return False
    try:
        with open_regular(full) as fh:
            head = fh.read(len(MODELINE) + 8)
    except OSError:
        return False
    return head.lstrip(b"\xef\xbb\xbf").startswith(MODELINE.encode())


def _select(root: Path, skip: Iterable[Path]) -> Scan:
    skips = list(skip)
    skip_set = {os.path.abspath(p) for p in skips} | {os.path.realpath(p) for p in skips}
    real_root = os.path.realpath(root)
    rules = IgnoreRules()
    vtrainignore = root / VTRAIN_IGNORE
    if vtrainignore.is_file():
        rules.add_file(vtrainignore, base="", last=True)
    selected: list[str] = []
    left_out: list[tuple[str, str]] = []
    links: dict[str, str] = {}
    large: list[tuple[str, int]] = []
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
            full = here / f
            if (
                is_always_excluded(rel, is_dir=False)
                or rules.ignored(rel, is_dir=False)
                or os.path.abspath(full) in skip_set
                or os.path.realpath(full) in skip_set
                or _is_job_file(full, f)
            ):
                continue
            if full.is_symlink():
                # Never a byte from outside the folder: a link out (a dataset, /etc/passwd, ~/.aws) is left out.
                target = os.path.realpath(full)
                if not _inside(target, real_root):
                    left_out.append((rel, f"-> {target}, outside the folder"))
                    continue
                if os.path.isfile(target):
                    links[rel] = Path(os.path.relpath(target, real_root)).as_posix()
                    selected.append(rel)
                continue
            if full.is_file():
                selected.append(rel)
    chosen = set(selected)
    for rel, target in links.items():  # a link in the folder counts only if what it names is selected itself
        if target not in chosen or target in links:
            left_out.append((rel, f"-> {target}, which is not packaged"))
            chosen.discard(rel)
    undecodable = [rel for rel in chosen if not _is_utf8(rel)]
    if undecodable:
        names = ", ".join(shown(rel) for rel in sorted(undecodable)[:5])
        more = f" and {len(undecodable) - 5} more" if len(undecodable) > 5 else ""
        raise PackagingError(f"file names in trainer package {root} are not valid UTF-8, which a package "
                             f"cannot carry: {names}{more}; rename them, or list them in {VTRAIN_IGNORE}")
    files = sorted(chosen)
    for rel in files:
        size = (root / rel).stat().st_size
        if size >= LARGE_FILE:
            large.append((rel, size))
    credentials = []
    for rel in files:
        why = credential_name_reason(rel) or (credential_name_reason(links[rel]) if rel in links else None)
        if why:
            credentials.append((rel, why))
    return Scan(root=root, files=files, credentials=credentials, left_out=sorted(left_out), large=large,
                links={rel: t for rel, t in links.items() if rel in chosen})


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
