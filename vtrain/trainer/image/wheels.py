"""The requirements layer: wheels for the image's Python and platform, installed into one directory.

pip resolves and installs them for the image, not for this machine: ``pip install --target DIR
--python-version X.Y --implementation cp --platform manylinux2014_x86_64 --only-binary=:all:``.
Only wheels: nothing is built here (a build would run for this machine's Python and libc, not the
image's), so a requirement that has only an sdist fails with one line naming it. pip's own
``--target`` layout is site-packages-ready; the directory goes on ``PYTHONPATH`` in the image
(:data:`vtrain.trainer.image.layers.DEPS_DIR`), ahead of what the base image has installed.

Scripts in ``bin/`` get ``#!/usr/bin/env python3`` instead of this machine's interpreter, and no
bytecode is compiled (it would embed this machine's paths and times), so the layer is reproducible.

The built layer is cached, keyed by the requirement list, the Python version, the platforms and
the index options (:func:`cache_key`): unchanged requirements reuse one layer, with neither pip
nor a download. An unpinned requirement (``numpy>=1``) stays as first resolved until ``refresh``.

The directory comes before the base's site-packages on ``PYTHONPATH``: what the job lists wins
over what the base has. With ``dependencies`` (the default) pip resolves the requirements'
dependencies as well, without knowing what the base has installed (vtrain reads no base layer),
so a dependency the base already has (numpy under TensorFlow) is installed again and shadows it;
``dependencies=False`` installs exactly the list.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from vtrain.errors import PackagingError
from vtrain.trainer.image.layers import DEPS_DIR, Layer, tree_entries, write_layer
from vtrain.userpaths import describe_oserror

DEFAULT_PLATFORMS = ("manylinux2014_x86_64",)
_NO_MATCH = re.compile(r"No matching distribution found for ([^\s]+)")
_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement ([^\s]+)")
_UNREACHABLE = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
                "Max retries exceeded", "ProxyError")


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where built requirement layers are kept: $XDG_CACHE_HOME/vtrain/image-layers (~/.cache/…)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vtrain" / "image-layers"


def normalized(requirements: Sequence[str]) -> list[str]:
    """The requirement list as it keys the cache and the tag: stripped, blank lines dropped, sorted."""
    return sorted({" ".join(r.split()) for r in requirements if r.strip()})


def cache_key(requirements: Sequence[str], python_version: str, platforms: Sequence[str] = DEFAULT_PLATFORMS,
              index_args: Sequence[str] = (), dependencies: bool = True) -> str:
    text = json.dumps({"requirements": normalized(requirements), "python": python_version,
                       "platforms": list(platforms), "index": list(index_args), "implementation": "cp",
                       "dependencies": dependencies}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _pip_command(requirements: list[str], target: Path, python_version: str, platforms: Sequence[str],
                 index_args: Sequence[str], dependencies: bool = True) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
           "--no-compile", "--no-warn-script-location", "--target", str(target), "--only-binary=:all:",
           "--implementation", "cp", "--python-version", python_version]
    for platform in platforms:
        cmd += ["--platform", platform]
    if not dependencies:
        cmd.append("--no-deps")
    return [*cmd, *index_args, *requirements]


def pip_failure(output: str, python_version: str, platforms: Sequence[str]) -> str:
    """pip's failure as one line: the requirement without a wheel, or the index that was unreachable."""
    where = f"Python {python_version} on {', '.join(platforms)}"
    if any(sign in output for sign in _UNREACHABLE):
        return ("cannot reach the package index to fetch the image's requirements; check the network, "
                "any proxy (HTTPS_PROXY) and pip's index settings (PIP_INDEX_URL)")
    found = _NO_MATCH.search(output) or _NO_VERSION.search(output)
    if found:
        name = found.group(1)
        return (f"requirement {name!r} has no wheel for {where} (only an sdist, or no such version): an image's "
                "requirements must be wheels, vtrain builds nothing for the image; pick a version that has wheels "
                "or drop it")
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if line.startswith("ERROR")), lines[-1] if lines else "")
    return f"resolving the image's requirements for {where} failed: {last or 'pip exited with an error'}"


def _fix_scripts(target: Path) -> None:
    """Console scripts name this machine's interpreter; in the image, python3 on the PATH runs them."""
    bindir = target / "bin"
    if not bindir.is_dir():
        return
    for script in sorted(bindir.iterdir()):
        if script.is_file():
            data = script.read_bytes()
            if data.startswith(b"#!"):
                rest = data.split(b"\n", 1)[1] if b"\n" in data else b""
                script.write_bytes(b"#!/usr/bin/env python3\n" + rest)


def requirements_layer(requirements: Sequence[str], python_version: str, *,
                       platforms: Sequence[str] = DEFAULT_PLATFORMS, index_args: Sequence[str] = (),
                       cache: Path | None = None, refresh: bool = False, dependencies: bool = True) -> Layer | None:
    """The layer of `requirements` installed for the image (None when there are none); cached.
    ``dependencies=False`` installs exactly the list (pip --no-deps): on a base that already has
    TensorFlow and numpy, a dependency resolved again here would shadow the base's own copy."""
    reqs = normalized(requirements)
    if not reqs:
        return None
    if not re.fullmatch(r"3\.[0-9]+", python_version):
        raise PackagingError(f"the image's Python version must be MAJOR.MINOR such as 3.10, got {python_version!r}")
    cache = cache_dir() if cache is None else cache
    key = cache_key(reqs, python_version, platforms, index_args, dependencies)
    blob, meta = cache / f"requirements-{key}.tar.gz", cache / f"requirements-{key}.json"
    if not refresh and blob.is_file() and meta.is_file():
        try:
            known = json.loads(meta.read_text())
            if blob.stat().st_size == known["size"]:
                return Layer(path=blob, digest=known["digest"], diff_id=known["diff_id"], size=known["size"],
                             role="requirements")
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache entry is rebuilt
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PackagingError(f"cannot create the layer cache {cache}: {describe_oserror(err)}") from None
    with tempfile.TemporaryDirectory(prefix="vtrain-wheels-", dir=cache) as tmp:
        target = Path(tmp) / "target"
        done = subprocess.run(_pip_command(reqs, target, python_version, platforms, index_args, dependencies),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
        if done.returncode != 0:
            raise PackagingError(pip_failure(done.stdout, python_version, platforms))
        _fix_scripts(target)
        layer = write_layer(tree_entries(target, DEPS_DIR), Path(tmp) / "layer.tar.gz", role="requirements")
        os.replace(layer.path, blob)
    meta.write_text(json.dumps({"digest": layer.digest, "diff_id": layer.diff_id, "size": layer.size,
                                "requirements": reqs, "python": python_version}, sort_keys=True))
    return Layer(path=blob, digest=layer.digest, diff_id=layer.diff_id, size=layer.size, role="requirements")
