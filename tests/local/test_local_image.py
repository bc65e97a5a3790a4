"""A `trainer.build` job run here with no docker (issue 23): `vtrain local` builds the image's layers and
runs the pools' entry point on them; the emulator's --run-jobs pulls what `submit` pushed (from a real
docker-registry on 127.0.0.1) and runs that. A requirement left out of the image fails here, not on Vertex."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import assert_cache_accounted, write_job
from tests.trainer.image_helpers import (
    FAKE_LIBC,
    Registry,
    make_trainer,
    make_wheel,
    needs_registry,
    push_base,
)
from vtrain.cli import cli
from vtrain.jobfile.load import load_config
from vtrain.local.runner import run_local

TASK = """\
import os, sys
import tinyreq
from vtrain import runtime
print("ran", tinyreq.VALUE, runtime.__file__, sys.argv[1:], os.environ["VTRAIN_DISTRIBUTION_STRATEGY"])
print("cwd", os.path.isfile("trainer/task.py"), os.path.dirname(os.path.abspath(__file__)) == os.path.join(
    os.getcwd(), "trainer"))  # the image's WorkingDir is the trainer's directory: relative paths read as there
open("written-by-the-replica", "w").close()
"""
pytestmark = pytest.mark.slow


def _job(tmp_path: Path, *, image: str = "tf-cpu.2-17", repository: str = "us-central1-docker.pkg.dev/p/r/demo",
         body: str = TASK) -> Path:
    make_trainer(tmp_path / "t", body=body)
    wheels = make_wheel(tmp_path / "wheels").parent
    (tmp_path / "requirements.txt").write_text(f"--no-index\n--find-links {wheels}\ntinyreq==1.0\n")
    return write_job(tmp_path, f"""
        name: built
        region: us-central1
        trainer:
          package: t
          module: trainer.task
          image: {image}
          build:
            repository: {repository}
            requirements: requirements.txt
          args: [--epochs=1]
        cluster:
          chief: {{machine_type: n1-standard-4}}
          workers: {{replicas: 1}}
        """)


def test_local_runs_the_entry_point_on_the_images_own_layers(tmp_path: Path) -> None:
    path = _job(tmp_path)
    out, notices = (tmp_path / "out.txt").open("w+"), (tmp_path / "notices.txt").open("w+")
    job = run_local(load_config(path, target="local"), cache_dir=tmp_path / "cache", out=out, notices=notices,
                    containers="never")  # host mode (tests/local/test_local_containers.py: containers)
    assert job.wait(timeout=120) == "JOB_STATE_SUCCEEDED"
    out.seek(0)
    lines = sorted(out.read().splitlines())
    images = tmp_path / "cache" / "images"
    [root] = [p for p in images.iterdir() if not p.name.startswith(".")]
    runtime = root / "opt/vtrain/runtime/vtrain/runtime/__init__.py"
    assert lines == sorted(line for who in ("chief-0", "worker-0")
                           for line in (f"[{who}] cwd True True", f"[{who}] ran 1.0 {runtime} ['--epochs=1'] auto"))
    assert not list(root.rglob("written-by-the-replica"))  # the cached tree is not the replicas' to write
    # the same files as the image's trainer layer: what the sdist would select, nothing more
    assert sorted(p.relative_to(root / "opt/vtrain/trainer").as_posix() for p in (root / "opt/vtrain/trainer").rglob(
        "*") if p.is_file()) == ["pyproject.toml", "trainer/__init__.py", "trainer/task.py"]
    notices.seek(0)
    assert "the image's Python is 3.10, this machine's" in notices.read()
    assert_cache_accounted(tmp_path / "cache")  # images/, image-layers/: the job ended, its hold on them too


def test_a_requirement_the_image_lacks_fails_locally(tmp_path: Path) -> None:
    path = _job(tmp_path, body="import absent_requirement\n")
    out = (tmp_path / "out.txt").open("w+")
    job = run_local(load_config(path, target="local"), cache_dir=tmp_path / "cache", out=out, restart_policy="never",
                    containers="never")
    assert job.wait(timeout=120) == "JOB_STATE_FAILED"
    assert "No module named 'absent_requirement'" in (job.error or "")


@needs_registry
def test_the_emulator_runs_the_pushed_image_from_its_layers(tmp_path: Path, registry: Registry,  # noqa: F811
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from vtrain.emulator import Emulator
    from vtrain.emulator.local_jobs import EmulatedRunner

    monkeypatch.delenv("VTRAIN_CACHE_DIR")  # the cache under XDG_CACHE_HOME, this test's own
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    push_base(registry.client(), "base/python", [("usr/bin/python3", b"#!/bin/sh\n", True), FAKE_LIBC], tmp_path)
    path = _job(tmp_path, image=f"{registry.host}/base/python:base", repository=f"{registry.host}/team/trainer")
    runner = EmulatedRunner(cache_dir=tmp_path / "cache", output_root=tmp_path / "runs")
    with Emulator(runner=runner, pending_seconds=0.05) as emu:
        done = CliRunner().invoke(cli, ["submit", str(path), "--project", "test-project", "--api-endpoint", emu.url,
                                        "--wait", "--poll", "0.1", "--stream-logs"])
        assert done.exit_code == 0, done.output
    assert "JOB_STATE_SUCCEEDED" in done.output
    ran = [line for line in done.output.splitlines() if " ran 1.0 " in line]
    assert len(ran) == 2 and all("/cache/images/" in line for line in ran)
    # only vtrain's layers were downloaded: the base layer's blob is not in the cache
    blobs = sorted(p for p in (tmp_path / "cache" / "image-blobs").iterdir() if p.name != ".in-use")
    assert len(blobs) == 3
    for blob in blobs:
        with tarfile.open(blob) as layer:
            assert layer.getnames()[0] == "opt"
