"""Which files of a trainer get packaged, what they hash to, and which look like secrets.

Exclusion follows ``.gitignore`` files (in every directory) and a root ``.vtrainignore`` (applied
last, so it may re-include with ``!``), on top of junk that is never packaged (VCS data,
virtualenvs, caches, shell and REPL histories, stale build output) and of vtrain's own files
beside a trainer (the job file in use, job files `vtrain init` wrote, ``vtrain.schema.json``):
editing `args` changes no artifact.

Never a byte from outside the folder: a symlink that resolves outside it (a dataset, ``/etc/passwd``,
``~/.aws/credentials``) is left out, with one notice naming it, rather than refused: a link to a
dataset beside the sources is common and the trainer would not install it anyway, while refusing would
make every such layout edit ``.vtrainignore``. The notice comes before any build, and an entry module
reached only through such a link fails the entry-module check. A link inside the folder counts only
when the file it names is selected on its own (a link to an ignored ``.env`` or to ``.git/config`` is left out too).

The ignore files' syntax is :mod:`vtrain.trainer.ignorerules`'s; which selected files look like
secrets, :mod:`vtrain.trainer.credentials`'s. As in git, a file inside an excluded directory cannot be
re-included: the walk prunes excluded directories. Hashing streams (:func:`hash_entries`): memory
stays bounded whatever a file's size.
"""

from __future__ import annotations

import contextlib
import errno
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
from vtrain.trainer.ignorerules import IgnoreRules, translate  # noqa: F401 (translate: re-exported)
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
    # a home directory's: caches, installed packages and trash, IPython's history database
    ".cache",
    ".local",
    ".ipython",
    ".Trash",
}
_ALWAYS_ROOT_DIRS = {"build", "dist"}  # stale build output at the package root
#: Bytecode, OS litter, coverage data, and what shells, REPLs and editors remember of a session (commands typed
#: with tokens in them): .bash_history, .zsh_history, .python_history, .psql_history, .Rhistory, .viminfo...
_ALWAYS_FILES = re.compile(r"(.*\.py[co]|\.DS_Store|\.coverage|\.[\w.-]*history|\.histfile|\.lesshst|\.viminfo|"
                           r"\.wget-hsts)$")


def is_always_excluded(rel: str, *, is_dir: bool) -> bool:
    name = rel.rsplit("/", 1)[-1]
    if is_dir:
        return name in _ALWAYS_DIRS or name.endswith(".egg-info") or rel in _ALWAYS_ROOT_DIRS
    return bool(_ALWAYS_FILES.fullmatch(name))


HASH_LEN = 12
IGNORE_FILES = (".gitignore",)  # read in every directory, like git
VTRAIN_IGNORE = ".vtrainignore"  # read at the package root, applied last (it may re-include with `!`)
#: A selected file this large gets a notice: it is read whole whenever a plan or a build needs its hash.
LARGE_FILE = 100 << 20
_CHUNK = 1 << 20

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
    own_output: list[str] = field(default_factory=list)  # files this vtrain is writing (its stdout, its stderr)
    #: What each selected file was when `digest` was hashed: (bytes, sha256 hex). A build from this scan takes
    #: exactly those bytes (:class:`vtrain.trainer.image.layers.Pinned`), so what is built is what was named.
    states: dict[str, tuple[int, str]] = field(default_factory=dict)


def hash_entries(entries: Iterable[tuple[str, bytes | Path]],
                 on_data: Callable[[str, bytes], None] | None = None,
                 states: dict[str, tuple[int, str]] | None = None) -> str:
    """The content hash of (path, content) entries; a Path's bytes are streamed (bounded memory at any
    size). `on_data` sees each file's bytes as they pass (the content signatures); `states` gets each file's
    (bytes, sha256 hex) as it was hashed."""
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
            own = hashlib.sha256()
            left = size
            while left > 0:
                chunk = fh.read(min(_CHUNK, left))
                if not chunk:
                    break
                h.update(chunk)
                own.update(chunk)
                left -= len(chunk)
                if on_data is not None:
                    on_data(rel, chunk)
            if left or fh.read(1):
                raise OSError(errno.EAGAIN, "it changed while it was read; run again", str(value))
            if states is not None:
                states[rel] = (size, own.hexdigest())
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


def select_files(package_dir: Path, *, skip: Iterable[Path] = ()) -> Scan:
    """The files that will be packaged (excludes applied), without reading them: what `validate`
    needs to judge the layout as `package` will (secrets are judged by :mod:`vtrain.trainer.credentials`).
    Symlinks that lead out of the folder are left out (in `left_out`), and one notice says so, as one
    says which files are large. Errors as :func:`~vtrain.trainer.packaging.scan_package`'s."""
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
    if scan.own_output:
        names = ", ".join(map(printable, scan.own_output))
        once("own", f"trainer package {printable(str(scan.root))}: left out {names}: this vtrain's own output (its "
                    "stdout or stderr), written while it runs, is no trainer file")
    if scan.large:
        names = ", ".join(f"{printable(rel)} ({size / (1 << 30):.1f} GiB)" if size >= 1 << 30
                          else f"{printable(rel)} ({size >> 20} MiB)" for rel, size in scan.large[:5])
        more = f" and {len(scan.large) - 5} more" if len(scan.large) > 5 else ""
        once("large", f"trainer package {printable(str(scan.root))}: {len(scan.large)} large file(s), shipped in "
                      f"the package and read to hash it whenever a plan or a build names it: {names}{more}; "
                      f"list them in {VTRAIN_IGNORE} if the trainer does not need them")


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


def _own_outputs() -> set[tuple[int, int]]:
    """(device, inode) of this process's stdout and stderr where they are regular files (`vtrain local vtrain.yaml
    > run.log`): a log vtrain writes while it runs is never part of what it packages."""
    found = set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
    return found


def _select(root: Path, skip: Iterable[Path]) -> Scan:
    skips = list(skip)
    own = _own_outputs()
    own_output: list[str] = []
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
            if own and (full.lstat().st_dev, full.lstat().st_ino) in own:
                own_output.append(rel)
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
    return Scan(root=root, files=files, left_out=sorted(left_out), large=large,
                links={rel: t for rel, t in links.items() if rel in chosen}, own_output=sorted(own_output))


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
