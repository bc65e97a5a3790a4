"""`vtrain cache info|clear`: what the local environment cache holds, and emptying it safely.

Under the cache dir (VTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/vtrain, else ~/.cache/vtrain):

    envs/KEY/        a trainer environment (a venv layered over this interpreter); KEY hashes its sdists
    envs/KEY.lock    held while the environment is checked or built
    envs/KEY.use     held, shared, by every run that uses it; its mtime is the last use
    sdists/          the trainer sdists built (`vtrain local`, `package`, `submit`), each with the list of the
                     files its backend packaged (NAME.backend.json), and the runtime sdists of local runs
    downloads/       prebuilt package_uris fetched from Cloud Storage
    sdist-files/     left by older vtrains (per trainer layout, the files the build backend left out);
                     no longer read or written, since the sdist is named by the selection alone
    image-layers/    built requirements layers of trainer images (`vtrain.trainer.image.wheels`)
    image-bases/     each base image's C library, by its config digest (`vtrain.trainer.image.libc`)
    trainer-requires/ a trainer's dependencies as its build backend reported them, by content hash

Only these entries are ever removed, so a cache dir pointed at a folder holding other things
loses nothing else. An environment a running job uses, or one being built, is kept and named.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Any

from vtrain.local.envcache import damage, locked, read_marker, remove

PARTS = ("envs", "sdists", "downloads", "sdist-files", "image-layers", "image-bases", "trainer-requires")


def _size(path: Path) -> int:
    """Bytes under `path`, links not followed."""
    try:
        st = path.lstat()
    except OSError:
        return 0
    if not path.is_dir() or path.is_symlink():
        return st.st_size
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


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
    envs = cache_dir / "envs"
    if not envs.is_dir():
        return []
    return sorted(p for p in envs.iterdir() if not p.name.endswith((".lock", ".use")))


def info(cache_dir: Path) -> dict[str, Any]:
    """Plain data: where the cache is, each environment with its state and size, the other parts."""
    envs: list[dict[str, Any]] = []
    for env in _envs(cache_dir):
        marker = read_marker(env) or {}
        use = env.parent / f"{env.name}.use"
        last = use.stat().st_mtime if use.exists() else None
        envs.append({
            "key": env.name, "path": str(env), "state": _env_state(env), "size": _size(env),
            "sdists": [Path(str(s)).name for s in marker.get("sdists", []) or []],
            "last_used": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(last)) if last else None,
        })
    parts: dict[str, dict[str, Any]] = {name: {"path": str(cache_dir / name), "size": _size(cache_dir / name),
                    "files": sum(len(f) for _, _, f in os.walk(cache_dir / name))}
             for name in ("sdists", "downloads")}
    total = sum(e["size"] for e in envs) + sum(p["size"] for p in parts.values())
    return {"cache_dir": str(cache_dir), "exists": cache_dir.is_dir(), "size": total, "envs": envs, **parts}


def clear(cache_dir: Path) -> dict[str, Any]:
    """Remove every environment not in use, the built sdists and the downloads; say what was kept."""
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
                size = _size(env)
                remove(env)
                # Unlinked while held: a run waiting on the old file sees it replaced and retries
                # (envcache.locked), so no two runs ever build one environment at once.
                for path in (use_path, lock_path):
                    path.unlink(missing_ok=True)
        removed.append(str(env))
        freed += size
    for name in PARTS:
        path = cache_dir / name
        if name == "envs" and path.is_dir() and not path.is_symlink():
            continue  # emptied above, but for what is kept (and lock files, zero bytes each)
        if path.exists() or path.is_symlink():
            size = _size(path)
            remove(path)
            removed.append(str(path))
            freed += size
    return {"cache_dir": str(cache_dir), "removed": removed, "kept": kept, "freed": freed}


__all__ = ["PARTS", "clear", "info"]
