"""The requirements layer: wheels for the image's Python and platform, installed into a site dir.

What goes in: the job's ``build.requirements`` and the trainer's own declared dependencies
(:func:`vtrain.trainer.image.requirements.declared_requirements`), resolved together by pip for the
image, not for this machine: ``--python-version X.Y --implementation cp --only-binary=:all:`` and one
``--platform`` per tag the base's C library allows (:mod:`vtrain.trainer.image.libc`). Only wheels:
nothing is built here (a build would run for this machine's Python and libc), so a requirement with
no wheel for the target is one line naming it and the target's tags.

What the base already has is not installed again. For a prebuilt TensorFlow image that is
TensorFlow and everything it depends on (`provided`, e.g. ``tensorflow==2.17.*``): pip resolves the
requirements together with it (``--dry-run --report``, so the job's packages fit the base's
TensorFlow), the provided packages' dependency closure is read off the report (markers evaluated
for the image's Python and platform) and left out, and only the rest is installed, each pinned to
what the resolution chose (``--no-deps``). A package the job's ``build.requirements`` names itself
is installed even when the base has it: that is asking for it. Without `provided` (any other base)
pip installs the whole resolution.

Where: ``/opt/vtrain/deps/lib/pythonX.Y/site-packages``, the user site directory of
``PYTHONUSERBASE=/opt/vtrain/deps`` that the image sets (:mod:`vtrain.trainer.image.config`). Python's
``site`` module processes a site dir's ``.pth`` files (a plain ``PYTHONPATH`` entry gets none of
that: setuptools' ``distutils`` shim, namespace packages and editable hooks live in ``.pth`` files),
and puts it ahead of the base's own site-packages: what the job lists wins. Console scripts go to
``/opt/vtrain/deps/bin`` with ``#!/usr/bin/env python3``; no bytecode is compiled (it would embed
this machine's paths and times), so the layer is reproducible.

The built layer is cached under vtrain's cache (``VTRAIN_CACHE_DIR``, else ``~/.cache/vtrain``),
keyed by everything that decides it (:func:`cache_key`): unchanged requirements reuse one layer,
with neither pip nor a download. An unpinned requirement (``numpy>=1``) stays as first resolved
until ``refresh``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vtrain.errors import PackagingError
from vtrain.foreign import printable
from vtrain.trainer.image.layers import DEPS_DIR, Entry, Layer, tree_entries, write_layer
from vtrain.trainer.image.libc import describe_tags
from vtrain.trainer.image.settings import ImageSettings
from vtrain.userpaths import cache_dir as vtrain_cache_dir
from vtrain.userpaths import cache_folder, describe_oserror, read_bounded

_NO_MATCH = re.compile(r"No matching distribution found for ([^\s]+)")
_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement ([^\s]+)")
_UNREACHABLE = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
                "Max retries exceeded", "ProxyError")
#: The most of pip's --report read (a resolution of thousands of packages stays far below).
_MAX_REPORT = 64 << 20
_LAYER_FORMAT = 2  # 2: a site dir under lib/pythonX.Y/site-packages, scripts in bin/


def site_dir(python_version: str) -> str:
    """The requirements' site dir in the image (no leading /): the user site of PYTHONUSERBASE=/DEPS_DIR."""
    return f"{DEPS_DIR}/lib/python{python_version}/site-packages"


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where built requirement layers are kept: vtrain's cache (VTRAIN_CACHE_DIR, …)/image-layers."""
    return cache_folder("image-layers", vtrain_cache_dir(env))


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def normalized(requirements: Sequence[str]) -> list[str]:
    """The requirement list as it keys the cache and the tag: stripped, blank lines dropped, sorted."""
    return sorted({" ".join(r.split()) for r in requirements if r.strip()})


def cache_key(requirements: Sequence[str], python_version: str, platforms: Sequence[str] = (),
              index_args: Sequence[str] = (), dependencies: bool = True, *, declared: Sequence[str] = (),
              constraints: Sequence[str] = (), provided: Sequence[str] = ()) -> str:
    text = json.dumps({"requirements": normalized(requirements), "python": python_version,
                       "platforms": list(platforms), "index": list(index_args), "implementation": "cp",
                       "dependencies": dependencies, "declared": normalized(declared),
                       "constraints": normalized(constraints), "provided": normalized(provided),
                       "format": _LAYER_FORMAT}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _target_args(python_version: str, platforms: Sequence[str]) -> list[str]:
    """pip's options for the image's interpreter; none (this machine's) when no platform is given."""
    if not platforms:
        return ["--only-binary=:all:"]
    args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", python_version]
    for platform in platforms:
        args += ["--platform", platform]
    return args


def _pip(target: Path, python_version: str, platforms: Sequence[str], index_args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
            "--no-compile", "--no-warn-script-location", "--target", str(target),
            *_target_args(python_version, platforms), *index_args]


def describe_target(python_version: str, platforms: Sequence[str]) -> str:
    tag = f"cp{python_version.replace('.', '')}"
    return f"Python {python_version} ({tag}) on {describe_tags(list(platforms))}"


def pip_failure(output: str, python_version: str, platforms: Sequence[str],
                settings: ImageSettings | None = None) -> str:
    """pip's failure as one line: the requirement without a wheel, a conflict, or the index unreachable; what to
    change named where the image's builder takes it (`settings`: a job file's trainer.build by default)."""
    settings = settings or ImageSettings()
    where = describe_target(python_version, platforms)
    if any(sign in output for sign in _UNREACHABLE):
        return ("cannot reach the package index to fetch the image's requirements; check the network, "
                "any proxy (HTTPS_PROXY) and pip's index settings (PIP_INDEX_URL)")
    found = _NO_MATCH.search(output) or _NO_VERSION.search(output)
    if found and "ResolutionImpossible" not in output:
        name = printable(found.group(1))
        return (f"requirement {name!r} has no wheel for {where} (only an sdist, or no such version): an image's "
                "requirements must be wheels, vtrain builds nothing for the image; pick a version that has wheels, "
                f"drop it, or set {settings.platform} if the base runs newer wheels")
    if "ResolutionImpossible" in output or "conflict is caused by" in output:
        starts = ("The user requested", "The conflict", "tensorflow")
        lines = [line.strip() for line in output.splitlines() if line.strip().startswith(starts)]
        why = "; ".join(printable(line) for line in lines[:3]) or "pip found no versions that fit together"
        if settings.requirements is None:
            return f"the image's requirements conflict for {where}: {why}"
        return (f"the image's requirements conflict for {where}: {why}; on a prebuilt TensorFlow base they must "
                f"fit its TensorFlow (name tensorflow in {settings.requirements} to install another over it)")
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if line.startswith("ERROR")), lines[-1] if lines else "")
    return f"resolving the image's requirements for {where} failed: {printable(last) or 'pip exited with an error'}"


def _run(cmd: list[str], python_version: str, platforms: Sequence[str], settings: ImageSettings | None) -> None:
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if done.returncode != 0:
        raise PackagingError(pip_failure(done.stdout, python_version, platforms, settings))


def _marker_env(python_version: str, platforms: Sequence[str]) -> dict[str, str]:
    machine = "aarch64" if any(p.endswith("aarch64") for p in platforms) else "x86_64"
    if not platforms:
        import platform as host

        machine = host.machine()
    return {"python_version": python_version, "python_full_version": f"{python_version}.0",
            "implementation_name": "cpython", "implementation_version": f"{python_version}.0",
            "platform_python_implementation": "CPython", "os_name": "posix", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": machine, "platform_release": "", "platform_version": ""}


def provided_closure(provided: Iterable[str], report: dict[str, Any], env: dict[str, str]) -> set[str]:
    """Canonical names of the packages in pip's report that `provided` (and what they need) accounts for."""
    from packaging.requirements import InvalidRequirement, Requirement

    items: dict[str, dict[str, Any]] = {}
    for item in report.get("install") or []:
        meta = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            items[canonical(meta["name"])] = meta
    todo = [(canonical(Requirement(p).name), frozenset(Requirement(p).extras)) for p in provided]
    seen: set[tuple[str, frozenset[str]]] = set()
    closure: set[str] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen or name not in items:
            continue
        seen.add((name, extras))
        closure.add(name)
        for text in items[name].get("requires_dist") or []:
            try:
                req = Requirement(str(text))
            except InvalidRequirement:
                continue
            if req.marker is None or any(req.marker.evaluate({**env, "extra": extra}) for extra in ("", *extras)):
                todo.append((canonical(req.name), frozenset(req.extras)))
    return closure


def _pins(report: dict[str, Any], leave_out: set[str]) -> list[str]:
    pins = []
    for item in report.get("install") or []:
        meta = item.get("metadata") or {}
        name, version = str(meta.get("name", "")), str(meta.get("version", ""))
        if name and version and canonical(name) not in leave_out:
            pins.append(f"{name}=={version}")
    return sorted(pins)


def _layer_entries(target: Path, python_version: str) -> list[Entry]:
    """The site dir's files, scripts moved to DEPS_DIR/bin with a shebang that runs the image's python3."""
    entries: list[Entry] = []
    site = site_dir(python_version)
    for name, path, executable in tree_entries(target, site):
        assert isinstance(path, Path)
        if name.startswith(f"{site}/bin/"):
            data = path.read_bytes()
            if data.startswith(b"#!"):
                data = b"#!/usr/bin/env python3\n" + (data.split(b"\n", 1)[1] if b"\n" in data else b"")
            entries.append((f"{DEPS_DIR}/bin/{name[len(site) + 5:]}", data, True))
        else:
            entries.append((name, path, executable))
    return entries


def requirements_layer(requirements: Sequence[str], python_version: str, *,
                       platforms: Sequence[str] = (), index_args: Sequence[str] = (),
                       cache: Path | None = None, refresh: bool = False, dependencies: bool = True,
                       declared: Sequence[str] = (), constraints: Sequence[str] = (),
                       provided: Sequence[str] = (), settings: ImageSettings | None = None) -> Layer | None:
    """The layer of `requirements` and the trainer's `declared` dependencies, installed for the image
    (None when nothing is left to install); cached in `cache` (vtrain's cache, default its own)'s
    image-layers folder. `platforms`: the tags the base runs (none: this
    machine's); `provided`: what the base has (not installed unless `requirements` names it);
    ``dependencies=False`` installs exactly the lists (pip --no-deps). `settings`: where an error says to change
    something (a job file's trainer.build by default)."""
    from packaging.requirements import Requirement

    explicit = normalized(requirements)
    wanted = normalized([*explicit, *declared])
    if not wanted:
        return None
    if not re.fullmatch(r"3\.[0-9]+", python_version):
        raise PackagingError(f"the image's Python version must be MAJOR.MINOR such as 3.10, got {python_version!r}")
    asked = {canonical(Requirement(r).name) for r in explicit}
    roots = [p for p in normalized(provided) if canonical(Requirement(p).name) not in asked]
    layers = cache_folder("image-layers", cache)
    key = cache_key(explicit, python_version, platforms, index_args, dependencies, declared=declared,
                    constraints=constraints, provided=roots)
    blob, meta = layers / f"requirements-{key}.tar.gz", layers / f"requirements-{key}.json"
    if not refresh and meta.is_file():
        try:
            known = json.loads(read_bounded(meta, 1 << 20))
            if known.get("empty"):
                return None
            if blob.stat().st_size == known["size"]:
                return Layer(path=blob, digest=known["digest"], diff_id=known["diff_id"], size=known["size"],
                             role="requirements")
        except (OSError, ValueError, KeyError, AttributeError):
            pass  # a damaged cache entry is rebuilt
    try:
        layers.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PackagingError(f"cannot create the layer cache {layers}: {describe_oserror(err)}") from None
    with tempfile.TemporaryDirectory(prefix="vtrain-wheels-", dir=layers) as tmp:
        work = Path(tmp)
        extra: list[str] = [] if dependencies else ["--no-deps"]
        if constraints:
            (work / "constraints.txt").write_text("".join(f"{c}\n" for c in constraints), encoding="utf-8")
            extra += ["-c", str(work / "constraints.txt")]
        target = work / "target"
        base = _pip(target, python_version, platforms, index_args)
        if roots:
            report_path = work / "report.json"
            _run([*base, "--dry-run", "--report", str(report_path), *extra, *wanted, *roots],
                 python_version, platforms, settings)
            try:
                report = json.loads(read_bounded(report_path, _MAX_REPORT))
            except (OSError, ValueError) as err:
                raise PackagingError(f"pip's resolution report for the image is unreadable: {err}") from None
            leave_out = provided_closure(roots, report, _marker_env(python_version, platforms)) - asked
            pins = _pins(report, leave_out)
            if not pins:
                meta.write_text(json.dumps({"empty": True, "requirements": wanted, "python": python_version}))
                return None
            _run([*base, "--no-deps", *pins], python_version, platforms, settings)
        else:
            _run([*base, *extra, *wanted], python_version, platforms, settings)
        layer = write_layer(_layer_entries(target, python_version), work / "layer.tar.gz", role="requirements")
        os.replace(layer.path, blob)
    meta.write_text(json.dumps({"digest": layer.digest, "diff_id": layer.diff_id, "size": layer.size,
                                "requirements": wanted, "python": python_version}, sort_keys=True))
    return Layer(path=blob, digest=layer.digest, diff_id=layer.diff_id, size=layer.size, role="requirements")
