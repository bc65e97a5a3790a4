"""Reproducible layers: same inputs → same bytes; the trainer's layer follows the sdist's selection."""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
from pathlib import Path

import pytest

from tests.trainer.image_helpers import make_sdist, make_trainer, make_wheel
from vtrain.errors import PackagingError
from vtrain.trainer.image import layers, wheels
from vtrain.trainer.packaging import scan_package


def _tree(tmp: Path) -> Path:
    root = make_trainer(tmp / "t")
    (root / "trainer" / "data.txt").write_text("x" * 1000)
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o775)
    return root


def test_same_files_give_the_same_digest_whatever_the_times_modes_and_owner(tmp_path: Path) -> None:
    a = _tree(tmp_path / "a")
    b = _tree(tmp_path / "b")
    os.utime(b / "trainer" / "task.py", (1_000_000, 1_000_000))
    (b / "trainer" / "data.txt").chmod(0o600)
    one = layers.trainer_layer(scan_package(a), tmp_path / "out1")
    two = layers.trainer_layer(scan_package(b), tmp_path / "out2")
    assert (one.digest, one.diff_id, one.size) == (two.digest, two.diff_id, two.size)
    assert one.path.read_bytes() == two.path.read_bytes()
    assert one.digest == "sha256:" + hashlib.sha256(one.path.read_bytes()).hexdigest()
    assert one.diff_id == "sha256:" + hashlib.sha256(gzip.decompress(one.path.read_bytes())).hexdigest()


def test_entries_are_sorted_normalised_and_carry_no_times(tmp_path: Path) -> None:
    layer = layers.trainer_layer(scan_package(_tree(tmp_path)), tmp_path / "out")
    raw = layer.path.read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip MTIME
    with tarfile.open(layer.path) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert names[:3] == ["opt", "opt/vtrain", "opt/vtrain/trainer"]  # parents before children
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {(0, 0, "", "", 0)}
    modes = {m.name.rsplit("/", 1)[-1]: m.mode for m in members}
    assert (modes["run.sh"], modes["task.py"], modes["data.txt"], modes["trainer"]) == (0o755, 0o644, 0o644, 0o755)
    assert all(not m.pax_headers for m in members)
    assert "opt/vtrain/trainer/pyproject.toml" in names


def test_long_and_non_ascii_names_get_a_pax_path_and_nothing_else(tmp_path: Path) -> None:
    name = "opt/" + "d" * 120 + "/ü.py"
    one = layers.write_layer([(name, b"x", False)], tmp_path / "1.tar.gz", role="x")
    two = layers.write_layer([(name, b"x", False)], tmp_path / "2.tar.gz", role="x")
    assert one.digest == two.digest
    with tarfile.open(one.path) as tar:
        member = tar.getmember(name)
    assert member.pax_headers == {"path": name}


def test_source_date_epoch_sets_every_mtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    layer = layers.write_layer([("a/b.txt", b"b", False)], tmp_path / "l.tar.gz", role="x")
    with tarfile.open(layer.path) as tar:
        assert {m.mtime for m in tar.getmembers()} == {1700000000}


def test_one_changed_file_changes_only_the_trainer_layer(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    before = layers.trainer_layer(scan_package(root), tmp_path / "o1")
    runtime_before = layers.runtime_layer(tmp_path / "o1")
    (root / "trainer" / "task.py").write_text("print('trained, differently')\n")
    after = layers.trainer_layer(scan_package(root), tmp_path / "o2")
    runtime_after = layers.runtime_layer(tmp_path / "o2")
    assert before.digest != after.digest
    assert runtime_before.digest == runtime_after.digest


def test_the_trainer_layer_takes_the_sdists_selection(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / ".gitignore").write_text("secret_notes.txt\n")
    (root / "secret_notes.txt").write_text("no")
    (root / "trainer" / "__pycache__").mkdir()
    (root / "trainer" / "__pycache__" / "task.cpython-311.pyc").write_bytes(b"\0")
    scan = scan_package(root)
    names = [name for name, _, _ in layers.trainer_entries(scan)]
    assert names == [f"{layers.TRAINER_DIR}/{rel}" for rel in scan.files]
    assert not any("secret_notes" in n or "__pycache__" in n for n in names)


def test_files_that_look_like_credentials_are_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "id_rsa").write_text("key")
    with pytest.raises(PackagingError, match="refusing to package 1 file .* look like credentials"):
        layers.scan_trainer(root)
    # allowed: the image takes what the sdist holds (setuptools leaves a root id_rsa out of it)
    assert layers.scan_trainer(root, allow_credentials=True).credentials == [("id_rsa", "SSH key")]


def test_the_runtime_layer_is_what_the_runtime_sdist_ships(tmp_path: Path) -> None:
    layer = layers.runtime_layer(tmp_path)
    with tarfile.open(layer.path) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    assert f"{layers.RUNTIME_DIR}/vtrain/__init__.py" in names
    assert f"{layers.RUNTIME_DIR}/vtrain/errors.py" in names
    assert any(n.startswith(f"{layers.RUNTIME_DIR}/vtrain/runtime/") for n in names)
    assert not any("/vtrain/cli.py" in n or "pyproject.toml" in n for n in names)
    assert layer.path.name == f"runtime-{layers.runtime_digest()}.tar.gz"


# --- the requirements layer (pip, offline: a local wheel directory) ------------------------------------


def test_requirements_become_one_cached_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_wheel(tmp_path / "wheels")
    index = ("--no-index", "--find-links", str(tmp_path / "wheels"))
    first = wheels.requirements_layer(["tinyreq==1.0"], "3.11", index_args=index, cache=tmp_path / "cache")
    assert first is not None
    with tarfile.open(first.path) as tar:
        names = {m.name for m in tar.getmembers()}
    assert f"{layers.DEPS_DIR}/lib/python3.11/site-packages/tinyreq.py" in names  # a site dir: .pth files run
    assert not any(n.endswith(".pyc") for n in names)

    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip ran although the layer is cached")

    monkeypatch.setattr(wheels.subprocess, "run", no_pip)
    again = wheels.requirements_layer([" tinyreq==1.0 ", ""], "3.11", index_args=index, cache=tmp_path / "cache")
    assert again == first
    assert wheels.cache_key(["tinyreq==1.0"], "3.11") != wheels.cache_key(["tinyreq==1.0"], "3.10")
    assert wheels.requirements_layer([], "3.11", cache=tmp_path / "cache") is None


def test_an_sdist_only_requirement_fails_with_one_line_naming_it(tmp_path: Path) -> None:
    make_sdist(tmp_path / "dists")
    index = ("--no-index", "--find-links", str(tmp_path / "dists"))
    with pytest.raises(PackagingError) as err:
        wheels.requirements_layer(["onlysdist"], "3.10", index_args=index, cache=tmp_path / "cache",
                                  platforms=("manylinux2014_x86_64",))
    message = str(err.value)
    assert "\n" not in message
    assert "'onlysdist' has no wheel for Python 3.10 (cp310) on manylinux2014_x86_64" in message


def test_without_dependencies_exactly_the_list_is_installed(tmp_path: Path) -> None:
    make_wheel(tmp_path / "wheels", "needsdep", "1.0", requires=("numpy>=1",))
    index = ("--no-index", "--find-links", str(tmp_path / "wheels"))
    with pytest.raises(PackagingError, match="'numpy>=1' has no wheel|'numpy' has no wheel"):
        wheels.requirements_layer(["needsdep"], "3.11", index_args=index, cache=tmp_path / "cache")
    layer = wheels.requirements_layer(["needsdep"], "3.11", index_args=index, cache=tmp_path / "cache",
                                      dependencies=False)
    assert layer is not None
    with tarfile.open(layer.path) as tar:
        assert f"{layers.DEPS_DIR}/lib/python3.11/site-packages/needsdep.py" in tar.getnames()


def test_pip_failures_read_as_one_line() -> None:
    assert "cannot reach the package index" in wheels.pip_failure(
        "WARNING: Retrying ... NewConnectionError(...)\nERROR: No matching distribution found for numpy", "3.10",
        ("manylinux2014_x86_64",))
    assert wheels.pip_failure("ERROR: something odd\n", "3.10", ("p",)).endswith("failed: ERROR: something odd")


def test_scripts_get_a_portable_shebang_in_the_deps_bin(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_bytes(b"#!/work/venv/bin/python\nimport tool\n")
    (tmp_path / "tool.py").write_text("")
    entries = {name: value for name, value, _ in wheels._layer_entries(tmp_path, "3.11")}
    assert entries[f"{layers.DEPS_DIR}/bin/tool"] == b"#!/usr/bin/env python3\nimport tool\n"
    assert f"{layers.DEPS_DIR}/lib/python3.11/site-packages/tool.py" in entries
