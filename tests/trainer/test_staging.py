"""Staging: URI parsing, local directories, and real uploads to gcp-storage-emulator."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from vtrain.errors import PackagingError
from vtrain.trainer.staging import (
    StagingTarget,
    check_target,
    lookup,
    parse_staging,
    stage,
    uri_to_path,
)


@pytest.mark.parametrize(
    ("staging", "bucket", "prefix"),
    [
        ("gs://my-bucket", "my-bucket", "vtrain/"),
        ("gs://my-bucket/", "my-bucket", "vtrain/"),
        ("gs://my-bucket/a/b/", "my-bucket", "a/b/vtrain/"),
        ("gs://my.bucket_1//a//b", "my.bucket_1", "a/b/vtrain/"),
    ],
)
def test_parse_gcs(staging: str, bucket: str, prefix: str) -> None:
    target = parse_staging(staging)
    assert (target.kind, target.bucket, target.prefix) == ("gcs", bucket, prefix)
    assert target.uri_for("t-1.tar.gz") == f"gs://{bucket}/{prefix}t-1.tar.gz"


def test_parse_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    plain = parse_staging("stage")
    url = parse_staging((tmp_path / "stage").as_uri())
    assert plain == url == StagingTarget(kind="local", directory=tmp_path / "stage")
    uri = plain.uri_for("t.tar.gz")
    assert uri == (tmp_path / "stage" / "vtrain" / "t.tar.gz").as_uri()
    assert uri_to_path(uri) == tmp_path / "stage" / "vtrain" / "t.tar.gz"
    assert uri_to_path("gs://b/x") is None


@pytest.mark.parametrize(
    ("staging", "message"),
    [
        ("", "no staging location"),
        (None, "no staging location"),
        ("gs://", "not a valid bucket name"),
        ("gs://Upper/x", "'Upper' is not a valid bucket name"),
        ("s3://bucket/x", "unsupported scheme s3://"),
        ("file://otherhost/x", "must name a local path"),
    ],
)
def test_parse_errors(staging: str | None, message: str) -> None:
    with pytest.raises(PackagingError, match=message):
        parse_staging(staging)


def test_local_stage_copies_once(tmp_path: Path) -> None:
    (tmp_path / "stage").mkdir()
    pkg = tmp_path / "t-abc.tar.gz"
    pkg.write_bytes(b"payload")
    target = parse_staging(str(tmp_path / "stage"))
    check_target(target)
    assert lookup(target, pkg.name) is None
    first = stage(pkg, str(tmp_path / "stage"), progress=False)
    assert first.uploaded and first.size == 7
    assert uri_to_path(first.uri).read_bytes() == b"payload"  # type: ignore[union-attr]
    pkg.write_bytes(b"changed but same name")
    second = stage(pkg, target, progress=False)
    assert (second.uri, second.uploaded) == (first.uri, False)
    assert uri_to_path(first.uri).read_bytes() == b"payload"  # type: ignore[union-attr]
    assert lookup(target, pkg.name) == second
    # No temporary files left beside the staged one.
    assert sorted(p.name for p in (tmp_path / "stage" / "vtrain").iterdir()) == ["t-abc.tar.gz"]


def test_local_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(PackagingError, match=r"staging directory .*/nope does not exist; create it"):
        check_target(parse_staging(str(tmp_path / "nope")))
    (tmp_path / "file").write_text("x")
    with pytest.raises(PackagingError, match="is not a directory"):
        check_target(parse_staging(str(tmp_path / "file")))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores permissions")
def test_local_not_writable(tmp_path: Path) -> None:
    stage_dir = tmp_path / "ro"
    stage_dir.mkdir()
    stage_dir.chmod(0o500)
    try:
        with pytest.raises(PackagingError, match="is not writable"):
            check_target(parse_staging(str(stage_dir)))
    finally:
        stage_dir.chmod(0o700)


def test_gcs_upload_once(gcs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gcs.create_bucket("staging-bkt")
    pkg = tmp_path / "t-abc.tar.gz"
    pkg.write_bytes(b"payload")
    client = gcs.client()
    target = parse_staging("gs://staging-bkt/runs")
    check_target(target, client)
    first = stage(pkg, target, progress=False, client=client)
    assert (first.uri, first.uploaded, first.size) == ("gs://staging-bkt/runs/vtrain/t-abc.tar.gz", True, 7)
    assert gcs.object_names("staging-bkt") == ["runs/vtrain/t-abc.tar.gz"]
    blob = client.bucket("staging-bkt").get_blob("runs/vtrain/t-abc.tar.gz")
    assert blob.download_as_bytes() == b"payload"
    second = stage(pkg, target, progress=False, client=client)
    assert (second.uri, second.uploaded) == (first.uri, False)
    assert lookup(target, pkg.name, client) == second


def test_gcs_client_from_environment(gcs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """No client passed: STORAGE_EMULATOR_HOST alone routes the default client to the emulator."""
    gcs.create_bucket("env-bkt")
    pkg = tmp_path / "t.tar.gz"
    pkg.write_bytes(b"x")
    check_target(parse_staging("gs://env-bkt"))
    assert stage(pkg, "gs://env-bkt", progress=False).uploaded
    assert gcs.object_names("env-bkt") == ["vtrain/t.tar.gz"]


def test_gcs_missing_bucket(gcs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PackagingError, match=r"staging bucket gs://no-such-bkt does not exist; create it"):
        check_target(parse_staging("gs://no-such-bkt/x"), gcs.client())


def test_gcs_large_file_chunked_with_progress(gcs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Above 8 MiB the upload is resumable in chunks, and a terminal gets a progress bar."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    gcs.create_bucket("big-bkt")
    data = os.urandom(9 * 1024 * 1024 + 123)
    pkg = tmp_path / "big.tar.gz"
    pkg.write_bytes(data)
    client = gcs.client()
    staged = stage(pkg, "gs://big-bkt", progress=True, client=client)
    assert staged.uploaded and staged.size == len(data)
    assert client.bucket("big-bkt").blob("vtrain/big.tar.gz").download_as_bytes() == data
    assert "uploading big.tar.gz" in term.getvalue()
    assert "100%" in term.getvalue()


def test_stage_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PackagingError, match="no such file"):
        stage(tmp_path / "nope.tar.gz", str(tmp_path), progress=False)
