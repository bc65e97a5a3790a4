"""`vtrain cache info|clear`: what vtrain's cache holds, and emptying it safely.

Under the cache dir (VTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/vtrain, else ~/.cache/vtrain), the folders
are :data:`vtrain.userpaths.CACHE_FOLDERS`, the one list every writer names its folder from (and
:data:`~vtrain.userpaths.OLD_CACHE_FOLDERS`, which older vtrains wrote): `info` sizes each, `clear` empties
each. In ``envs/``:

    envs/KEY/        a trainer environment (a venv layered over this interpreter); KEY hashes its sdists
    envs/KEY.lock    held while the environment is checked or built
    envs/KEY.use     held, shared, by every run that uses it; its mtime is the last use

An environment a running job uses, or one being built, is kept and named. The image folders a running
image job reads (``containers/``, ``images/``, ``image-blobs/``) are held the same way, whole
(:func:`vtrain.local.cachefolders.hold`): `clear` keeps a held one and says so. Only these folders are ever
removed, so a cache dir pointed at a folder holding other things loses nothing else; `info` counts those
other things apart ("not vtrain's").
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Any

from vtrain.local.cachefolders import IN_USE, locked
from vtrain.local.envcache import damage, read_marker, remove
from vtrain.userpaths import CACHE_FOLDERS, OLD_CACHE_FOLDERS, cache_folder

#: Every folder `info` sizes and `clear` empties: what vtrain writes now, then what older vtrains wrote.
PARTS: tuple[str, ...] = (*CACHE_FOLDERS, *OLD_CACHE_FOLDERS)
_WHAT: dict[str, str] = {**dict(CACHE_FOLDERS.items()), **OLD_CACHE_FOLDERS}


def _size(path: Path) -> tuple[int, int]:
    """(bytes, files) under `path`, links not followed (a link counts as one file of its own size)."""
    try:
        st = path.lstat()
    except OSError:
        return 0, 0
    if not path.is_dir() or path.is_symlink():
        return st.st_size, 1
    total = files = 0
    for root, dirs, names in os.walk(path):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
                files += 1
    return total, files


def _busy(lock: Path) -> bool:
    """Whether someone holds `lock` (read-only check: nothing is created)."""
    try:
        f = open(lock, encoding="utf-8")  # noqa: SIM115
    except OSError:
        return False
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
    return False


def _env_state(env: Path) -> str:
    if not env.is_dir() or env.is_symlink():
        return "not a directory"
    if _busy(env.parent / f"{env.name}.lock"):
        return "being built"
    marker = read_marker(env)
    if marker is None:
        return "incomplete"
    why = damage(env, marker)
    if why is not None:
        return f"damaged: {why}"
    return "in use" if _busy(env.parent / f"{env.name}.use") else "ready"


def _envs(cache_dir: Path) -> list[Path]:
    envs = cache_folder("envs", cache_dir)
    if not envs.is_dir() or envs.is_symlink():
        return []
    return sorted(p for p in _names(envs) if not p.name.endswith((".lock", ".use")))


def _names(folder: Path) -> list[Path]:
    """What `folder` holds; nothing when it cannot be listed (not a folder, not readable)."""
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def _part(cache_dir: Path, name: str) -> Path:
    return cache_dir / name  # a name of PARTS: CACHE_FOLDERS' (cache_folder's own) or an older vtrain's


def info(cache_dir: Path) -> dict[str, Any]:
    """Plain data: where the cache is, each environment with its state and size, then every folder of
    :data:`PARTS` (path, size, files, what it holds; `held` when a running job holds it) and what else is
    there ("other": the names that are not vtrain's, never touched nor read). `size` is vtrain's folders'."""
    envs: list[dict[str, Any]] = []
    for env in _envs(cache_dir):
        marker = read_marker(env) or {}
        use = env.parent / f"{env.name}.use"
        last = use.stat().st_mtime if use.exists() else None
        envs.append({
            "key": env.name, "path": str(env), "state": _env_state(env), "size": _size(env)[0],
            "sdists": [Path(str(s)).name for s in marker.get("sdists", []) or []],
            "last_used": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(last)) if last else None,
        })
    folders: dict[str, dict[str, Any]] = {}
    for name in PARTS:
        path = _part(cache_dir, name)
        size, files = _size(path)
        folders[name] = {"path": str(path), "exists": path.exists() or path.is_symlink(), "size": size,
                         "files": files, "what": _WHAT[name], "held": name != "envs" and _busy(path / IN_USE)}
    others = sorted(p.name for p in _names(cache_dir) if p.name not in PARTS)
    return {"cache_dir": str(cache_dir), "exists": cache_dir.is_dir(),
            "size": sum(f["size"] for f in folders.values()), "envs": envs, "folders": folders, "other": others}


def clear(cache_dir: Path) -> dict[str, Any]:
    """Remove every environment not in use and every other folder of :data:`PARTS` no running job holds;
    say what was removed and what was kept, and why."""
    removed: list[str] = []
    kept: list[dict[str, str]] = []
    freed = 0
    for env in _envs(cache_dir):
        lock_path, use_path = env.parent / f"{env.name}.lock", env.parent / f"{env.name}.use"
        try:
            lock = locked(lock_path, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            kept.append({"path": str(env), "why": "being built"})
            continue
        with lock:
            try:
                use = locked(use_path, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                kept.append({"path": str(env), "why": "in use by a running job"})
                continue
            with use:
                size = _size(env)[0]
                remove(env)
                # Unlinked while held: a run waiting on the old file sees it replaced and retries
                # (envcache.locked), so no two runs ever build one environment at once.
                for path in (use_path, lock_path):
                    path.unlink(missing_ok=True)
        removed.append(str(env))
        freed += size
    with contextlib.suppress(OSError):  # emptied: gone too (one that keeps an environment is not empty)
        cache_folder("envs", cache_dir).rmdir()
    for name in PARTS:
        path = _part(cache_dir, name)
        if name == "envs" and path.is_dir() and not path.is_symlink():
            continue  # emptied above, but for what is kept (and lock files, zero bytes each)
        if not (path.exists() or path.is_symlink()):
            continue
        hold = _hold_exclusively(path)
        if hold is False:
            kept.append({"path": str(path), "why": "in use by a running job"})
            continue
        with hold or contextlib.nullcontext():
            size = _size(path)[0]
            remove(path)  # the lock file with it: a job waiting on it sees it gone and makes the folder again
        removed.append(str(path))
        freed += size
    return {"cache_dir": str(cache_dir), "removed": removed, "kept": kept, "freed": freed}


def _hold_exclusively(path: Path) -> Any:
    """The folder's in-use lock held exclusively (to remove it), None when it is no folder (nothing to hold),
    False when a running job holds it."""
    if not path.is_dir() or path.is_symlink():
        return None
    try:
        return locked(path / IN_USE, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None  # cannot make the lock file (read-only): nobody can hold it either


__all__ = ["PARTS", "clear", "info"]
