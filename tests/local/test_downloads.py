"""Packages and checkpoints brought from Cloud Storage (gcp-storage-emulator), bounded and checked (local.downloads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vtrain.errors import BackendError, PackagingError
from vtrain.local.downloads import fetch_package, fetch_tree, relative_name


@pytest.fixture
def bkt(gcs: Any) -> Any:
    gcs.create_bucket("b")
    return gcs.client().bucket("b")


def test_a_package_is_downloaded_checked_and_kept(tmp_path: Path, bkt: Any) -> None:
    bkt.blob("pkgs/trainer-0.1.tar.gz").upload_from_string(b"x" * 2000)
    got = fetch_package("gs://b/pkgs/trainer-0.1.tar.gz", tmp_path)
    assert got.name == "trainer-0.1.tar.gz" and got.read_bytes() == b"x" * 2000
    assert fetch_package("gs://b/pkgs/trainer-0.1.tar.gz", tmp_path) == got  # this generation: kept
    assert [p.name for p in got.parent.iterdir()] == ["trainer-0.1.tar.gz"]  # no part file left behind
    bkt.blob("pkgs/trainer-0.1.tar.gz").upload_from_string(b"y" * 10)  # a new generation: a new download
    again = fetch_package("gs://b/pkgs/trainer-0.1.tar.gz", tmp_path)
    assert again != got and again.read_bytes() == b"y" * 10


@pytest.mark.parametrize(("uri", "said"), [
    ("gs://b/pkgs/big-0.1.tar.gz", "is 2,000 bytes; a package over 1,000 is refused"),
    ("gs://b/pkgs/missing-0.1.tar.gz", "trainer package gs://b/pkgs/missing-0.1.tar.gz not found"),
    ("gs://b/pkgs/run.sh", "not a package file name"),
    ("gs://b/pkgs/.hidden.tar.gz", "not a package file name"),
    ("gs://b/pkgs/a\x1bb.tar.gz", "gs://b/pkgs/a\\x1bb.tar.gz: not a package file name"),
    ("s3://b/x.tar.gz", "is not a gs:// URI"),
])  # fmt: skip
def test_a_package_that_is_not_one_is_refused_before_any_download(tmp_path: Path, bkt: Any, uri: str,
                                                                    said: str) -> None:
    bkt.blob("pkgs/big-0.1.tar.gz").upload_from_string(b"x" * 2000)
    with pytest.raises(PackagingError) as err:
        fetch_package(uri, tmp_path, max_bytes=1000)
    assert said in str(err.value)
    assert not list(tmp_path.rglob("*.tar.gz"))


def test_a_tree_comes_home_under_its_prefix_and_nothing_outside(tmp_path: Path, bkt: Any) -> None:
    # (names with `..` or empty parts never leave the destination: test_relative_names; the storage emulator
    # cannot hold them)
    for name in ("out/checkpoints/steps/ckpt-5.index", "out/checkpoints/steps/ckpt-5.data-00000-of-00001",
                 "out/checkpoints-other/x", "out/model/saved.pb"):
        bkt.blob(name).upload_from_string(name.encode())
    written = fetch_tree("gs://b/out/checkpoints", tmp_path / "dest")
    assert sorted(p.relative_to(tmp_path / "dest").as_posix() for p in written) == [
        "steps/ckpt-5.data-00000-of-00001", "steps/ckpt-5.index"]
    with pytest.raises(BackendError, match=r"holds more than 1 objects or .* not downloaded"):
        fetch_tree("gs://b/out/checkpoints", tmp_path / "other", max_files=1)
    assert not (tmp_path / "other").exists()


def test_relative_names() -> None:
    assert str(relative_name("p/", "p/a/b")) == "a/b"
    for bad in ("q/a", "p/", "p/a/../b", "p/./a", "p//a", "p/a/"):
        assert relative_name("p/", bad) is None, bad
