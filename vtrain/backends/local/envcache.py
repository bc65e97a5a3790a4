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
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from vtrain.errors import PackagingError

ENV_FORMAT = "1"  # bump when the layout of a cached environment changes
READY = ".vtrain-ready.json"
_PIP = ("-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--no-warn-script-location")


@dataclass(frozen=True)
class TrainerEnv:
    """A ready environment: run ``python``; ``cached`` says whether this run built it."""

    venv: Path
    python: str
    sdists: tuple[Path, ...]
    cached: bool
    seconds: float
    notices: tuple[str, ...] = field(default=())


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """VTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/vtrain, else ~/.cache/vtrain."""
    env = os.environ if env is None else env
    if env.get("VTRAIN_CACHE_DIR"):
        return Path(env["VTRAIN_CACHE_DIR"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vtrain"


def host_site_dirs() -> list[str]:
    """The site directories of the interpreter running vtrain: the local stand-in for the image."""
    dirs = list(site.getsitepackages())
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user and os.path.isdir(user):
        dirs.append(user)
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def env_key(sdists: Sequence[Path], python: str, site_dirs: Sequence[str]) -> str:
    """Content hash of what the environment holds and of the interpreter it layers over."""
    contents = sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in sdists)
    data = {"format": ENV_FORMAT, "sdists": contents,
            "python": os.path.realpath(python), "version": sys.version, "site": list(site_dirs)}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:20]


# --------------------------------------------------------------------------- requirements (pure)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check_requirements(requires: Iterable[str], installed: Mapping[str, str]) -> tuple[list[str], list[str]]:
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
            notices.append(f"the trainer requires {req}; this machine has {req.name} {have}, kept "
                           "(local runs use this interpreter's packages as the image; check the "
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
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def _requires(child_site: Path) -> list[str]:
    """What the packages just installed (with --no-deps, alone in the venv) declare they need."""
    reqs: list[str] = []
    for dist in metadata.distributions(path=[str(child_site)]):
        reqs.extend(dist.requires or [])
    return reqs


def _build(venv: Path, sdists: Sequence[Path], python: str, site_dirs: Sequence[str]) -> list[str]:
    if venv.exists():
        shutil.rmtree(venv)  # a half-built environment from an interrupted run
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    child_site = _site_packages(venv)
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in site_dirs)
    (child_site / "_vtrain_image.pth").write_text(lines, encoding="utf-8")
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
    missing, notices = check_requirements(requires, host)
    if missing:
        constraints = venv / "host-constraints.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(installed_versions(site_dirs).items())),
                               encoding="utf-8")
        _run([child, *_PIP, "-c", str(constraints), *missing],
             f"installing the trainer's dependencies ({', '.join(missing)})")
        notices.append(f"installed the trainer's dependencies into the run environment: {', '.join(missing)}")
    return notices


def prepare_env(sdists: Sequence[Path], cache_dir: Path, python: str | None = None) -> TrainerEnv:
    """The environment for these sdists, built once and reused (a lock keeps runs from racing)."""
    python = python or sys.executable
    site_dirs = host_site_dirs()
    key = env_key(sdists, python, site_dirs)
    envs = cache_dir / "envs"
    envs.mkdir(parents=True, exist_ok=True)
    venv = envs / key
    start = time.perf_counter()
    with open(envs / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = venv / READY
        cached = ready.is_file()
        if cached:
            notices = json.loads(ready.read_text(encoding="utf-8")).get("notices", [])
        else:
            notices = _build(venv, sdists, python, site_dirs)
            ready.write_text(json.dumps({"sdists": [str(p) for p in sdists], "notices": notices}, indent=2),
                             encoding="utf-8")
    return TrainerEnv(venv=venv, python=str(venv / "bin" / "python"), sdists=tuple(sdists), cached=cached,
                      seconds=time.perf_counter() - start, notices=tuple(notices))


def fetch_packages(uris: Sequence[str], cache_dir: Path) -> list[Path]:
    """Local paths for a job's prebuilt ``package_uris``: file:// and paths as they are, gs:// fetched."""
    from vtrain.staging import uri_to_path

    out: list[Path] = []
    for uri in uris:
        if uri.startswith("gs://"):
            out.append(_download(uri, cache_dir / "downloads"))
            continue
        path = uri_to_path(uri) or Path(uri).expanduser()
        if not path.is_file():
            raise PackagingError(f"trainer package {uri} not found")
        out.append(path)
    return out


def _download(uri: str, directory: Path) -> Path:
    from google.api_core import exceptions as gexc

    from vtrain.staging import default_client

    bucket, _, name = uri[len("gs://"):].partition("/")
    dest = directory / hashlib.sha256(uri.encode()).hexdigest()[:16] / Path(name).name
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        default_client().bucket(bucket).blob(name).download_to_filename(str(dest))
    except gexc.GoogleAPICallError as err:
        raise PackagingError(f"cannot download {uri}: {err.message}") from err
    return dest


__all__ = [
    "TrainerEnv",
    "check_requirements",
    "default_cache_dir",
    "env_key",
    "fetch_packages",
    "host_site_dirs",
    "prepare_env",
]
