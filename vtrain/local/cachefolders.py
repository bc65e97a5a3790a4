"""vtrain's cache folders as runs use them: made when missing (:func:`cache_dir_ready`), locked in a way
`vtrain cache clear` can replace (:func:`locked`), and held, shared, for as long as a job reads them
(:func:`hold`, a :class:`Lease`): `clear` keeps a held folder, whole, as it keeps an environment in use
(:mod:`vtrain.local.envcache`'s ``<key>.use``). The folders are :data:`vtrain.userpaths.CACHE_FOLDERS`."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from vtrain.errors import PackagingError
from vtrain.userpaths import CacheFolder, cache_folder


class Lease:
    """A shared hold on one environment (or on cache folders, :func:`hold`) while it is used; `release` when
    done (again: nothing). It holds lock files, and other leases (a trainer environment layered over the
    image's stack holds both)."""

    def __init__(self, *held: IO[str] | Lease | None) -> None:
        self._held = [h for h in held if h is not None]

    def release(self) -> None:
        for held in self._held:
            if isinstance(held, Lease):
                held.release()
            else:
                held.close()
        self._held = []


#: The lock file in a cache folder that a running job holds (shared) while it reads the folder:
#: `vtrain cache clear` keeps a folder it cannot lock exclusively (:func:`hold`).
IN_USE = ".in-use"


def hold(cache_dir: Path, *folders: CacheFolder) -> Lease:
    """A shared hold on `folders` of the cache (each made if missing) while a job uses what is in them: an
    image job's unpacked trees and blobs. `vtrain cache clear` keeps a held folder, whole."""
    files: list[IO[str]] = []
    try:
        for name in folders:
            for _ in range(10):  # a `cache clear` that removed the folder meanwhile: make it again
                cache_dir_ready(cache_dir, name)
                try:
                    files.append(locked(cache_folder(name, cache_dir) / IN_USE, fcntl.LOCK_SH))
                    break
                except FileNotFoundError:
                    continue
            else:
                raise PackagingError(f"cannot hold the cache folder {cache_folder(name, cache_dir)}: it keeps "
                                     "being removed")
    except BaseException:
        Lease(*files).release()
        raise
    return Lease(*files)


def locked(path: Path, mode: int) -> IO[str]:
    """`path` opened and flock'ed; the lock is on the file that is at `path` now, even if a
    `vtrain cache clear` replaced it while we waited."""
    while True:
        f = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - the caller owns the lock
        try:
            fcntl.flock(f, mode)
            if os.path.exists(path) and os.path.samestat(os.fstat(f.fileno()), os.stat(path)):
                return f
        except BaseException:
            f.close()
            raise
        f.close()


def cache_dir_ready(cache_dir: Path, *folders: CacheFolder) -> None:
    """The cache and the folders named exist as directories; one line naming the path, else."""
    for path in (cache_dir, *(cache_folder(d, cache_dir) for d in folders)):
        try:
            path.mkdir(parents=True, exist_ok=True)
            if not path.is_dir():
                raise FileExistsError(17, "File exists")
        except OSError as err:
            hint = ("set VTRAIN_CACHE_DIR to a writable directory" if path == cache_dir
                    else "remove it, or run `vtrain cache clear`")
            raise PackagingError(f"cannot use the environment cache: {path}: {err.strerror or err}; {hint}") from None


__all__ = ["IN_USE", "Lease", "cache_dir_ready", "hold", "locked"]
