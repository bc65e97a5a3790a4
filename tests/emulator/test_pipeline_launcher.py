"""`vtrain.pipelines.launcher_op` rehearsed: a pipeline run by KFP's local mode (SubprocessRunner) whose step runs
`vtrain submit --wait` against `vtrain emulator --run-jobs`, so the job's replicas are real processes."""

# No `from __future__ import annotations`: KFP reads the pipeline functions' annotations as types.
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is not installed")

from kfp import dsl, local  # noqa: E402

from tests.conftest import REPO  # noqa: E402
from tests.emulator.test_emulated_run import PROBE  # noqa: E402
from tests.helpers import MakeEmulator, write_job  # noqa: E402
from vtrain.emulator import Emulator  # noqa: E402
from vtrain.emulator.local_jobs import EmulatedRunner  # noqa: E402
from vtrain.errors import ConfigError  # noqa: E402
from vtrain.pipelines import launcher_op  # noqa: E402

PROJECT = "test-project"  # the bucket fixture (tests/emulator/conftest.py) names it


@pytest.fixture
def emu(make_emulator: MakeEmulator, tmp_path: Path, cache: Path, bucket: Any) -> Emulator:
    runner = EmulatedRunner(cache_dir=cache, output_root=tmp_path / "runs", kill_grace=2)
    return make_emulator(runner, point_at=PROJECT, pending_seconds=0.05, cancel_seconds=0.05)


@pytest.fixture
def kfp_local(tmp_path: Path) -> Path:
    """KFP's local mode in this Python environment (the step imports the vtrain under test)."""
    root = tmp_path / "pipeline-root"
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
    return root


def probe_job(tmp_path: Path, name: str = "probe-pipeline", cluster: str = "workers: {replicas: 1}") -> Path:
    return write_job(tmp_path, f"""
        name: {name}
        region: us-central1
        staging_bucket: gs://stage-bkt/s
        base_output_dir: gs://stage-bkt/out
        trainer:
          package: {PROBE}
          module: trainer.task
          image: tf-cpu.2-17
          args: [--steps, chief-0, --count, "3", --step-seconds, "0"]
        cluster:
          chief: {{machine_type: n1-standard-4}}
          {cluster}
        scheduling: {{disable_retries: true}}
        """, f"{name}.yaml")


@pytest.mark.slow
def test_a_launcher_step_runs_the_job_and_its_parameter_reaches_the_pools(
        tmp_path: Path, emu: Emulator, kfp_local: Path, capfd: pytest.CaptureFixture[str]) -> None:
    job_file = probe_job(tmp_path)

    @dsl.pipeline(name="train")
    def pipeline(dump: str) -> dsl.Artifact:
        return launcher_op(job_file, ["--dump", dump]).outputs["model_dir"]

    dump = tmp_path / "seen"
    run = pipeline(dump=str(dump))
    assert run.output.uri == "gs://stage-bkt/out/model/"
    job_name = run.output.metadata["job"]
    assert re.fullmatch(r"projects/\d+/locations/us-central1/customJobs/\d+", job_name)
    # The parameter's value is in the submitted job's pools, and each replica ran with it.
    with urllib.request.urlopen(f"{emu.url}/v1/{job_name}", timeout=30) as answer:
        job = json.loads(answer.read())
    for pool in job["jobSpec"]["workerPoolSpecs"]:
        assert pool["pythonPackageSpec"]["args"] == [
            "--steps", "chief-0", "--count", "3", "--step-seconds", "0", "--dump", str(dump)]
    for replica in ("chief-0", "worker-0"):
        argv = json.loads((dump / f"{replica}.json").read_text())["argv"]
        assert argv[-2:] == ["--dump", str(dump)], argv
        assert argv[1:-2] == ["--steps", "chief-0", "--count", "3", "--step-seconds", "0"]
    log = capfd.readouterr()
    text = log.out + log.err
    assert re.search(r"\[chief-0\] probe chief-0 starting, pid \d+", text)  # the replicas' log is the step's
    assert re.search(r"\[vtrain\] progress [0-9:]+: chief-0 succeeded step 3; worker-0 succeeded", text)
    assert f"vtrain launcher: {job_name} SUCCEEDED; model directory gs://stage-bkt/out/model/" in text


@pytest.mark.slow
def test_a_job_file_mistake_fails_the_step_with_vtrains_line(
        tmp_path: Path, emu: Emulator, kfp_local: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The step checks the job file again when it runs (it may have changed since compiling)."""
    job_file = probe_job(tmp_path, name="probe-bad", cluster="")

    @dsl.pipeline(name="train")
    def pipeline(dump: str) -> dsl.Artifact:
        return launcher_op(job_file, ["--dump", dump]).outputs["model_dir"]

    job_file.write_text(job_file.read_text(encoding="utf-8").replace("n1-standard-4", "n1-standard-5"),
                        encoding="utf-8")  # broken after compiling: the step checks it again
    with pytest.raises(RuntimeError, match="FAILURE"):
        pipeline(dump=str(tmp_path / "seen"))
    text = "".join(capfd.readouterr())
    assert re.search(r"probe-bad\.yaml:\d+:\d+: cluster\.chief\.machine_type: .*n1-standard-5", text), text
    assert re.search(r"vtrain launcher: the step failed: \S*probe-bad\.yaml:\d+:\d+: cluster\.chief\.machine_type",
                     text), text
    assert not (tmp_path / "seen").exists()


def test_a_job_file_mistake_is_refused_at_compile_time(tmp_path: Path) -> None:
    bad = write_job(tmp_path, """
        name: bad
        trainer: {package_uris: [gs://my-bkt/t.tar.gz], module: trainer.task, image: tf-cpu.2-17}
        cluster: {chief: {machine_type: n1-standard-4}, workers: {replicas: -1}}
        """)
    with pytest.raises(ConfigError, match=r"job\.yaml:3:\d+: cluster\.workers\.replicas"):
        @dsl.pipeline(name="train")
        def pipeline() -> None:
            launcher_op(bad)


@pytest.mark.slow
def test_a_job_with_a_model_block_outputs_the_registered_model(
        tmp_path: Path, emu: Emulator, kfp_local: Path) -> None:
    """The keras template exports a SavedModel; the step's `model` output is a google.VertexModel naming it."""
    job_file = write_job(tmp_path, f"""
        name: keras-model
        region: us-central1
        staging_bucket: gs://stage-bkt/s
        base_output_dir: gs://stage-bkt/out
        trainer:
          package: {REPO / "trainer_templates" / "keras"}
          module: trainer.task
          image: tf-cpu.2-17
          args: [--epochs=1, --steps-per-epoch=2]
        cluster:
          chief: {{machine_type: n1-standard-4}}
        model: {{display_name: keras-classifier, serving_image: tf2-cpu.2-15}}
        """)

    from google_cloud_pipeline_components.types.artifact_types import VertexModel

    declared = []

    @dsl.pipeline(name="train")
    def pipeline(batch: str) -> VertexModel:
        task = launcher_op(job_file, ["--batch-size", batch])
        declared.append(task.component_spec.outputs["model"].type)
        return task.outputs["model"]

    run = pipeline(batch="8")
    model = run.output
    assert declared == ["google.VertexModel@0.0.1"]  # kfp.local hands pipeline outputs back as plain Artifacts
    name = model.metadata["resourceName"]
    assert re.fullmatch(r"projects/\d+/locations/us-central1/models/\d+@1", name), name
    assert model.uri == f"https://us-central1-aiplatform.googleapis.com/v1/{name}"


@pytest.mark.slow
def test_a_failing_job_fails_the_step_with_vtrains_exit_and_line(
        tmp_path: Path, emu: Emulator, kfp_local: Path, capfd: pytest.CaptureFixture[str]) -> None:
    job_file = probe_job(tmp_path, name="probe-raise", cluster="")

    @dsl.pipeline(name="train")
    def pipeline(who: str) -> dsl.Artifact:
        return launcher_op(job_file, ["--raise", who]).outputs["model_dir"]

    with pytest.raises(RuntimeError, match="FAILURE"):
        pipeline(who="chief-0")
    text = "".join(capfd.readouterr())
    assert re.search(r"vtrain launcher: the step failed: error: job projects/\d+/locations/us-central1/customJobs/\d+ "
                     r"ended JOB_STATE_FAILED: chief-0 exited 1", text), text
