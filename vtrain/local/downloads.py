"""A job's prebuilt ``package_uris`` as local files, and objects someone else put in Cloud Storage brought here
bounded and checked.

``file://`` and paths are used as they are; ``gs://`` objects are fetched into the cache (:func:`fetch_packages`).
A job that vtrain did not write names its trainer by ``packageUris`` (``gs://bucket/trainer-0.1.tar.gz``), and a
job replayed from Vertex keeps its checkpoints under its ``baseOutputDirectory``. Both are read here as hostile:

* a package: one object, its size read first and refused past :data:`MAX_PACKAGE_BYTES` (no download starts), its
  name a plain file name with a package's suffix (an sdist, a wheel, a zip), downloaded to a temporary name beside
  its place and checked by google-cloud-storage against the object's own checksum (crc32c or md5) before it is
  renamed there: a half download or a corrupt one is never installed; each generation of an object is fetched once;
* a tree (checkpoints): every object under a prefix, at most :data:`MAX_TREE_FILES` objects and
  :data:`MAX_TREE_BYTES` in all (counted from the listing, before any download), each relative name checked (no
  ``..``, no absolute path, no empty part) so nothing is written outside the destination.

Cloud Storage is google-cloud-storage's client from the environment (STORAGE_EMULATOR_HOST is honoured: the GCS
emulator in tests).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from vtrain.errors import BackendError, PackagingError
from vtrain.userpaths import cache_folder


def fetch_packages(uris: Sequence[str], cache_dir: Path) -> list[Path]:
    """Local paths for a job's prebuilt ``package_uris``: file:// and paths as they are, gs:// fetched."""
    from vtrain.trainer.staging import uri_to_path

    out: list[Path] = []
    for uri in uris:
        if uri.startswith("gs://"):
            directory = cache_folder("downloads", cache_dir)
            _ready(directory.parent, directory.name)
            out.append(fetch_package(uri, directory))
            continue
        path = uri_to_path(uri) or Path(uri).expanduser()
        if not path.is_file():
            raise PackagingError(f"trainer package {uri} not found")
        out.append(path)
    return out


def _ready(cache_dir: Path, *subdirs: str) -> None:
    """The folders exist as directories; one line naming the path, else."""
    for path in (cache_dir, *(cache_dir / d for d in subdirs)):
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise PackagingError(f"cannot use the download cache: {path}: {err.strerror or err}") from None


#: A trainer sdist is kilobytes to a few megabytes; a wheel with data rarely past a few hundred.
MAX_PACKAGE_BYTES = 1 << 30
#: What a job's checkpoints may bring home: TensorFlow writes a few files per checkpoint, a few kept.
MAX_TREE_FILES = 10_000
MAX_TREE_BYTES = 20 << 30
PACKAGE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".zip", ".whl")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,254}$")


def split_gs(uri: str) -> tuple[str, str]:
    """gs://BUCKET/NAME → (BUCKET, NAME); ValueError for anything else."""
    if not uri.startswith("gs://"):
        raise ValueError(f"{uri} is not a gs:// URI")
    bucket, _, name = uri[len("gs://"):].partition("/")
    if not bucket:
        raise ValueError(f"{uri} names no bucket")
    return bucket, name


def _client() -> Any:
    from vtrain.trainer.staging import default_client

    return default_client()


def _shown(uri: str) -> str:
    from vtrain.foreign import printable

    return printable(uri)


def fetch_package(uri: str, directory: Path, client: Any = None, *, max_bytes: int = MAX_PACKAGE_BYTES) -> Path:
    """`uri` (gs://) as a file under `directory` (which exists; a folder per URI and generation in it, the object's
    own file name); see the module.
    PackagingError for an object that is missing, too large, oddly named or does not match its checksum."""
    from google.api_core import exceptions as gexc
    from google.resumable_media.common import DataCorruption  # google.cloud.storage.exceptions subclasses it

    try:
        bucket, name = split_gs(uri)
    except ValueError as err:
        raise PackagingError(f"trainer package {_shown(uri)}: {err}") from None
    base = PurePosixPath(name).name
    if not _PLAIN_NAME.match(base) or not base.endswith(PACKAGE_SUFFIXES):
        raise PackagingError(f"trainer package {_shown(uri)}: not a package file name (a plain name ending in "
                             f"{', '.join(PACKAGE_SUFFIXES)})")
    client = client or _client()
    try:
        blob = client.bucket(bucket).get_blob(name)
    except gexc.GoogleAPICallError as err:
        raise PackagingError(f"cannot read {_shown(uri)}: {_shown(str(err.message))}") from None
    if blob is None:
        raise PackagingError(f"trainer package {_shown(uri)} not found")
    size = int(blob.size or 0)
    if size > max_bytes:
        raise PackagingError(f"trainer package {_shown(uri)} is {size:,} bytes; a package over "
                             f"{max_bytes:,} is refused (is it the right object?)")
    folder = directory / hashlib.sha256(f"{uri}#{blob.generation}".encode()).hexdigest()[:16]
    try:
        folder.mkdir(exist_ok=True)
    except OSError as err:
        raise PackagingError(f"cannot download {_shown(uri)} into {folder}: {err.strerror or err}") from None
    dest = folder / base
    if dest.is_file() and dest.stat().st_size == size:
        return dest  # this generation of the object, downloaded and checked before
    part = folder / f".{base}.{os.getpid()}.part"
    try:
        blob.download_to_filename(str(part), checksum="auto")  # crc32c or md5: a mismatch raises
        if part.stat().st_size != size:
            raise PackagingError(f"trainer package {_shown(uri)}: downloaded {part.stat().st_size:,} bytes of "
                                 f"{size:,}")
        part.replace(dest)
    except DataCorruption:
        raise PackagingError(f"trainer package {_shown(uri)}: the download does not match the object's "
                             "checksum") from None
    except gexc.GoogleAPICallError as err:
        raise PackagingError(f"cannot download {_shown(uri)}: {_shown(str(err.message))}") from None
    finally:
        with contextlib.suppress(OSError):
            part.unlink()
    return dest


def relative_name(prefix: str, name: str) -> PurePosixPath | None:
    """`name` under `prefix` as a safe relative path (no `..`, no absolute path, no empty part), else None."""
    rest = name[len(prefix):] if name.startswith(prefix) else ""
    if not rest or rest.endswith("/"):
        return None
    parts = rest.split("/")
    if any(part in ("", ".", "..") or "\x00" in part for part in parts):
        return None
    return PurePosixPath(*parts)


def fetch_tree(uri: str, dest: Path, client: Any = None, *, max_files: int = MAX_TREE_FILES,
               max_bytes: int = MAX_TREE_BYTES) -> list[Path]:
    """Every object under gs://`uri`/ into `dest` (their names below the prefix); the files written. BackendError
    when the listing passes `max_files` objects or `max_bytes` in all, before anything is downloaded. Objects
    whose names cannot be a path under `dest` are left out."""
    from google.api_core import exceptions as gexc

    bucket_name, prefix = split_gs(uri.rstrip("/") + "/")
    client = client or _client()
    try:
        bucket = client.bucket(bucket_name)
        listed = []
        total = 0
        for blob in client.list_blobs(bucket, prefix=prefix):
            listed.append(blob)
            total += int(blob.size or 0)
            if len(listed) > max_files or total > max_bytes:
                raise BackendError(f"{_shown(uri)} holds more than {max_files:,} objects or {max_bytes:,} bytes; "
                                   "not downloaded")
        written = []
        for blob in listed:
            rel = relative_name(prefix, blob.name)
            if rel is None:
                continue
            target = dest.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            blob.download_to_filename(str(target), checksum="auto")
            written.append(target)
    except gexc.GoogleAPICallError as err:
        raise BackendError(f"cannot read {_shown(uri)}: {_shown(str(err.message))}") from None
    return written


__all__ = ["MAX_PACKAGE_BYTES", "MAX_TREE_BYTES", "MAX_TREE_FILES", "PACKAGE_SUFFIXES", "fetch_package",
           "fetch_packages", "fetch_tree", "relative_name", "split_gs"]
