"""Paths a user hands vtrain, judged before the filesystem sees them; files read within bounds.

A NUL byte, a 300-byte file name or a 5,000-byte path is not a "missing file": the OS answers
with ``ValueError`` or ``ENAMETOOLONG`` from deep inside pathlib, and ``Path.resolve`` answers a
symlink loop with ``RuntimeError``. :func:`path_problem` says in words what is wrong with such a
value, so callers report it as a bad value (exit 2) before any I/O. :func:`read_bounded` reads a
file a user names (the job file, a price file) without hanging on a FIFO or reading /dev/zero
forever: only regular files, and only up to a size no real job file comes near.

vtrain's cache (:func:`cache_dir`) and the one list of the folders vtrain writes in it
(:data:`CACHE_FOLDERS`): every writer names its folder through :func:`cache_folder`, and `vtrain cache
info` and `clear` read the same list, so a folder cannot be written and then forgotten.

Imports nothing of vtrain: the job config, the rules, packaging and the CLI all use it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

#: Linux and macOS limits: a name (one path component) and a whole path, in bytes.
NAME_MAX = 255
PATH_MAX = 4095

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def shown(value: str) -> str:
    """`value` printable on one line: NUL, newlines and undecodable bytes escaped, very long ones cut."""
    text = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    text = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return text if len(text) <= 120 else f"{text[:60]}…{text[-40:]} ({len(value)} characters)"


def path_problem(value: str, *, utf8: bool = False) -> str | None:
    """What makes `value` unusable as a path, in words; None when the OS could take it.

    `utf8=True` also refuses names that are not valid UTF-8 (paths that TensorFlow, Cloud Storage
    or a JSON file must carry as text).
    """
    if "\x00" in value:
        return "contains a NUL byte (\\0), which no path can hold"
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        if utf8:
            return "is not valid UTF-8; rename it, or pick a path in plain UTF-8"
        raw = os.fsencode(value)
    if len(raw) > PATH_MAX:
        return f"is {len(raw):,} bytes long; a path may have at most {PATH_MAX:,}"
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        return (f"has a {len(longest):,}-byte name ({shown(os.fsdecode(longest[:24]))}…); a file or "
                f"directory name may have at most {NAME_MAX} bytes")
    return None


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """vtrain's cache: VTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/vtrain, else ~/.cache/vtrain."""
    env = os.environ if env is None else env
    if env.get("VTRAIN_CACHE_DIR"):
        return Path(env["VTRAIN_CACHE_DIR"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vtrain"


#: The folders vtrain writes under its cache, by name; a writer asks :func:`cache_folder` for one of these
#: (mypy refuses a name not listed), so `vtrain cache info` and `clear` account for every one.
CacheFolder = Literal["envs", "sdists", "downloads", "image-layers", "image-bases", "trainer-requires",
                      "image-blobs", "images", "containers"]
#: What each folder holds, in a few words (`vtrain cache info` says it).
CACHE_FOLDERS: dict[CacheFolder, str] = {
    "envs": "trainer environments of `vtrain local` (a venv per set of sdists)",
    "sdists": "trainer sdists built (`local`, `package`, `submit`) and local runs' runtime sdists",
    "downloads": "prebuilt package_uris fetched from Cloud Storage",
    "image-layers": "requirements layers built for trainer and launcher images",
    "image-bases": "each base image's C library, by its config digest",
    "trainer-requires": "a trainer's dependencies as its build backend reported them",
    "image-blobs": "base image layers pulled to run images here, by digest",
    "images": "image layers unpacked to run on this machine's Python",
    "containers": "images unpacked for runc/crun, and the runtime's state",
}
#: Folders older vtrains wrote and none writes now: counted by `cache info`, removed by `cache clear`.
OLD_CACHE_FOLDERS: dict[str, str] = {
    "sdist-files": "left by older vtrains; no longer read or written",
}


def cache_folder(name: CacheFolder, root: Path | None = None) -> Path:
    """Folder `name` of vtrain's cache (`root`, default :func:`cache_dir`): the one way to name one."""
    if name not in CACHE_FOLDERS:
        raise ValueError(f"{name!r} is not one of vtrain's cache folders ({', '.join(CACHE_FOLDERS)})")
    return (cache_dir() if root is None else Path(root)) / name



def absolute(path: Path) -> Path:
    """`path` made absolute with symlinks resolved where they resolve: a loop is left as written.

    ``Path.resolve()`` raises ``RuntimeError`` on a loop (before Python 3.13); the loop then
    surfaces where the path is used, as an ``ELOOP`` the caller words as a one-line error.
    """
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        return Path(os.path.abspath(path))


def describe_oserror(err: OSError) -> str:
    """`strerror` in words, with ELOOP said plainly."""
    if err.errno == errno.ELOOP:
        return "a symlink loop (a link that points back to itself)"
    return err.strerror or str(err)


def read_bounded(path: Path | str, limit: int) -> bytes:
    """The bytes of regular file `path`, refusing anything else before reading it.

    Opened non-blocking so that a FIFO cannot hang the open; a directory, FIFO, device or socket
    raises ``OSError`` naming what it is; a file over `limit` bytes raises ``EFBIG`` having read
    at most `limit` + 1 of them. ``ValueError`` (a NUL in the path) is turned into ``OSError``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except ValueError:
        raise OSError(errno.EINVAL, "the path contains a NUL byte (\\0)") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "something else")
            raise OSError(errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL, f"it is {kind}, not a regular file")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OSError(errno.EFBIG, f"it is larger than {limit:,} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


__all__ = ["CACHE_FOLDERS", "NAME_MAX", "OLD_CACHE_FOLDERS", "PATH_MAX", "CacheFolder", "absolute", "cache_dir",
           "cache_folder", "describe_oserror", "path_problem", "read_bounded", "shown"]
