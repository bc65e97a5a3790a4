"""Where built packages go: a ``gs://`` bucket for Vertex AI, a local directory for the emulator.

Objects are content-addressed (the file name carries the hash of the sources), so an object that
already exists is the one we would upload: it is skipped, and an unchanged trainer is never sent
twice. Nothing half-written is ever visible: a Cloud Storage object appears only when its upload
completes, and a local file is written beside its final name and renamed into place.

Every check a user can fail (bad URI, missing bucket, no write permission, no credentials) is done
by :func:`check_target` before anything is built or uploaded, and raised as a
:class:`~vtrain.errors.PackagingError`. google-cloud-storage is imported only when a gs:// target
is actually touched, so :func:`parse_staging` stays cheap for ``vtrain render``.

Every Cloud Storage call waits a bounded time (:mod:`vtrain.network`: per attempt, and in all)
and says so before each retry; an endpoint that never answers is one PackagingError line naming
it, not two minutes of silence and a RetryError traceback.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vtrain import network
from vtrain.errors import PackagingError

if TYPE_CHECKING:
    from google.cloud import storage

# Packages live under `{staging}/vtrain/` so they never mix with a user's own objects.
STAGING_SUBDIR = "vtrain"
# Permissions needed: create to upload, get to see that an object already exists.
REQUIRED_PERMISSIONS = ("storage.objects.create", "storage.objects.get")
# Above this size uploads go in resumable chunks, so the progress bar moves and a dropped
# connection resumes instead of restarting.
_CHUNKED_ABOVE = 8 * 1024 * 1024
_CHUNK_SIZE = 2 * 1024 * 1024  # a multiple of 256 KiB, as Cloud Storage requires

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")


@dataclass(frozen=True)
class StagingTarget:
    """A parsed staging location: a Cloud Storage prefix or a local directory."""

    kind: str  # "gcs" or "local"
    bucket: str = ""  # gcs: bucket name
    prefix: str = ""  # gcs: object-name prefix, always ending in "vtrain/"
    directory: Path | None = None  # local: the staging directory the user named (absolute)

    @property
    def local_dir(self) -> Path:
        """The local directory files are copied into (``{directory}/vtrain``)."""
        if self.directory is None:
            raise ValueError("not a local staging target")
        return self.directory / STAGING_SUBDIR

    def uri_for(self, filename: str) -> str:
        if self.kind == "gcs":
            return f"gs://{self.bucket}/{self.prefix}{filename}"
        return (self.local_dir / filename).as_uri()


@dataclass(frozen=True)
class StagedObject:
    """One staged package: where it is, and whether this run sent it (False: it was there)."""

    uri: str
    uploaded: bool
    size: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"uri": self.uri, "uploaded": self.uploaded, "size": self.size}


def parse_staging(staging: str | None) -> StagingTarget:
    """Parse ``gs://bucket[/prefix]``, ``file:///dir`` or a plain directory path. No I/O."""
    if staging is None or not str(staging).strip():
        raise PackagingError(
            "no staging location: set `staging_bucket` in the job file "
            "(gs://BUCKET/PREFIX for Vertex AI, or a local directory for `vtrain local`)"
        )
    staging = str(staging).strip()
    match = _SCHEME.match(staging)
    scheme = match.group(1).lower() if match else ""
    if scheme == "gs":
        rest = staging[len(match.group(0)) :] if match else ""
        bucket, _, prefix = rest.partition("/")
        if not _BUCKET.match(bucket):
            raise PackagingError(
                f"staging bucket {staging!r}: {bucket!r} is not a valid bucket name "
                "(3-222 characters: lowercase letters, digits, '-', '_', '.')"
            )
        prefix = "/".join(part for part in prefix.split("/") if part)
        full = f"{prefix}/{STAGING_SUBDIR}/" if prefix else f"{STAGING_SUBDIR}/"
        return StagingTarget(kind="gcs", bucket=bucket, prefix=full)
    if scheme == "file":
        parsed = urllib.parse.urlparse(staging)
        if parsed.netloc not in ("", "localhost"):
            raise PackagingError(f"staging location {staging!r}: file:// URLs must name a local path")
        return StagingTarget(kind="local", directory=_absolute(urllib.parse.unquote(parsed.path)))
    if scheme:
        raise PackagingError(
            f"staging location {staging!r}: unsupported scheme {scheme}://; "
            "use gs://BUCKET/PREFIX, file:///DIR or a directory path"
        )
    return StagingTarget(kind="local", directory=_absolute(staging))


def _absolute(path: str) -> Path:
    # abspath, not resolve(): keep the user's symlinks, so URIs read like the path they wrote.
    return Path(os.path.abspath(os.path.expanduser(path)))


def default_client() -> storage.Client:
    """A Cloud Storage client from the environment (STORAGE_EMULATOR_HOST is honoured)."""
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import storage

    try:
        return storage.Client()
    except DefaultCredentialsError as err:
        raise PackagingError(
            "no Google Cloud credentials to reach the staging bucket: run "
            "`gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS"
        ) from err


def _endpoint(client: Any) -> str:
    return str(getattr(client, "api_endpoint", None) or "https://storage.googleapis.com")


def call_policy(client: Any) -> dict[str, Any]:
    """timeout= and retry= for one Cloud Storage call: bounded, with a progress line per retry."""
    from google.api_core.retry import Retry


    where = f"Cloud Storage at {_endpoint(client)}"
    wait = network.attempt_timeout()

    def on_error(err: Exception) -> None:
        network.note(f"{where}: {network.network_reason(err, wait)}; retrying")

    retry = Retry(predicate=network.is_transient, initial=1.0, maximum=8.0, timeout=network.deadline(),
                  on_error=on_error)
    return {"timeout": wait, "retry": retry}


def unreachable_error(err: Exception, client: Any, what: str) -> PackagingError:
    """A call whose retries ran out (RetryError) or that never reached the server: one line."""

    cause = getattr(err, "cause", None) or err
    why = network.network_reason(cause, network.attempt_timeout())
    tried = f"gave up after {network.deadline():g} s" if cause is not err else "not retried"
    where = f"Cloud Storage at {_endpoint(client)}"
    line = network.unreachable(where, why, tried, "STORAGE_EMULATOR_HOST, or the bucket's location")
    return PackagingError(f"{what}: {line}")


def network_errors() -> tuple[type[Exception], ...]:
    from google.api_core.exceptions import RetryError
    from google.auth.exceptions import TransportError
    from requests.exceptions import RequestException

    return (RetryError, RequestException, TransportError)


def check_target(target: StagingTarget, client: storage.Client | None = None) -> None:
    """Fail now, before any build or upload, if packages could not be written to `target`."""
    if target.kind == "local":
        _check_local(target)
    else:
        _check_gcs(target, client or default_client())


def _check_local(target: StagingTarget) -> None:
    directory = target.local_dir.parent
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise PackagingError(f"staging directory {directory} {what}; create it with `mkdir -p {directory}`")
    try:
        target.local_dir.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.local_dir, prefix=".write-check-"):
            pass
    except OSError as err:
        raise PackagingError(f"staging directory {directory} is not writable: {err.strerror}") from err


def _check_gcs(target: StagingTarget, client: storage.Client) -> None:
    from google.api_core import exceptions as gexc

    where = f"gs://{target.bucket}"
    try:
        granted = set(
            client.bucket(target.bucket).test_iam_permissions(list(REQUIRED_PERMISSIONS), **call_policy(client))
        )
    except network_errors() as err:
        raise unreachable_error(err, client, f"cannot check staging bucket {where}") from None
    except gexc.NotFound as err:
        raise PackagingError(
            f"staging bucket {where} does not exist; create it with "
            f"`gcloud storage buckets create {where} --location=REGION`"
        ) from err
    except (gexc.Forbidden, gexc.Unauthorized) as err:
        raise PackagingError(f"staging bucket {where}: access denied ({_reason(err)})") from err
    except gexc.GoogleAPICallError as err:
        raise PackagingError(f"staging bucket {where}: cannot check it ({_reason(err)})") from err
    missing = [p for p in REQUIRED_PERMISSIONS if p not in granted]
    if missing:
        raise PackagingError(
            f"staging bucket {where} is not writable for you: missing {', '.join(missing)} "
            "(grant roles/storage.objectAdmin on the bucket)"
        )


def _reason(err: Exception) -> str:
    return str(getattr(err, "message", "") or err).splitlines()[0]


def stage(
    local_file: Path,
    staging: str | StagingTarget,
    *,
    progress: bool = True,
    client: storage.Client | None = None,
) -> StagedObject:
    """Put `local_file` under `{staging}/vtrain/`, unless an object of that name is already there.

    The name is content-addressed, so "already there" means "already uploaded". `progress` shows a
    bar on stderr when stderr is a terminal (stdout stays clean for ``-o json``).
    """
    target = staging if isinstance(staging, StagingTarget) else parse_staging(staging)
    local_file = Path(local_file)
    if not local_file.is_file():
        raise PackagingError(f"cannot stage {local_file}: no such file")
    if target.kind == "gcs" and client is None:
        client = default_client()
    existing = lookup(target, local_file.name, client)
    if existing is not None:
        return existing
    if target.kind == "local":
        return _stage_local(local_file, target)
    return _stage_gcs(local_file, target, client or default_client(), progress)


def lookup(target: StagingTarget, filename: str, client: storage.Client | None = None) -> StagedObject | None:
    """The staged object called `filename`, if it is already there (``uploaded=False``)."""
    if target.kind == "local":
        dest = target.local_dir / filename
        if not dest.is_file():
            return None
        return StagedObject(dest.as_uri(), uploaded=False, size=dest.stat().st_size)
    from google.api_core import exceptions as gexc

    client = client or default_client()
    try:
        blob = client.bucket(target.bucket).get_blob(target.prefix + filename, **call_policy(client))
    except network_errors() as err:
        raise unreachable_error(err, client, f"cannot read {target.uri_for(filename)}") from None
    except gexc.GoogleAPICallError as err:
        raise PackagingError(f"cannot read {target.uri_for(filename)}: {_reason(err)}") from err
    if blob is None:
        return None
    return StagedObject(target.uri_for(filename), uploaded=False, size=blob.size or 0)


#: A copy in progress: `.NAME.PID.RANDOM.tmp` beside its final name; PID tells a dead copy's leftover.
_PARTIAL = re.compile(r"^\..+\.([0-9]+)\.[A-Za-z0-9_]+\.tmp$")
_UMASK_LOCK = threading.Lock()


def _file_mode() -> int:
    """The mode a plain new file gets here (0666 less the umask), not mkstemp's private 0600."""
    with _UMASK_LOCK:
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


def _stage_local(local_file: Path, target: StagingTarget) -> StagedObject:
    from vtrain.proctree import sweep_stale

    dest = target.local_dir / local_file.name
    size = local_file.stat().st_size
    try:
        target.local_dir.mkdir(parents=True, exist_ok=True)
        sweep_stale(target.local_dir, _PARTIAL)
        fd, tmp = tempfile.mkstemp(dir=target.local_dir, prefix=f".{local_file.name}.{os.getpid()}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out, local_file.open("rb") as src:
                while chunk := src.read(1024 * 1024):
                    out.write(chunk)
                os.fchmod(out.fileno(), _file_mode())  # readable as any staged file (a container, a CI user)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as err:
        raise PackagingError(f"cannot copy {local_file.name} to {target.local_dir}: {err.strerror}") from err
    return StagedObject(dest.as_uri(), uploaded=True, size=size)


def _stage_gcs(local_file: Path, target: StagingTarget, client: storage.Client, progress: bool) -> StagedObject:
    from google.api_core import exceptions as gexc

    uri = target.uri_for(local_file.name)
    size = local_file.stat().st_size
    blob = client.bucket(target.bucket).blob(target.prefix + local_file.name)
    try:
        if size > _CHUNKED_ABOVE:
            blob.chunk_size = _CHUNK_SIZE
        with local_file.open("rb") as fh:
            if progress and sys.stderr.isatty():
                _upload_with_bar(blob, fh, size, local_file.name, call_policy(client))
            else:
                _upload(blob, fh, size, call_policy(client))
    except network_errors() as err:
        raise unreachable_error(err, client, f"upload of {local_file.name} to {uri} failed") from None
    except gexc.PreconditionFailed:
        # Someone uploaded the same content between our check and our upload: same bytes' worth.
        return StagedObject(uri, uploaded=False, size=size)
    except gexc.GoogleAPICallError as err:
        raise PackagingError(f"upload of {local_file.name} to {uri} failed: {_reason(err)}") from err
    return StagedObject(uri, uploaded=True, size=size)


def _upload(blob: Any, fh: IO[bytes] | _CountingReader, size: int, policy: dict[str, Any]) -> None:
    # if_generation_match=0: create only, never overwrite an object that appeared meanwhile
    # (which also makes the upload safe to retry).
    blob.upload_from_file(fh, size=size, content_type="application/gzip", if_generation_match=0, **policy)


def _upload_with_bar(blob: Any, fh: IO[bytes], size: int, label: str, policy: dict[str, Any]) -> None:
    import click

    with click.progressbar(length=size, label=f"uploading {label}", file=sys.stderr) as bar:
        _upload(blob, _CountingReader(fh, bar.update), size, policy)


class _CountingReader:
    """A read-only file wrapper that reports every chunk read, for the progress bar."""

    def __init__(self, fh: IO[bytes], on_read: Any) -> None:
        self._fh = fh
        self._on_read = on_read

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self._on_read(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)


def uri_to_path(uri: str) -> Path | None:
    """The local path behind a ``file://`` URI (as staged for the emulator), else None."""
    if not uri.startswith("file://"):
        return None
    return Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))
