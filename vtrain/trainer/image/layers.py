"""Reproducible image layers: the same files give the same bytes, so the same digest.

A layer is a gzip-compressed tar. Everything a tar or gzip header can carry besides the files'
names and contents is fixed: entries sorted by name, every parent directory written before its
children, mtime 0 (or ``SOURCE_DATE_EPOCH``), uid/gid 0 with empty user and group names, modes
normalised to 0755 (directories and files with any execute bit) or 0644, PAX format without time
records (Python writes none for integer mtimes), gzip with mtime 0, no file name and a fixed
compression level. The ``digest`` is the sha256 of the compressed blob (what a registry stores),
the ``diff_id`` the sha256 of the uncompressed tar (what the image config lists).

The gzip bytes depend on the zlib build as well, so two machines may produce different digests
for one tree; the diff_id and the image tag (:func:`vtrain.trainer.image.config.image_tag`, a hash
of the inputs) do not.

Where things go in the image (a plain directory per layer, each on ``PYTHONPATH``; see
:mod:`vtrain.trainer.image`): the trainer's selected files as they are at :data:`TRAINER_DIR`,
vtrain's runtime at :data:`RUNTIME_DIR`, the requirements' wheels installed at :data:`DEPS_DIR`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from vtrain.errors import PackagingError
from vtrain.trainer.packaging import refuse_credentials, scan_package
from vtrain.trainer.runtime_sdist import runtime_entries
from vtrain.trainer.select import VTRAIN_IGNORE, Scan, hash_entries, open_regular, readable_errors
from vtrain.userpaths import shown

TAR_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
COMPRESS_LEVEL = 6
TRAINER_DIR = "opt/vtrain/trainer"
RUNTIME_DIR = "opt/vtrain/runtime"
DEPS_DIR = "opt/vtrain/deps"

@dataclass(frozen=True)
class Pinned:
    """A trainer file as the plan read it (:attr:`vtrain.trainer.select.Scan.states`): the layer takes exactly
    `size` bytes of it and they must hash to `sha256`, or the build stops naming the file: the image is what
    its tag (the plan's hash) says, whatever happened to the folder meanwhile (a log appended to is read up to
    its planned size; a file rewritten is refused)."""

    path: Path
    size: int
    sha256: str
    rel: str  # its name in the trainer folder, for the message
    root: Path


#: One file of a layer: (path inside the image, no leading "/"; a file on disk or the bytes; executable).
Entry = tuple[str, "Path | bytes", bool]
#: What a layer is written from: an Entry, or a trainer file as the plan read it.
LayerEntry = tuple[str, "Path | bytes | Pinned", bool]


@dataclass(frozen=True)
class Layer:
    """A built layer blob on disk and what the manifest and config say of it."""

    path: Path  # the compressed blob
    digest: str  # sha256:… of the compressed bytes
    diff_id: str  # sha256:… of the uncompressed tar
    size: int  # compressed bytes
    role: str  # trainer | runtime | requirements
    media_type: str = TAR_GZIP

    def descriptor(self, media_type: str | None = None) -> dict[str, object]:
        return {"mediaType": media_type or self.media_type, "digest": self.digest, "size": self.size}


def source_date_epoch(env: dict[str, str] | None = None) -> int:
    """The mtime of every entry: SOURCE_DATE_EPOCH when set to a whole number, else 0."""
    text = (os.environ if env is None else env).get("SOURCE_DATE_EPOCH", "").strip()
    return int(text) if text.isdigit() else 0


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to `out` (None: nowhere)."""

    def __init__(self, out: io.BufferedIOBase | io.RawIOBase | gzip.GzipFile | None) -> None:
        super().__init__()
        self.out = out
        self.hash = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.hash.update(data)
        self.size += len(data)
        if self.out is not None:
            self.out.write(data)
        return len(data)


def _parents(name: str) -> list[str]:
    parts = name.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _info(name: str, *, is_dir: bool, size: int = 0, executable: bool = False, mtime: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.mode = 0o755 if is_dir or executable else 0o644
    info.size = size
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_layer(entries: Iterable[LayerEntry], out: Path, *, role: str, mtime: int | None = None) -> Layer:
    """Write `entries` as a reproducible tar+gzip at `out`; returns its digests. Names are POSIX
    paths relative to the image root; two entries with one name are a bug (ValueError)."""
    items = sorted(entries, key=lambda e: e[0])
    names = [name for name, _, _ in items]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate layer entries in {role} layer")
    mtime = source_date_epoch() if mtime is None else mtime
    dirs = sorted({d for name in names for d in _parents(name)} - set(names))
    ordered: list[tuple[str, Path | bytes | Pinned | None, bool]] = [(d, None, False) for d in dirs]
    ordered += items
    ordered.sort(key=lambda e: e[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as raw:
        compressed = _Hashing(raw)
        with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, compresslevel=COMPRESS_LEVEL, mtime=0) as gz:
            plain = _Hashing(gz)
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for name, value, executable in ordered:
                    if value is None:
                        tar.addfile(_info(name, is_dir=True, mtime=mtime))
                        continue
                    if isinstance(value, bytes):
                        info = _info(name, is_dir=False, size=len(value), executable=executable, mtime=mtime)
                        tar.addfile(info, io.BytesIO(value))
                        continue
                    if isinstance(value, Pinned):
                        _add_pinned(tar, _info(name, is_dir=False, size=value.size, executable=executable,
                                               mtime=mtime), value)
                        continue
                    with open(value, "rb") as fh:  # streamed: a wheel's 500 MB library is never held whole
                        size = os.fstat(fh.fileno()).st_size
                        tar.addfile(_info(name, is_dir=False, size=size, executable=executable, mtime=mtime), fh)
    return Layer(path=out, digest=f"sha256:{compressed.hash.hexdigest()}",
                 diff_id=f"sha256:{plain.hash.hexdigest()}", size=compressed.size, role=role)


class _Hashed:
    """A file read through, hashed as it passes (what tarfile copies into the layer)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.hash = raw, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.hash.update(data)
        return data


def _add_pinned(tar: tarfile.TarFile, info: tarfile.TarInfo, pinned: Pinned) -> None:
    """`pinned`'s planned bytes into the layer, or a PackagingError naming the file when they are not there."""
    try:
        with open_regular(pinned.path) as fh:
            hashed = _Hashed(fh)
            tar.addfile(info, hashed)  # exactly info.size bytes: OSError when the file is shorter now
    except OSError:
        raise changed(pinned) from None
    if hashed.hash.hexdigest() != pinned.sha256:
        raise changed(pinned)


def changed(pinned: Pinned) -> PackagingError:
    """The one line for a trainer file that is not what the plan read: the file, and what to do."""
    return PackagingError(
        f"trainer file {shown(pinned.rel)} in {shown(str(pinned.root))} changed while vtrain was building from it "
        f"(its first {pinned.size:,} bytes are not the ones the image's name was hashed from): is something "
        f"writing into the trainer folder, such as a log (`vtrain local vtrain.yaml | tee run.log`)? Write it "
        f"elsewhere, or list it in {VTRAIN_IGNORE}, and run again")


def _executable(path: Path) -> bool:
    return bool(path.stat().st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))


def tree_entries(root: Path, prefix: str) -> list[Entry]:
    """Every regular file under `root` (symlinks followed), placed under `prefix` in the image."""
    out: list[Entry] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in filenames:
            path = Path(dirpath) / f
            if path.is_file():
                out.append((f"{prefix}/{path.relative_to(root).as_posix()}", path, _executable(path)))
    return out


# --- what vtrain puts in an image ---------------------------------------------------------------


def scan_trainer(package_dir: Path, *, allow_credentials: bool = False, skip: Iterable[Path] = ()) -> Scan:
    """The trainer's files exactly as its sdist holds them (:func:`~vtrain.trainer.packaging.scan_package`:
    one selection, the same hash), refusing every file that looks like a secret unless `allow_credentials`.
    `skip`: paths that are not the trainer's (the job file)."""
    scan = scan_package(package_dir, skip=skip)
    if not allow_credentials:
        refuse_credentials(scan)
    return scan


def trainer_entries(scan: Scan) -> list[LayerEntry]:
    """The trainer's files for its layer: each as the scan read it (:class:`Pinned`) when it says, else as it is."""
    with readable_errors(scan.root):
        return [(f"{TRAINER_DIR}/{rel}", _pinned(scan, rel), _executable(scan.root / rel)) for rel in scan.files]


def _pinned(scan: Scan, rel: str) -> Path | Pinned:
    state = scan.states.get(rel)
    path = scan.root / rel
    return path if state is None else Pinned(path, state[0], state[1], rel, scan.root)


def trainer_layer(scan: Scan, out_dir: Path) -> Layer:
    """The trainer's selected files under /opt/vtrain/trainer; named after the scan's content hash."""
    with readable_errors(scan.root):
        return write_layer(trainer_entries(scan), out_dir / f"trainer-{scan.digest}.tar.gz", role="trainer")


def runtime_files() -> list[Entry]:
    """vtrain's runtime as the runtime sdist has it (its pyproject.toml left out: nothing installs it)."""
    return [(f"{RUNTIME_DIR}/{rel}", value, False) for rel, value in runtime_entries() if rel.startswith("vtrain/")]


def runtime_digest() -> str:
    """The content hash of the runtime's files (as the runtime sdist's name has it)."""
    return hash_entries(runtime_entries())


def runtime_layer(out_dir: Path) -> Layer:
    return write_layer(runtime_files(), out_dir / f"runtime-{runtime_digest()}.tar.gz", role="runtime")


def src_layout(scan: Scan) -> bool:
    """The trainer keeps its packages under src/ (the layout entrymodule accepts besides the flat one)."""
    return any(rel.startswith("src/") and rel.endswith(".py") for rel in scan.files)
