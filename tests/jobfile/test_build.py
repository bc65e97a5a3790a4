"""`trainer.build` (issue 23): what validate refuses and warns about, with positions, and the request it
makes (containerSpec with REPOSITORY:<content hash>, planned offline, deterministic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import assert_equals_real_proto, planned, write_job
from tests.trainer.image_helpers import make_trainer
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.load import load_config
from vtrain.request.build import build_request

REPO = "us-central1-docker.pkg.dev/my-proj/train/demo"


def _job(tmp_path: Path, build: str = f"    repository: {REPO}\n", *, trainer: str = "  package: t\n",
         extra: str = "", region: str = "us-central1") -> Path:
    make_trainer(tmp_path / "t")
    return write_job(tmp_path, f"name: demo\nregion: {region}\n{extra}trainer:\n{trainer}  module: trainer.task\n"
                               f"  build:\n{build}cluster:\n  chief: {{machine_type: n1-standard-4}}\n"
                               "  workers: {replicas: 1, machine_type: n1-standard-8, accelerator: t4, "
                               "accelerator_count: 1}\n")


def _problems(path: Path) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return info.value.problems


@pytest.mark.slow
def test_a_build_job_needs_no_staging_bucket_and_runs_the_image_in_every_pool(tmp_path: Path) -> None:
    config = load_config(_job(tmp_path))
    body = build_request(*planned(config)).body
    assert_equals_real_proto(body)
    chief, workers = body["jobSpec"]["workerPoolSpecs"]
    assert "pythonPackageSpec" not in chief and "pythonPackageSpec" not in workers
    # tf.2-17 picks the base by hardware, as for packages: a CPU image for the chief, a GPU one for the worker
    cpu, gpu = chief["containerSpec"]["imageUri"], workers["containerSpec"]["imageUri"]
    assert cpu.startswith(f"{REPO}:") and gpu.startswith(f"{REPO}:") and cpu != gpu
    assert chief["containerSpec"]["command"] == ["python3", "-m", "trainer.task"]
    assert build_request(*planned(load_config(_job(tmp_path)))).body == body  # deterministic


def test_the_tag_follows_the_trainers_files_and_the_requirements(tmp_path: Path) -> None:
    def image() -> str:
        return build_request(*planned(load_config(tmp_path / "job.yaml"))).body["jobSpec"]["workerPoolSpecs"][0][
            "containerSpec"]["imageUri"]

    _job(tmp_path, f"    repository: {REPO}\n    requirements: reqs.txt\n")
    (tmp_path / "reqs.txt").write_text("tinyreq==1.0  # pinned\n\n")
    first = image()
    (tmp_path / "reqs.txt").write_text("tinyreq==1.1\n")
    second = image()
    (tmp_path / "t" / "trainer" / "task.py").write_text("print('changed')\n")
    third = image()
    assert len({first, second, third}) == 3
    (tmp_path / "t" / "trainer" / "task.py").write_text("print('trained')\n")
    (tmp_path / "reqs.txt").write_text("tinyreq==1.0\n")
    assert image() == first  # the same inputs: the same tag (comments and blank lines are not inputs)


@pytest.mark.parametrize(("build", "path", "words"), [
    ("    repository: us-central1-docker.pkg.dev/p/r/demo:v1\n", "trainer.build.repository", "without a tag"),
    ("    repository: Us-Central1-docker.pkg.dev/p/R/demo\n", "trainer.build.repository",
     "it has upper-case letters: an image's registry host and repository are lower-case (only a tag may have upper "
     "case); try 'us-central1-docker.pkg.dev/p/r/demo'"),
    ("    repository: us-central1-docker.pkg.dev/p/r/de mo\n", "trainer.build.repository",
     "it has whitespace or a control character in it"),
    (f"    repository: {REPO}\n    requirements: [missing.txt]\n", "trainer.build.requirements[0]",
     "requirements file not found"),
    (f"    repository: {REPO}\n    requirements: ['numpy==1', '--pre']\n", "trainer.build.requirements[1]",
     "is a pip option"),
    (f"    repository: {REPO}\n    python_version: '3'\n", "trainer.build.python_version", "MAJOR.MINOR"),
    ("    requirements: [numpy]\n", "trainer.build", "missing required key 'repository'"),
])
def test_bad_build_settings_are_one_line_each_with_their_position(tmp_path: Path, build: str, path: str,
                                                                 words: str) -> None:
    problems = _problems(_job(tmp_path, build))
    found = [p for p in problems if p.path == path]
    assert found and words in found[0].message, problems
    assert found[0].line is not None and "\n" not in found[0].message


def test_a_requirements_file_line_that_an_image_cannot_hold_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = _job(tmp_path, f"    repository: {REPO}\n    requirements: reqs.txt\n")
    (tmp_path / "reqs.txt").write_text("numpy==1.26.4\n-e ./local\n")
    [problem] = _problems(path)
    assert problem.path == "trainer.build.requirements" and problem.line == 8
    assert f"{tmp_path / 'reqs.txt'}:2: -e is not supported" in problem.message


def test_build_is_exclusive_with_a_prebuilt_container_and_with_package_uris(tmp_path: Path) -> None:
    container = "  container: {image_uri: us-docker.pkg.dev/p/r/x:1}\n"
    problems = _problems(_job(tmp_path, trainer=container))
    assert any(p.path == "trainer.build" and "cannot go with trainer.container" in p.message for p in problems)
    uris = "  package_uris: [gs://b/t-1.tar.gz]\n"
    problems = _problems(_job(tmp_path, trainer=uris))
    assert any(p.path == "trainer.build" and "trainer.package_uris" in p.message for p in problems)


@pytest.mark.parametrize(("repository", "region", "warns"), [
    ("europe-west4-docker.pkg.dev/p/r/demo", "us-central1", True),
    ("us-central1-docker.pkg.dev/p/r/demo", "us-central1", False),
    ("us-docker.pkg.dev/p/r/demo", "us-central1", False),
    ("europe-docker.pkg.dev/p/r/demo", "us-central1", True),
    ("eu.gcr.io/p/demo", "europe-west4", False),
    ("127.0.0.1:5000/team/demo", "us-central1", False),
])
def test_a_repository_in_another_region_is_a_warning(tmp_path: Path, repository: str, region: str,
                                                     warns: bool) -> None:
    config = load_config(_job(tmp_path, f"    repository: {repository}\n", region=region))
    found = [w for w in config.warnings if w.path == "trainer.build.repository"]
    assert bool(found) == warns, config.warnings
    if warns:
        assert found[0].severity == "warning" and f"the job runs in {region}" in found[0].message
        assert found[0].line == 7


def test_any_image_reference_may_be_the_base_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    path = _job(tmp_path, f"    repository: {REPO}\n    python_version: '3.11'\n",
                trainer="  package: t\n  image: python:3.11-slim\n")
    config = load_config(path)
    assert not [w for w in config.warnings if w.path == "trainer.image"]  # no "use trainer.container" warning
    path = _job(tmp_path, trainer="  package: t\n  image: 'Bad Image!'\n")
    assert any(p.path == "trainer.image" and "base image" in p.message for p in _problems(path))


def test_a_python_version_the_prebuilt_base_does_not_have_warns(tmp_path: Path) -> None:
    config = load_config(_job(tmp_path, f"    repository: {REPO}\n    python_version: '3.12'\n"))
    [warning] = [w for w in config.warnings if w.path == "trainer.build.python_version"]
    assert "says Python 3.10, not 3.12" in warning.message


def test_a_pools_own_prebuilt_base_counts_for_the_python_version_warning(tmp_path: Path) -> None:
    """The warning reads each pool's base as the image is built on it: the pool's own `image` first."""
    make_trainer(tmp_path / "t")
    path = write_job(tmp_path, f"name: demo\nregion: us-central1\ntrainer:\n  package: t\n  module: trainer.task\n"
                               f"  image: python:3.11-slim\n  build:\n    repository: {REPO}\n"
                               "    python_version: '3.11'\ncluster:\n"
                               "  chief: {machine_type: n1-standard-4, image: tf-cpu.2-17}\n")
    [warning] = [w for w in load_config(path).warnings if w.path == "trainer.build.python_version"]
    assert "says Python 3.10, not 3.11" in warning.message


@pytest.mark.slow
def test_a_diloco_syncer_runs_vtrains_syncer_from_the_image_and_reducers_keep_googles(tmp_path: Path) -> None:
    from vtrain.constants import DILOCO_SYNCER_MODULE

    config = load_config(_job(tmp_path, extra="distribution_strategy: diloco\n"))
    pools = build_request(*planned(config)).body["jobSpec"]["workerPoolSpecs"]
    assert_equals_real_proto(build_request(*planned(config)).body)
    assert pools[0]["containerSpec"]["command"] == ["python3", "-m", DILOCO_SYNCER_MODULE]
    assert pools[1]["containerSpec"]["command"] == ["python3", "-m", "trainer.task"]
    gpu = ("  workers: {replicas: 2, machine_type: n1-standard-8, accelerator: t4, accelerator_count: 1}\n"
           "  reduction_server: {replicas: 1}\n")
    path = _job(tmp_path)
    path.write_text(path.read_text().replace(path.read_text().split("cluster:\n", 1)[1],
                                             "  chief: {machine_type: n1-standard-8, accelerator: t4, "
                                             "accelerator_count: 1}\n" + gpu))
    pools = build_request(*planned(load_config(path))).body["jobSpec"]["workerPoolSpecs"]
    assert "/reductionserver" in pools[2]["containerSpec"]["imageUri"]
    assert pools[0]["containerSpec"]["imageUri"] == pools[1]["containerSpec"]["imageUri"]


@pytest.mark.slow
def test_the_cli_renders_and_validates_a_build_job_offline(tmp_path: Path) -> None:
    import json

    import yaml
    from click.testing import CliRunner

    from vtrain.cli import cli

    path = _job(tmp_path, "    repository: europe-west4-docker.pkg.dev/p/r/demo\n")
    done = CliRunner().invoke(cli, ["render", str(path), "-o", "gcloud"])
    assert done.exit_code == 0, done.output
    spec = yaml.safe_load(done.stdout)
    assert spec["workerPoolSpecs"][0]["containerSpec"]["imageUri"].startswith("europe-west4-docker.pkg.dev/p/r/demo:")
    checked = CliRunner().invoke(cli, ["validate", str(path), "-o", "json"])
    assert checked.exit_code == 0, checked.output
    [warning] = [p for p in json.loads(checked.stdout) if p["path"] == "trainer.build.repository"]
    assert warning["severity"] == "warning" and warning["line"] == 7


@pytest.mark.slow
def test_a_tuning_study_of_a_build_job_runs_the_image_in_every_trial(tmp_path: Path) -> None:
    from vtrain.request.tuning_job import to_tuning_proto

    extra = ("tuning:\n  metric: {name: loss, goal: minimize}\n  parameters: {lr: {type: double, min: 0.001, "
             "max: 0.1}}\n  max_trials: 2\n")
    path = _job(tmp_path)
    path.write_text(path.read_text() + extra)
    body = build_request(*planned(load_config(path))).body
    to_tuning_proto(body)  # strict: the real HyperparameterTuningJob
    pools = body["trialJobSpec"]["workerPoolSpecs"]
    assert all(p["containerSpec"]["imageUri"].startswith(f"{REPO}:") for p in pools)
