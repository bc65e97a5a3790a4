"""Issue 32, "a pure request": what a job's trainer files name (package URIs, image tags) is planned by the
artifacts planner, and build_request only reads the value it is given: no file, no cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import write_job
from tests.trainer.image_helpers import make_trainer
from vtrain.jobfile.artifacts import STAND_IN_IMAGE, Artifacts, plan_artifacts
from vtrain.jobfile.load import load_config
from vtrain.request.build import build_request

PACKAGED = """\
name: pure
staging_bucket: gs://bkt/staging
trainer: {package: t, module: trainer.task, image: tf-cpu.2-17}
cluster: {chief: {machine_type: n1-standard-4}, workers: {replicas: 1}}
"""
BUILT = """\
name: pure
trainer:
  package: t
  module: trainer.task
  image: tf.2-17
  build: {repository: us-central1-docker.pkg.dev/p/r/demo, requirements: [reqs.txt]}
cluster:
  chief: {machine_type: n1-standard-4}
  workers: {replicas: 1, machine_type: n1-standard-8, accelerator: t4, accelerator_count: 1}
"""


def _pools(body: dict) -> list[dict]:
    return [p for p in body["jobSpec"]["workerPoolSpecs"] if p]


@pytest.mark.parametrize("text", [PACKAGED, BUILT], ids=["package", "build"])
def test_the_request_reads_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    make_trainer(tmp_path / "t")
    (tmp_path / "reqs.txt").write_text("tinyreq==1.0\n")
    config = load_config(write_job(tmp_path, text))
    artifacts = plan_artifacts(config)
    before = build_request(config, artifacts).body
    shutil.rmtree(tmp_path / "t")  # the folder and the requirements are gone: the request does not notice
    (tmp_path / "reqs.txt").unlink()
    assert build_request(config, artifacts).body == before
    names = [*artifacts.package_uris, *artifacts.images.values()]
    assert names and all(name in str(before) for name in names)
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("text", [PACKAGED, BUILT], ids=["package", "build"])
def test_a_job_that_ships_its_folder_needs_its_artifacts(tmp_path: Path, text: str) -> None:
    make_trainer(tmp_path / "t")
    (tmp_path / "reqs.txt").write_text("tinyreq==1.0\n")
    config = load_config(write_job(tmp_path, text))
    with pytest.raises(ValueError, match=r"named by its files: pass the planned artifacts "
                                         r"\(vtrain\.plan_artifacts\(config\)\)"):
        build_request(config)
    shutil.rmtree(tmp_path / "t")
    shape = build_request(config, Artifacts.stand_ins()).body  # replica labels: the shape, from no file
    assert len(_pools(shape)) == 2
    if "build" in text:
        assert {p["containerSpec"]["imageUri"] for p in _pools(shape)} == {STAND_IN_IMAGE}


def test_prebuilt_packages_need_nothing_planned(tmp_path: Path) -> None:
    config = load_config(write_job(tmp_path, PACKAGED.replace("package: t,", "package_uris: [gs://bkt/t.tar.gz],")))
    assert plan_artifacts(config) == Artifacts()
    body = build_request(config).body
    assert _pools(body)[0]["pythonPackageSpec"]["packageUris"] == ["gs://bkt/t.tar.gz"]


def test_an_image_planned_for_another_region_is_a_clear_error(tmp_path: Path) -> None:
    make_trainer(tmp_path / "t")
    (tmp_path / "reqs.txt").write_text("tinyreq==1.0\n")
    config = load_config(write_job(tmp_path, BUILT))
    with pytest.raises(KeyError, match="no image was planned on base europe-docker.pkg.dev/"):
        build_request(config, plan_artifacts(config), region="europe-west4")
    body = build_request(config, plan_artifacts(config, region="europe-west4"), region="europe-west4").body
    assert all(p["containerSpec"]["imageUri"].startswith("us-central1-docker.pkg.dev/p/r/demo:")
               for p in _pools(body))
