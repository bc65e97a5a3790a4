"""Issue 46, class 10: `vtrain local` of a `trainer.build` job in `vtrain init`'s layout broke when its log was
written into the trainer folder (`vtrain local vtrain.yaml > run.log`): the image was planned from one state of
the folder and built from another (the log had grown), so the request named an image that was never built, and
the error blamed docker and `trainer.container`, which the job does not use. The files are now read once: the
plan's selection (each file's size and hash, `Artifacts.selection`) names the image and is what its trainer
layer is built from; a file that changed under it is one line naming the file; vtrain's own output is never a
trainer file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import REPO
from vtrain.cli import cli
from vtrain.errors import PackagingError
from vtrain.jobfile.artifacts import plan_artifacts
from vtrain.jobfile.load import load_config
from vtrain.trainer.image.layers import trainer_layer
from vtrain.trainer.packaging import scan_package

BUILD = """  image: tf-cpu.2-17
  build:
    repository: us-central1-docker.pkg.dev/my-project/train/demo
    dependencies: false"""


def _init(tmp_path: Path) -> Path:
    """`vtrain init`'s layout (the job file in the trainer folder, `package: .`) with a `trainer.build` and one
    replica whose trainer prints a line."""
    done = CliRunner().invoke(cli, ["init", str(tmp_path / "demo")])
    assert done.exit_code == 0, done.output
    demo = tmp_path / "demo"
    job = demo / "vtrain.yaml"
    text = job.read_text()
    assert "  image: tf-cpu.2-17" in text and "workers: {replicas: 1}" in text
    text = text.replace("  image: tf-cpu.2-17", BUILD).replace("workers: {replicas: 1}", "workers: {replicas: 0}")
    job.write_text(text)
    (demo / "trainer" / "task.py").write_text("print('trained from the image')\n")
    return demo


@pytest.mark.slow
def test_local_with_its_log_redirected_into_the_trainer_folder_runs_the_image_it_names(tmp_path: Path,
                                                                                       cache: Path) -> None:
    demo = _init(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "VTRAIN_CACHE_DIR": str(cache),
           "HOME": str(tmp_path)}
    images = []
    for _ in range(2):  # twice: the image (its tag, its unpacked tree) is the same, the log left out of it
        with open(demo / "run.log", "w") as log:  # `vtrain local vtrain.yaml > run.log 2>&1`
            done = subprocess.run([sys.executable, "-m", "vtrain", "local", "vtrain.yaml", "--plain",
                                   "--containers", "never"], cwd=demo, stdout=log, stderr=subprocess.STDOUT,
                                  env=env, timeout=300)
        said = (demo / "run.log").read_text()
        assert done.returncode == 0, said
        assert "[chief-0] trained from the image" in said and "JOB_STATE_SUCCEEDED" in said
        assert f"trainer package {demo}: left out run.log: this vtrain's own output" in said
        assert "docker cannot run" not in said and "Traceback" not in said
        images += [line.split(": its layers")[0] for line in said.splitlines() if ": its layers unpacked in" in line]
    assert len(images) == 2 and images[0] == images[1]  # one tag: the log is not in it


def test_a_file_that_changes_after_the_plan_is_one_line_naming_it(tmp_path: Path) -> None:
    demo = _init(tmp_path)
    config = load_config(demo / "vtrain.yaml", target="local")
    plan = plan_artifacts(config)
    assert plan.selection is not None and "trainer/task.py" in plan.selection.states
    (demo / "trainer" / "task.py").write_text("print('rewritten meanwhile')\n")
    from vtrain.local.runner import prepare_images

    with pytest.raises(PackagingError) as err:
        prepare_images(config, tmp_path / "cache", False, lambda text: None, "never", plan)
    assert str(err.value) == (
        f"trainer file trainer/task.py in {demo} changed while vtrain was building from it (its first 32 bytes "
        "are not the ones the image's name was hashed from): is something writing into the trainer folder, such as "
        "a log (`vtrain local vtrain.yaml | tee run.log`)? Write it elsewhere, or list it in .vtrainignore, and run "
        "again")


def test_the_layer_is_what_the_plan_read_whatever_the_folder_does_meanwhile(tmp_path: Path) -> None:
    demo = _init(tmp_path)
    (demo / "notes.log").write_text("first line\n")
    scan = scan_package(demo)
    before = trainer_layer(scan, tmp_path / "one")
    with open(demo / "notes.log", "a") as log:  # a log appended to: the layer takes its planned bytes
        log.write("a line written during the build\n")
    assert trainer_layer(scan, tmp_path / "two").digest == before.digest
    (demo / "notes.log").write_text("other\n")  # shorter than planned: cut
    with pytest.raises(PackagingError, match="trainer file notes.log in .* changed while vtrain was building"):
        trainer_layer(scan, tmp_path / "three")
    (demo / "notes.log").write_text("FIRST LINE\n")  # the same size, other bytes
    with pytest.raises(PackagingError, match="trainer file notes.log in .* changed while vtrain was building"):
        trainer_layer(scan, tmp_path / "four")


def test_a_plan_and_a_build_share_one_read_of_the_folder(tmp_path: Path) -> None:
    """The names `render` shows and what `local`, `package` and `submit` build come from one selection: its
    states are what hashing read, file by file."""
    demo = _init(tmp_path)
    config = load_config(demo / "vtrain.yaml", target="local")
    plan = plan_artifacts(config)
    assert plan.selection is not None
    assert sorted(plan.selection.states) == plan.selection.files
    assert plan.selection.states["trainer/task.py"][0] == os.path.getsize(demo / "trainer" / "task.py")
    assert plan == plan_artifacts(config)  # the selection is not part of what an Artifacts is equal by
