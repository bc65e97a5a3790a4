"""The trainer's isolated environment for a local run: what the prebuilt image would hold.

On Vertex a replica starts from a prebuilt TensorFlow image and pip-installs the job's
``packageUris`` (the trainer sdist and vtrain's runtime sdist) before running
``python -m <module>``. Locally the "image" is the interpreter running vtrain (it has
TensorFlow); the sdists go into a venv layered over it, cached by content hash under
``~/.cache/vtrain/envs/<hash>``. Installing the real sdists, not the source tree, is the
point: a module left out of the package, or a missing dependency, fails here, in seconds,
not after a paid cluster has started.

How the layering works: a venv created without pip, whose one ``.pth`` file calls
``site.addsitedir`` on the host's site-packages. The venv's own site-packages come first, so
the trainer and vtrain installed there shadow anything the host has, while TensorFlow and
friends come from the host, exactly like packages baked into an image. (``venv
--system-site-packages`` would not do: from inside a virtualenv it exposes the base
interpreter's packages, not the virtualenv's.)

Dependencies: the sdists are installed with ``--no-deps``; then each requirement the trainer
declares is checked against what the "image" has. Missing ones are installed (pinned
against the host's versions, so TensorFlow is never replaced); one the host has at another
version is kept, with a notice, since replacing the image's TensorFlow stack locally would
test something else than Vertex runs.

Trust, but verify: the ready marker is written atomically (a temporary file renamed into
place) and lists every file the environment's own packages installed; an environment is reused
only when the marker parses and all those files are still there, otherwise it is rebuilt. A run
holds a shared lease on its environment (``<key>.use``) for as long as it runs, so
``vtrain cache clear`` (:mod:`vtrain.local.cacheadmin`) never deletes one in use (the locks and leases:
:mod:`vtrain.local.cachefolders`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from vtrain.errors import PackagingError
from vtrain.local.cachefolders import Lease, cache_dir_ready, locked
from vtrain.userpaths import cache_folder

ENV_FORMAT = "1"  # bump when the layout of a cached environment changes
READY = ".vtrain-ready.json"
IMAGE_PTH = "_vtrain_image.pth"
_PIP = ("-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--no-warn-script-location")


@dataclass(frozen=True)
class TrainerEnv:
    """A ready environment: run ``python``; ``cached`` says whether this run built it.

    ``lease`` keeps ``vtrain cache clear`` away from it until the run that uses it releases it.
    """

    venv: Path
    python: str
    sdists: tuple[Path, ...]
    cached: bool
    seconds: float
    notices: tuple[str, ...] = field(default=())
    lease: Lease | None = field(default=None, compare=False, repr=False)
    tensorflow: str | None = None  # the image's stack's TensorFlow; None: this machine's (host runtime)


@dataclass(frozen=True)
class Base:
    """What a trainer environment layers over: an interpreter and the site directories that stand for the image
    (this machine's, or the image's stack: :mod:`vtrain.local.stacks`)."""

    python: str
    site_dirs: tuple[str, ...]
    key: str  # names the base in the environment's key
    who: str = "this machine"  # in notices: "this machine has numpy 2.1"
    tensorflow: str | None = None
    lease: Lease | None = field(default=None, compare=False, repr=False)


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """VTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/vtrain, else ~/.cache/vtrain (the packaging's cache too)."""
    from vtrain.userpaths import cache_dir

    return cache_dir(env)


def host_site_dirs() -> list[str]:
    """The site directories of the interpreter running vtrain: the local stand-in for the image. Those a
    .pth file adds count too (a venv layered on another's site-packages): what imports here is the image."""
    dirs = list(site.getsitepackages())
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user and os.path.isdir(user):
        dirs.append(user)
    dirs += [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


#: Past this many bytes unpacked or members, a package's digest is its file's bytes (a tar that inflates
#: without end).
MAX_DIGEST_BYTES = 1 << 32
MAX_DIGEST_MEMBERS = 1_000_000


def package_digest(path: Path) -> str:
    """What a package installs, not how it was archived: the sha256 of a tar's members (name, kind, mode, link
    target, contents) in name order. The same files built again (a new gzip header, new mtimes) name the same
    environment: a trainer resubmitted unchanged is not installed again. Anything else (a wheel, a zip, a tar
    that does not read, or one past MAX_DIGEST_BYTES or MAX_DIGEST_MEMBERS): the sha256 of its bytes."""
    rows: list[str] = []
    left = MAX_DIGEST_BYTES
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                left -= member.size
                if left < 0 or len(rows) == MAX_DIGEST_MEMBERS:
                    raise ValueError("past the bound")
                fh = tar.extractfile(member) if member.isfile() else None
                rows.append(json.dumps([member.name, member.type.decode("latin-1"), f"{member.mode & 0o7777:o}",
                                        member.linkname, _sha256(fh) if fh is not None else ""]))
    except Exception:  # not a tar, or one that does not read to its end (gzip, bz2, xz errors alike)
        with open(path, "rb") as whole:
            return "bytes:" + _sha256(whole)
    return "members:" + hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()


def _sha256(fh: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: fh.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()


def env_key(sdists: Sequence[Path], python: str, site_dirs: Sequence[str], base: str = "") -> str:
    """Content hash of what the environment holds (:func:`package_digest`) and of the interpreter it layers
    over (`base` names an image's stack)."""
    contents = sorted(package_digest(p) for p in sdists)
    data = {"format": ENV_FORMAT, "sdists": contents,
            "python": os.path.realpath(python), "version": sys.version, "site": list(site_dirs)}
    if base:
        data["base"] = base
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:20]


# --------------------------------------------------------------------------- requirements (pure)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check_requirements(requires: Iterable[str], installed: Mapping[str, str],
                       who: str = "this machine") -> tuple[list[str], list[str]]:
    """Split a trainer's requirements into (to install, notices) against the image's packages.

    `installed` maps canonical names to versions. A requirement whose marker does not apply
    is skipped; one the image satisfies needs nothing; one the image has at another version
    is kept with a notice (see the module docstring); a missing one is installed.
    """
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # pragma: no cover - pip always vendors it
        from pip._vendor.packaging.requirements import InvalidRequirement, Requirement  # type: ignore
    install: list[str] = []
    notices: list[str] = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            install.append(text)
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        have = installed.get(canonical(req.name))
        if have is None:
            install.append(text)
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            notices.append(f"the trainer requires {req}; {who} has {req.name} {have}, kept "
                           f"(local runs use {who}'s packages as the image's; check the "
                           "pin matches trainer.image before submitting)")
    return install, notices


def installed_versions(paths: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for dist in metadata.distributions(path=list(paths)):
        name = dist.metadata["Name"]
        if name and canonical(name) not in out:
            out[canonical(name)] = dist.version
    return out


# --------------------------------------------------------------------------- building (I/O)


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        tail = [line for line in done.stdout.splitlines() if line.strip()][-15:]
        raise PackagingError(f"{what} failed (pip exit {done.returncode}):\n"
                             + "\n".join(f"  | {line}" for line in tail))


def _site_packages(venv: Path) -> Path:
    """The venv's site-packages, for whichever Python made it (this one's, or the image's stack's minor)."""
    found = sorted(venv.glob("lib/python3.*/site-packages"))
    if found:
        return found[0]
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


site_packages = _site_packages


def _requires(child_site: Path) -> list[str]:
    """What the packages just installed (with --no-deps, alone in the venv) declare they need."""
    reqs: list[str] = []
    for dist in metadata.distributions(path=[str(child_site)]):
        reqs.extend(dist.requires or [])
    return reqs


def remove(path: Path) -> None:
    """Delete a cache entry whatever it is (a half-built venv, a stray file or link in its place)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _build(venv: Path, sdists: Sequence[Path], python: str, site_dirs: Sequence[str],
           who: str = "this machine") -> list[str]:
    remove(venv)  # a half-built environment from an interrupted run, or whatever is in its place
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    child_site = _site_packages(venv)
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in site_dirs)
    (child_site / IMAGE_PTH).write_text(lines, encoding="utf-8")
    child = str(venv / "bin" / "python")
    # pip comes from the host through the .pth; the venv's prefix is where it installs.
    base = [child, *_PIP, "--no-deps", "--ignore-installed"]
    files = [str(p) for p in sdists]
    try:
        _run([*base, "--no-build-isolation", *files], "installing the trainer package")
    except PackagingError:
        # The host lacks the build backend the sdist asks for: let pip build it in isolation.
        _run([*base, *files], "installing the trainer package")
    requires = _requires(child_site)
    host = installed_versions([str(child_site), *site_dirs])
    missing, notices = check_requirements(requires, host, who)
    if missing:
        constraints = venv / "host-constraints.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(installed_versions(site_dirs).items())),
                               encoding="utf-8")
        _run([child, *_PIP, "-c", str(constraints), *missing],
             f"installing the trainer's dependencies ({', '.join(missing)})")
        notices.append(f"installed the trainer's dependencies into the run environment: {', '.join(missing)}")
    return notices


def read_marker(venv: Path) -> dict[str, Any] | None:
    """The ready marker, or None when it is missing or unreadable (never trusted half-written)."""
    try:
        data = json.loads((venv / READY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != ENV_FORMAT:
        return None
    # The one check of its shape: whoever reads a marker (runs, `cache info`) gets lists of text.
    for key in ("sdists", "files", "notices"):
        items = data.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, str) and "\x00" not in i for i in items):
            return None
    return data


def write_marker(venv: Path, data: dict[str, object]) -> None:
    tmp = venv / f".{READY}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, venv / READY)  # the marker is whole or absent


def installed_files(venv: Path) -> list[str]:
    """Every file the packages in the environment's own site-packages installed (venv-relative)."""
    site_dir = _site_packages(venv)
    out: list[str] = []
    for dist in metadata.distributions(path=[str(site_dir)]):
        for f in dist.files or ():
            path = Path(os.path.normpath(site_dir / f))
            if "__pycache__" not in path.parts and path.suffix != ".pyc":
                with contextlib.suppress(ValueError):
                    out.append(path.relative_to(venv).as_posix())
    return sorted(set(out))


def damage(venv: Path, marker: dict[str, object]) -> str | None:
    """Why a cached environment cannot be trusted any more, or None when it is whole."""
    if not os.access(venv / "bin" / "python", os.X_OK):
        return "its python is gone"
    if marker.get("kind") != "stack" and not (_site_packages(venv) / IMAGE_PTH).is_file():
        return f"{IMAGE_PTH} is gone"
    files = marker.get("files")
    if not isinstance(files, list) or not files:
        return "its marker lists no files"
    missing = [f for f in files if not (venv / str(f)).exists()]
    if missing:
        return f"{len(missing)} installed file(s) are gone, e.g. {missing[0]}"
    return None


def prepare_env(sdists: Sequence[Path], cache_dir: Path, python: str | None = None, *,
                base: Base | None = None) -> TrainerEnv:
    """The environment for these sdists, built once and reused (a lock keeps runs from racing), layered over
    this machine's packages or, with `base`, over the image's stack (:func:`vtrain.local.stacks.prepare_stack`).

    A reused environment is verified first; a damaged one is rebuilt, with a notice.
    """
    if base is not None:
        python, site_dirs = base.python, list(base.site_dirs)
    else:
        python, site_dirs = python or sys.executable, host_site_dirs()
    key = env_key(sdists, python, site_dirs, base.key if base is not None else "")
    cache_dir_ready(cache_dir, "envs")
    envs = cache_folder("envs", cache_dir)
    venv = envs / key
    start = time.perf_counter()
    rebuilt: list[str] = []
    with locked(envs / f"{key}.lock", fcntl.LOCK_EX):
        marker = read_marker(venv)
        if marker is None:
            why = "its ready marker is damaged or from another vtrain" if (venv / READY).exists() else None
        else:
            why = damage(venv, marker)
        cached = marker is not None and why is None
        use = envs / f"{key}.use"
        lease = locked(use, fcntl.LOCK_SH) if cached else exclusive_use(use, venv)
        try:
            if cached:
                assert marker is not None
                notices = [str(n) for n in marker.get("notices", []) or []]
            else:
                if why is not None:
                    rebuilt.append(f"the cached environment {venv} was not usable ({why}): rebuilt it")
                notices = _build(venv, sdists, python, site_dirs, base.who if base is not None else "this machine")
                write_marker(venv, {"format": ENV_FORMAT, "sdists": [str(p) for p in sdists],
                                     "notices": notices, "files": installed_files(venv)})
                fcntl.flock(lease, fcntl.LOCK_SH)  # built: from now on, only a use like any other
            os.utime(lease.fileno())  # when it was last used, for `vtrain cache info`
        except BaseException:
            lease.close()
            raise
    return TrainerEnv(venv=venv, python=str(venv / "bin" / "python"), sdists=tuple(sdists), cached=cached,
                      seconds=time.perf_counter() - start, notices=tuple(rebuilt + notices),
                      lease=Lease(lease, base.lease if base is not None else None),
                      tensorflow=base.tensorflow if base is not None else None)


def exclusive_use(path: Path, venv: Path) -> IO[str]:
    """The use lock alone, to (re)build an environment: refused while a running job uses it."""
    try:
        return locked(path, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise PackagingError(f"the cached environment {venv} must be rebuilt, but a running job uses it; "
                             "run again when it ends") from None


__all__ = [
    "Base",
    "Lease",
    "TrainerEnv",
    "cache_dir_ready",
    "damage",
    "exclusive_use",
    "installed_files",
    "write_marker",
    "site_packages",
    "locked",
    "read_marker",
    "remove",
    "check_requirements",
    "default_cache_dir",
    "env_key",
    "package_digest",
    "host_site_dirs",
    "prepare_env",
]
