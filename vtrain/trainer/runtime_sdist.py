"""vtrain's runtime sdist: what of vtrain ships to Vertex AI replicas, the second ``packageUris`` entry.

The prebuilt TensorFlow images do not have ``vtrain.runtime``, so :func:`build_runtime_sdist` packages it (the
runtime with the few modules it imports, nothing else of vtrain), pinned to vtrain's version and without
dependencies (TensorFlow is already in the image). vtrain writes that sdist itself, no build backend run: its
files are vtrain's own and fixed, so the archive is the same bytes for the same sources (every member stamped
``_RUNTIME_MTIME``), written in milliseconds, with no setuptools needed where vtrain runs. Its name is the hash
of what it holds (:func:`runtime_name`), so `render` plans it without writing anything. A trainer image ships
the same files (:func:`runtime_entries`, :mod:`vtrain.trainer.image.layers`).
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

from vtrain.constants import VERSION
from vtrain.trainer.select import hash_entries
from vtrain.trainer.staging import parse_staging

_RUNTIME_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "vtrain"
version = "{version}"
description = "vtrain runtime for Vertex AI replicas (no dependencies: the image has TensorFlow)."
requires-python = ">=3.10"
dependencies = []

[tool.setuptools.packages.find]
include = ["vtrain*"]

[tool.setuptools.package-data]
vtrain = ["py.typed"]
"""


#: What replicas import of vtrain, and so all that ships to them: editing the CLI, the rules or the
#: emulator leaves the runtime sdist's hash (and every job's config hash) as it was.
RUNTIME_FILES = ("errors.py", "foreign/__init__.py", "constants.py", "strategies.py", "py.typed")  # not foreign/data
RUNTIME_PACKAGES = ("runtime", "diloco", "horovod")
_RUNTIME_INIT = '''"""vtrain's runtime as shipped to Vertex AI replicas: `from vtrain import runtime`."""

__version__ = "{version}"
'''


def runtime_entries() -> list[tuple[str, Path | bytes]]:
    """What ships of vtrain, sorted: (path in the sdist, file or content); the sdist and the image alike."""
    pkg = Path(__file__).resolve().parents[1]  # vtrain/, which runtime/, diloco/ and horovod/ are in
    out: list[tuple[str, Path | bytes]] = [
        ("pyproject.toml", _RUNTIME_PYPROJECT.format(version=VERSION).encode()),
        ("vtrain/__init__.py", _RUNTIME_INIT.format(version=VERSION).encode()),
    ]
    out += [(f"vtrain/{name}", pkg / name) for name in RUNTIME_FILES if (pkg / name).is_file()]
    for sub in RUNTIME_PACKAGES:
        for dirpath, dirnames, filenames in os.walk(pkg / sub):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for f in filenames:
                if f.endswith(".py"):
                    path = Path(dirpath) / f
                    out.append((f"vtrain/{path.relative_to(pkg).as_posix()}", path))
    return sorted(out, key=lambda e: e[0])


def runtime_name(entries: list[tuple[str, Path | bytes]]) -> str:
    """The runtime sdist's file name: vtrain's version and the hash of what it holds."""
    return f"vtrain-{VERSION}-{hash_entries(entries)}.tar.gz"


def planned_runtime_uri(staging: str) -> str:
    """The URI of vtrain's runtime sdist once staged (this vtrain's version and sources)."""
    return parse_staging(staging).uri_for(runtime_name(runtime_entries()))


_RUNTIME_PKG_INFO = """\
Metadata-Version: 2.1
Name: vtrain
Version: {version}
Summary: vtrain runtime for Vertex AI replicas (no dependencies: the image has TensorFlow).
Requires-Python: >=3.10
"""
#: The mtime of every member of the runtime sdist (2020-01-01 UTC): the same sources give the same bytes, and
#: the wheel pip builds from it is a ZIP, which cannot hold dates before 1980.
_RUNTIME_MTIME = 1_577_836_800


def build_runtime_sdist(out_dir: Path) -> Path:
    """Package this vtrain (sources only, no dependencies) for the replicas to install."""
    entries = runtime_entries()
    return write_runtime(entries, runtime_name(entries), Path(out_dir))


def write_runtime(entries: list[tuple[str, Path | bytes]], name: str, out_dir: Path) -> Path:
    """The sdist of `entries` (a PEP 517 source tree: pyproject.toml, the package) as a backend would write it:
    one ``vtrain-VERSION/`` folder with PKG-INFO first; written under a temporary name, then renamed."""
    import gzip
    import io

    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / name
    partial = out_dir / f".{name}.{os.getpid()}.partial"
    members = [("PKG-INFO", _RUNTIME_PKG_INFO.format(version=VERSION).encode()), *entries]
    try:
        with open(partial, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel, value in members:
                data = value if isinstance(value, bytes) else value.read_bytes()
                info = tarfile.TarInfo(f"vtrain-{VERSION}/{rel}")
                info.size, info.mode, info.mtime = len(data), 0o644, _RUNTIME_MTIME
                tar.addfile(info, io.BytesIO(data))
        os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)
    return final


__all__ = [
    "RUNTIME_FILES",
    "RUNTIME_PACKAGES",
    "build_runtime_sdist",
    "planned_runtime_uri",
    "runtime_entries",
    "runtime_name",
    "write_runtime",
]
