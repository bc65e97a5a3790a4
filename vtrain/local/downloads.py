"""A job's prebuilt ``package_uris`` as local files: file:// and paths as they are, gs:// fetched into the cache."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from vtrain.errors import PackagingError


def fetch_packages(uris: Sequence[str], cache_dir: Path) -> list[Path]:
    """Local paths for a job's prebuilt ``package_uris``: file:// and paths as they are, gs:// fetched."""
    from vtrain.trainer.staging import uri_to_path

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

    from vtrain.trainer.staging import default_client

    bucket, _, name = uri[len("gs://"):].partition("/")
    _ready(directory.parent, directory.name)
    dest = directory / hashlib.sha256(uri.encode()).hexdigest()[:16] / Path(name).name
    _ready(dest.parent)
    try:
        default_client().bucket(bucket).blob(name).download_to_filename(str(dest))
    except gexc.GoogleAPICallError as err:
        raise PackagingError(f"cannot download {uri}: {err.message}") from err
    return dest


def _ready(cache_dir: Path, *subdirs: str) -> None:
    """The folders exist as directories; one line naming the path, else."""
    for path in (cache_dir, *(cache_dir / d for d in subdirs)):
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise PackagingError(f"cannot use the download cache: {path}: {err.strerror or err}") from None


__all__ = ["fetch_packages"]
