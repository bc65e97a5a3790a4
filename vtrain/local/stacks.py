"""The image's stack: a prebuilt image's TensorFlow and Python, on this machine, for `vtrain local`.

On Vertex a Python package job runs in ``us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310``:
TensorFlow 2.17 on Python 3.10. A rehearsal on this machine's TensorFlow (2.21 here) and Python (3.11)
says yes where Vertex says no (a trainer on 3.11-only syntax, a newer TensorFlow API) and no where it
says yes (an Estimator trainer: TensorFlow removed Estimator in 2.16). So each replica of a prebuilt-image
job runs, by default, on a venv holding that image's stack (:data:`STACKS`), built once per stack and
shared by every trainer on that image; the trainer's own environment is layered over it
(:class:`vtrain.local.envcache.Base`), as the image's pip installs the trainer over its packages.

What a stack holds, and where each pin comes from:

- the Python minor of the image's name (``py310``: Google's supported-frameworks page lists each
  training image as "2.17 (Python 3.10)",
  https://cloud.google.com/vertex-ai/docs/supported-frameworks-list#custom_training);
- TensorFlow at the newest patch of the image's minor (PyPI's release history): Google republishes an
  image for each patch of its framework (https://cloud.google.com/deep-learning-containers/docs/framework-support-policy,
  "Patch updates for supported frameworks");
- keras, numpy and protobuf as pip resolved TensorFlow's own requirements (its wheel's metadata) the day
  after that patch was released (``resolved``: ``uv pip compile --exclude-newer DATE --python-version 3.10``).
  Google's page lists no further package versions for the training images, so the stack holds no
  others: a trainer declares what else it imports, as on Vertex.

The CPU build (``tensorflow-cpu``) unless the image is a GPU image and this machine has a GPU.

The Python: one of the image's minor found here (``pythonX.Y`` on PATH, pyenv's versions, uv's managed
Pythons), else one uv can install; else this machine's, with a notice naming the difference. The stack
is installed by uv when it is here (from its cache when it holds the wheels), else by pip; its first build
says what it downloads and how big. It lives in the environment cache as ``envs/stack-KEY`` beside the
trainer environments, with the same lock, lease and ready marker (``vtrain cache info`` lists it, ``cache
clear`` leaves it while a run uses it). Offline with nothing cached, its build is one line that names it.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from vtrain.errors import PackagingError
from vtrain.local.envcache import (
    READY,
    Base,
    Lease,
    cache_dir_ready,
    damage,
    exclusive_use,
    installed_files,
    locked,
    read_marker,
    remove,
    site_packages,
    write_marker,
)
from vtrain.userpaths import cache_folder

STACK_FORMAT = "1"  # bump when what a stack holds or how it is laid out changes


@dataclass(frozen=True)
class StackRow:
    """One prebuilt TensorFlow image minor: its TensorFlow patch, and its other pins (see the module)."""

    tensorflow: str
    pins: tuple[str, ...]
    resolved: str  # the day pip's resolution of TensorFlow's requirements was taken as of


#: Per image version (catalog.PREBUILT_TF's keys): TensorFlow's newest patch and what it resolved to then.
STACKS: dict[str, StackRow] = {
    "2-12": StackRow("2.12.1", ("keras==2.12.0", "numpy==1.24.3", "protobuf==4.23.4"), "2023-07-06"),
    "2-13": StackRow("2.13.1", ("keras==2.13.1", "numpy==1.24.3", "protobuf==4.24.3"), "2023-09-27"),
    "2-14": StackRow("2.14.1", ("keras==2.14.0", "numpy==1.26.2", "protobuf==4.25.1"), "2023-11-15"),
    "2-15": StackRow("2.15.1", ("keras==2.15.0", "numpy==1.26.4", "protobuf==4.25.3"), "2024-03-09"),
    "2-16": StackRow("2.16.2", ("keras==3.4.1", "numpy==1.26.4", "protobuf==4.25.3"), "2024-06-29"),
    "2-17": StackRow("2.17.1", ("keras==3.6.0", "numpy==1.26.4", "protobuf==4.25.5"), "2024-10-25"),
}

_IMAGE = re.compile(r"/tf-(?P<family>cpu|gpu|tpu)\.(?P<version>2-\d+)(?:\.(?:py|cp)(?P<py>3\d+))?[:@]")


@dataclass(frozen=True)
class Stack:
    """The stack one image runs on here: what is installed, on which Python minor."""

    image: str  # the executorImageUri
    version: str  # "2-17"
    python: str  # "3.10": the image's
    gpu: bool  # the GPU build (a GPU image on a machine with a GPU)
    row: StackRow

    @property
    def requirements(self) -> list[str]:
        name = "tensorflow" if self.gpu else "tensorflow-cpu"
        return [f"{name}=={self.row.tensorflow}", *self.row.pins]

    @property
    def label(self) -> str:
        """`tf-cpu.2-17 (TensorFlow 2.17.1, Python 3.10)`."""
        found = _IMAGE.search(self.image + ":")
        name = f"tf-{found['family']}.{found['version']}" if found else self.image
        return f"{name} (TensorFlow {self.row.tensorflow}, Python {self.python})"


def stack_for(image: str, *, gpu: bool = False) -> Stack | None:
    """The stack of a prebuilt TensorFlow training image (alias-expanded URI, tag or digest); None for any
    other image, or a version vtrain has no row for."""
    found = _IMAGE.search(image.strip() + ":")
    if found is None or found["version"] not in STACKS:
        return None
    from vtrain.catalog.images import training_image

    py, row = found["py"], training_image(found["family"], found["version"])
    python = f"3.{py[1:]}" if py else row.python if row is not None else None  # the catalog's image row
    if python is None:
        return None
    return Stack(image=image, version=found["version"], python=python, gpu=gpu and found["family"] == "gpu",
                 row=STACKS[found["version"]])


# --------------------------------------------------------------------------- a Python of the image's minor


def _version_of(python: str) -> str | None:
    try:
        done = subprocess.run([python, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def find_python(minor: str, env: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """An interpreter of `minor` (3.10) on this machine, and where it was found; (None, where it was looked
    for). Looks at ``pythonX.Y`` on PATH, pyenv's versions, then uv's managed Pythons; downloads nothing."""
    env = os.environ if env is None else env
    if f"{sys.version_info.major}.{sys.version_info.minor}" == minor:
        return sys.executable, "this machine's Python"
    candidates: list[tuple[str, str]] = []
    on_path = shutil.which(f"python{minor}", path=env.get("PATH"))
    if on_path:
        candidates.append((on_path, "PATH"))
    pyenv_root = env.get("PYENV_ROOT") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".pyenv")
    for found in sorted(glob.glob(os.path.join(pyenv_root, "versions", f"{minor}.*", "bin", f"python{minor}")),
                        key=_numeric, reverse=True):
        candidates.append((found, "pyenv"))
    uv = uv_binary()
    if uv is not None:
        try:
            done = subprocess.run([uv, "python", "find", "--no-python-downloads", minor], capture_output=True,
                                  text=True, timeout=30, check=False, env={**env, "UV_PYTHON_DOWNLOADS": "never"})
            if done.returncode == 0 and done.stdout.strip():
                candidates.append((done.stdout.strip(), "uv"))
        except (OSError, subprocess.SubprocessError):
            pass
    for path, where in candidates:
        if _version_of(path) == minor:  # a pyenv shim answers for a version it does not select: ask the binary
            return path, where
    return None, f"python{minor} on PATH, pyenv ({pyenv_root}/versions), uv's managed Pythons"


def _numeric(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path))


def install_python(minor: str, env: Mapping[str, str]) -> tuple[str | None, str]:
    """Python `minor` installed by uv (its managed Pythons, downloaded from their release page); (None, why not)."""
    uv = uv_binary()
    if uv is None:
        return None, "uv is not installed"
    try:
        done = subprocess.run([uv, "python", "install", minor], capture_output=True, text=True, timeout=300,
                              check=False, env=dict(env))
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"uv python install {minor}: {err}"
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        return None, f"uv python install {minor}: {lines[-1][:200] if lines else f'exit {done.returncode}'}"
    return find_python(minor, env)


def uv_binary() -> str | None:
    """uv beside this interpreter (a venv that has it), else on PATH; None when there is none."""
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("uv")


# --------------------------------------------------------------------------- building (I/O)


def stack_key(stack: Stack, python: str, version: str) -> str:
    data = {"format": STACK_FORMAT, "requirements": stack.requirements, "python": os.path.realpath(python),
            "version": version}
    return "stack-" + hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StackChoice:
    """Which interpreter the stack is built on, and the notice when it is not the image's minor."""

    python: str
    version: str
    notice: str | None


def choose_python(stack: Stack, cache_dir: Path, env: Mapping[str, str]) -> StackChoice:
    """The image's minor where one is here or uv can install it; else this machine's, with the notice that
    says so. A stack already built on this machine's Python is reused without asking uv again (each ask
    that cannot reach the network costs ~10 s)."""
    path, where = find_python(stack.python, env)
    if path is not None:
        return StackChoice(path, stack.python, None)
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    fallback_key = stack_key(stack, sys.executable, host)
    if not (cache_folder("envs", cache_dir) / fallback_key / READY).is_file():
        path, why = install_python(stack.python, env)
        if path is not None:
            return StackChoice(path, stack.python, None)
        where = f"{where}; {why}"
    return StackChoice(sys.executable, host, (
        f"the image's Python is {stack.python}; none is on this machine ({where}): its stack runs on this "
        f"machine's Python {host}, so a trainer using what {host} has and {stack.python} lacks passes here and "
        f"fails on Vertex (`vtrain validate` checks the grammar and the standard library)"))


@dataclass(frozen=True)
class StackEnv:
    """A built stack: its venv and the Base a trainer environment layers over."""

    stack: Stack
    venv: Path
    python: str  # the interpreter the venv was made from (the trainer environment is made from it too)
    version: str  # its MAJOR.MINOR
    cached: bool
    seconds: float
    downloaded_mb: float
    notices: tuple[str, ...]


def prepare_stack(stack: Stack, cache_dir: Path, notice: Callable[[str], None] = lambda text: None,
                  env: Mapping[str, str] | None = None) -> tuple[StackEnv, Lease]:
    """The stack's venv, built once and shared (CACHE/envs/stack-KEY, its lock, lease and marker as a trainer
    environment's). Returns it and the shared lease the caller releases when its run ends."""
    env = os.environ if env is None else env
    choice = choose_python(stack, cache_dir, env)
    key = stack_key(stack, choice.python, choice.version)
    cache_dir_ready(cache_dir, "envs")
    envs = cache_folder("envs", cache_dir)
    venv = envs / key
    start = time.perf_counter()
    notices = [choice.notice] if choice.notice else []
    with locked(envs / f"{key}.lock", fcntl.LOCK_EX):
        marker = read_marker(venv)
        whole = marker is not None and marker.get("kind") == "stack" and _whole(venv, marker)
        use = envs / f"{key}.use"
        lease = locked(use, fcntl.LOCK_SH) if whole else exclusive_use(use, venv)
        try:
            downloaded = 0.0
            if not whole:
                if venv.exists():
                    notices.append(f"the cached stack {venv} was not usable: rebuilt it")
                notice(f"building the image's stack once for {stack.label}: {', '.join(stack.requirements)} and "
                       "what they require (a few hundred MB of wheels unless uv's or pip's cache has them; ~1 GB "
                       f"installed), kept in {venv} for every trainer on this image")
                downloaded = _build(venv, stack, choice.python)
                write_marker(venv, {"format": "1", "kind": "stack", "image": stack.image,
                                     "sdists": [], "requirements": stack.requirements,
                                     "python": choice.python, "version": choice.version,
                                     "notices": [n for n in notices if n], "files": installed_files(venv)})
                size = _du(venv)
                notice(f"the image's stack {stack.label} is built in {time.perf_counter() - start:.0f} s: "
                       f"{downloaded:,.0f} MB downloaded, {size / 1e6:,.0f} MB on disk")
                fcntl.flock(lease, fcntl.LOCK_SH)
            else:
                assert marker is not None
                notices = [str(n) for n in marker.get("notices", []) or []]
            os.utime(lease.fileno())
        except BaseException:
            lease.close()
            raise
    built = StackEnv(stack, venv, choice.python, choice.version, whole, time.perf_counter() - start, downloaded,
                     tuple(notices))
    return built, Lease(lease)


def _whole(venv: Path, marker: Mapping[str, object]) -> bool:
    return damage(venv, dict(marker)) is None


def _du(path: Path) -> int:
    total = 0
    seen: set[tuple[int, int]] = set()
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


_DOWNLOAD = re.compile(r"Downloading\s+\S+\s+\((?P<size>[\d.]+)\s*(?P<unit>[KMG]i?B)\)")
_UNITS = {"KB": 1e-3, "KiB": 1.024e-3, "MB": 1.0, "MiB": 1.048576, "GB": 1e3, "GiB": 1073.741824}


def downloaded_mb(output: str) -> float:
    """The MB the installer said it downloaded (uv: `Downloading tensorflow-cpu (211.0MiB)`, pip: `Downloading
    tensorflow_cpu-....whl (211.0 MB)`)."""
    return sum(float(m["size"]) * _UNITS[m["unit"]] for m in _DOWNLOAD.finditer(output))


def _build(venv: Path, stack: Stack, python: str) -> float:
    """A venv of `python` with pip and the stack's requirements; the MB downloaded. One line when it fails."""
    remove(venv)
    uv = uv_binary()
    if uv is not None:
        steps = [[uv, "venv", "--quiet", "--seed", "--python", python, str(venv)],
                 [uv, "pip", "install", "--python", str(venv / "bin" / "python"), *stack.requirements]]
    else:
        steps = [[python, "-m", "venv", str(venv)],
                 [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                  "--progress-bar", "off", *stack.requirements]]
    said = ""
    for argv in steps:
        try:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600,
                                  check=False, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
        except (OSError, subprocess.SubprocessError) as err:
            remove(venv)
            raise PackagingError(f"cannot build the image's stack {stack.label}: {err}") from None
        said += done.stdout
        if done.returncode != 0:
            remove(venv)
            lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
            offline = any(w in done.stdout for w in ("network was disabled", "not found in the cache", "resolve",
                                                       "connect", "Network is unreachable", "NewConnectionError"))
            hint = ("; connect to PyPI once (it is kept for every later run), or run with --runtime host"
                    if offline else "; --runtime host runs on this machine's TensorFlow instead")
            raise PackagingError(f"cannot build the image's stack {stack.label} ({', '.join(stack.requirements)}): "
                                 f"{lines[-1][:300] if lines else f'exit {done.returncode}'}{hint}")
    # The bytecode of what a replica imports, written once now (~20 CPU-s): each replica of the first run would
    # otherwise compile TensorFlow's ~3,100 modules again, side by side.
    warm = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with contextlib.suppress(OSError, subprocess.SubprocessError):  # a replica says what is wrong, itself
        subprocess.run([str(venv / "bin" / "python"), "-c", "import tensorflow as tf; tf.keras.layers.Dense"],
                       capture_output=True, timeout=600, check=False, env=warm)
    return downloaded_mb(said)


def stack_base(built: StackEnv, lease: Lease | None) -> Base:
    """The :class:`~vtrain.local.envcache.Base` a trainer environment layers over: the stack's interpreter and
    site-packages, named by the stack's key."""
    return Base(python=built.python, site_dirs=(str(site_packages(built.venv)),), key=built.venv.name,
                who=f"the image's stack {built.stack.label}", tensorflow=built.stack.row.tensorflow, lease=lease)


__all__ = ["STACKS", "Stack", "StackEnv", "StackRow", "downloaded_mb", "find_python", "prepare_stack", "stack_base",
           "stack_for", "uv_binary"]
