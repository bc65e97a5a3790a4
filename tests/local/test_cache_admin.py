"""`vtrain cache info|clear` account for every folder vtrain writes (issue 46, class 1). `info` crashed on any
cache (KeyError 'sdist-files', a folder its text output named and its data left out), left out the image
caches (~1 GB here while it said 13.9 MiB), and `clear` left `containers/` and `image-blobs/`. The folders are
now one list (`vtrain.userpaths.CACHE_FOLDERS`) that the writers name their folder from and both commands
read; the outputs are compared whole, and one test runs the real writers into one cache and walks it."""

from __future__ import annotations

import ast
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, get_args

import pytest
from click.testing import CliRunner

from tests.conftest import REPO
from tests.helpers import assert_cache_accounted, write_job
from tests.trainer.image_helpers import FAKE_LIBC, Registry, make_trainer, make_wheel, needs_registry, push_base
from vtrain.cli import cli
from vtrain.local import cacheadmin
from vtrain.local.cachefolders import hold
from vtrain.local.envcache import ENV_FORMAT, IMAGE_PTH, READY, _site_packages
from vtrain.userpaths import CACHE_FOLDERS, OLD_CACHE_FOLDERS, CacheFolder, cache_folder


def _cli(cache: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["cache", *args], env={"VTRAIN_CACHE_DIR": str(cache)})


def _file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def _ready_env(cache: Path, key: str, sdist: str) -> Path:
    """An environment `cache info` reads as ready: a python, vtrain's .pth, a marker whose files exist."""
    venv = cache / "envs" / key
    _file(venv / "bin" / "python", 100)
    (venv / "bin" / "python").chmod(0o755)
    _file(_site_packages(venv) / IMAGE_PTH, 20)
    (venv / READY).write_text(json.dumps({"format": ENV_FORMAT, "sdists": [f"/x/{sdist}"], "notices": [],
                                          "files": ["bin/python"]}))
    use = cache / "envs" / f"{key}.use"
    use.touch()
    os.utime(use, (1767225600, 1767225600))  # 2026-01-01T00:00:00 UTC
    return venv


def test_info_of_an_empty_or_absent_cache_is_its_one_line(tmp_path: Path) -> None:
    done = _cli(tmp_path, "info")
    assert (done.exit_code, done.output) == (0, f"cache {tmp_path}: 0 B\n")
    done = _cli(tmp_path / "absent", "info")
    assert (done.exit_code, done.output) == (0, f"cache {tmp_path / 'absent'}: 0 B (not created yet)\n")
    data = json.loads(_cli(tmp_path / "absent", "info", "-o", "json").output)
    assert list(data["folders"]) == [*CACHE_FOLDERS, *OLD_CACHE_FOLDERS]  # every folder, there or not
    assert all(not f["exists"] and f["size"] == 0 for f in data["folders"].values())


def test_info_says_every_folder_with_its_files_and_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    cache = tmp_path / "cache"
    venv = _ready_env(cache, "0123abcd", "trainer-1.tar.gz")
    _file(cache / "sdists" / "trainer-1.tar.gz", 2048)
    _file(cache / "image-layers" / "requirements-k.tar.gz", 3 << 20)
    _file(cache / "image-blobs" / "sha256-aa", 5000)
    _file(cache / "containers" / "rootfs" / "sha256-bb" / "rootfs" / "bin" / "sh", 10)
    (cache / "containers" / "rootfs" / "sha256-bb" / "rootfs" / "sh").symlink_to("bin/sh")
    _file(cache / "sdist-files" / "old.json", 7)
    _file(cache / "notes.txt", 99)  # not vtrain's: named, never counted or touched
    lease = hold(cache, "images")  # a running job's hold on images/ (its lock file: 0 bytes)
    try:
        done = _cli(cache, "info")
    finally:
        lease.release()
    env_bytes = 100 + 20 + len((venv / READY).read_bytes())
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        f"cache {cache}: {(env_bytes + 2048 + (3 << 20) + 5000 + 10 + 6 + 7) / (1 << 20):.1f} MiB",
        f"  env 0123abcd  ready      {f'{env_bytes} B':>10}, last used 2026-01-01T00:00:00  trainer-1.tar.gz",
        f"  envs                  4 file(s) {f'{env_bytes} B':>10}  {CACHE_FOLDERS['envs']}",
        f"  sdists                1 file(s)    2.0 KiB  {CACHE_FOLDERS['sdists']}",
        f"  image-layers          1 file(s)    3.0 MiB  {CACHE_FOLDERS['image-layers']}",
        f"  image-blobs           1 file(s)    4.9 KiB  {CACHE_FOLDERS['image-blobs']}",
        f"  images                1 file(s)        0 B  {CACHE_FOLDERS['images']} (in use by a running job)",
        f"  containers            2 file(s)       16 B  {CACHE_FOLDERS['containers']}",
        f"  sdist-files           1 file(s)        7 B  {OLD_CACHE_FOLDERS['sdist-files']}",
        "  not vtrain's (left alone): notes.txt",
    ]


def test_clear_empties_every_folder_but_what_a_running_job_holds(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    venv = _ready_env(cache, "0123abcd", "trainer-1.tar.gz")
    for name in CACHE_FOLDERS:
        if name != "envs":
            _file(cache / name / "entry", 10)
    _file(cache / "sdist-files" / "old.json", 10)
    _file(cache / "notes.txt", 99)
    held = hold(cache, "containers")  # a container job running
    with open(cache / "envs" / "0123abcd.use") as use:
        fcntl.flock(use, fcntl.LOCK_SH)  # a job running in the environment
        done = _cli(cache, "clear")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        *(f"removed {cache / name}" for name in ("sdists", "downloads", "image-layers", "image-bases",
                                                  "trainer-requires", "image-blobs", "images", "sdist-files")),
        f"kept {venv} (in use by a running job)",
        f"kept {cache / 'containers'} (in use by a running job)",
        f"freed {10 * 8} B in {cache}",
    ]
    assert sorted(p.name for p in cache.iterdir()) == ["containers", "envs", "notes.txt"]
    held.release()
    done = _cli(cache, "clear", "-o", "json")
    data = json.loads(done.output)
    assert data["removed"] == [str(venv), str(cache / "containers")] and data["kept"] == []
    assert sorted(p.name for p in cache.iterdir()) == ["notes.txt"]  # envs/ emptied: gone too


def test_a_job_that_holds_a_folder_clear_removed_makes_it_again(tmp_path: Path) -> None:
    _file(tmp_path / "images" / "x", 1)
    assert cacheadmin.clear(tmp_path)["removed"] == [str(tmp_path / "images")]
    lease = hold(tmp_path, "images", "image-blobs")
    assert (tmp_path / "images").is_dir() and (tmp_path / "image-blobs").is_dir()
    assert cacheadmin.clear(tmp_path)["kept"] == [{"path": str(tmp_path / p), "why": "in use by a running job"}
                                                  for p in ("image-blobs", "images")]
    lease.release()
    lease.release()  # twice: nothing


def test_the_folder_list_is_one_list_and_every_writer_names_its_folder_from_it() -> None:
    """`CacheFolder` (what mypy lets a writer pass to `cache_folder`) and `CACHE_FOLDERS` (what the commands
    list) are the same names; no module joins a name onto the cache root itself (`cache / "images"`)."""
    assert list(get_args(CacheFolder)) == list(CACHE_FOLDERS)
    assert (*CACHE_FOLDERS, *OLD_CACHE_FOLDERS) == cacheadmin.PARTS
    with pytest.raises(ValueError, match="not one of vtrain's cache folders"):
        cache_folder("elsewhere", Path("/c"))  # type: ignore[arg-type]
    roots, calls = {"cache", "cache_dir", "cache_root"}, {"cache_dir", "default_cache_dir", "vtrain_cache_dir"}
    joined = []
    for path in sorted((REPO / "vtrain").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                    and isinstance(node.right, (ast.Constant, ast.JoinedStr))):
                continue
            left = node.left
            if (isinstance(left, ast.Name) and left.id in roots) or (
                    isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id in calls):
                joined.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert joined == []


@pytest.mark.slow
@needs_registry
def test_what_the_writers_make_is_what_info_counts_and_clear_removes(tmp_path: Path, registry: Registry,
                                                                    bucket: Any) -> None:  # noqa: F811
    """The real writers, into one cache: `vtrain local`'s trainer (sdists, envs), a prebuilt package from Cloud
    Storage (downloads), a `trainer.build` image built and unpacked for containers (image-layers, image-bases,
    trainer-requires, image-blobs, containers) and on this machine's Python (images). Every entry they leave is
    in a folder `info` lists, `info` counts every byte, and `clear` leaves nothing."""
    from vtrain.jobfile.load import load_config
    from vtrain.local.containers import find_runtime
    from vtrain.local.downloads import fetch_packages
    from vtrain.local.runner import prepare_images, prepare_trainer

    cache = tmp_path / "cache"
    trainer = make_trainer(tmp_path / "t")
    (trainer / "pyproject.toml").unlink()  # setup.py: its dependencies come from the backend (trainer-requires)
    (trainer / "setup.py").write_text('from setuptools import setup\nsetup(name="walk", version="0.1", '
                                      'packages=["trainer"], install_requires=["tinyreq==1.0"])\n')
    wheels = make_wheel(tmp_path / "wheels").parent
    push_base(registry.client(), "base/python", [("usr/bin/python3", b"#!/bin/sh\n", True), FAKE_LIBC], tmp_path)
    (tmp_path / "requirements.txt").write_text(f"--no-index\n--find-links {wheels}\n")
    job = write_job(tmp_path, f"""
        name: walk
        trainer:
          package: t
          module: trainer.task
          image: {registry.host}/base/python:base
          build: {{repository: {registry.host}/team/walk, requirements: requirements.txt, python_version: "3.11"}}
        cluster:
          chief: {{machine_type: n1-standard-4}}
        """)
    config = load_config(job, target="local")
    said: list[str] = []
    images = prepare_images(config, cache, False, said.append, "never")  # images/, image-layers/
    assert images
    if find_runtime(tmp_path / "probe")[0] is not None:
        images = prepare_images(config, cache, False, said.append, "always")  # image-blobs/, containers/, …
    for image in images.values():
        assert image.lease is not None
        image.lease.release()
    make_trainer(tmp_path / "p")  # no dependency to install
    package = write_job(tmp_path, """
        name: walk-package
        trainer: {package: p, module: trainer.task, image: tf-cpu.2-17}
        cluster:
          chief: {machine_type: n1-standard-4}
        """, name="package.yaml")
    env, _, _ = prepare_trainer(load_config(package, target="local"), cache, False, said.append)  # sdists/, envs/
    assert env is not None and env.lease is not None
    env.lease.release()
    bucket.client().bucket("stage-bkt").blob("pre/built-1.0.tar.gz").upload_from_string(b"sdist bytes")
    fetch_packages(["gs://stage-bkt/pre/built-1.0.tar.gz"], cache)  # downloads/
    written = {p.name for p in cache.iterdir()}
    expected = set(CACHE_FOLDERS) if find_runtime(tmp_path / "probe")[0] is not None else \
        set(CACHE_FOLDERS) - {"image-blobs", "containers"}
    assert written == expected, said
    assert_cache_accounted(cache)
