"""A prebuilt-image job rehearses on the image's stack: its TensorFlow and Python, built once and shared.

The suite's other jobs run on this machine's TensorFlow (the autouse fixture sets VTRAIN_RUNTIME=host);
these opt in. They share one stack per TensorFlow version through the run's cache (tf-cpu.2-15 here:
the Estimator row; the quickstart's tf-cpu.2-17 in tests/docs/test_quickstart.py), built under the
stack's own lock whichever xdist worker asks first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import REPO
from vtrain.cli import cli
from vtrain.errors import UsageError
from vtrain.local.runtimes import CONTAINER, HOST, IMAGE, STACK, choose, executor_images
from vtrain.local.stacks import STACKS, find_python, prepare_stack, stack_for

ESTIMATOR = REPO / "tests" / "data" / "trainers" / "estimator"
PROBE = REPO / "tests" / "data" / "trainers" / "probe"
US = "us-docker.pkg.dev/vertex-ai/training"


def body(*images: str) -> dict[str, object]:
    pools = [{"replicaCount": "1", "pythonPackageSpec": {"executorImageUri": i, "pythonModule": "trainer.task"}}
             for i in images]
    return {"jobSpec": {"workerPoolSpecs": pools}}


# --------------------------------------------------------------------------- the one decision (pure)


def test_a_prebuilt_image_gets_its_stack_by_default_and_the_flag_or_variable_changes_it() -> None:
    job = body(f"{US}/tf-cpu.2-15.py310:latest")
    auto = choose(job, "auto", env={})
    assert auto.runtime == STACK and auto.stack is not None
    assert auto.stack.requirements == ["tensorflow-cpu==2.15.1", *STACKS["2-15"].pins] and auto.stack.python == "3.10"
    assert "the default for a prebuilt image" in auto.why and "TensorFlow 2.15.1, Python 3.10" in auto.why
    assert choose(job, "auto", env={"VTRAIN_RUNTIME": "host"}).why.startswith("VTRAIN_RUNTIME=host: this machine's")
    assert choose(job, "host", env={"VTRAIN_RUNTIME": "stack"}).runtime == HOST  # the flag wins over the variable
    assert choose(job, "image", env={}).runtime == IMAGE
    gpu = choose(body(f"{US}/tf-gpu.2-17.py310:latest"), gpu=True, env={})
    assert gpu.stack is not None and gpu.stack.requirements[0] == "tensorflow==2.17.1"
    assert choose(body(f"{US}/tf-gpu.2-17.py310:latest"), gpu=False, env={}).stack.requirements[0] \
        == "tensorflow-cpu==2.17.1"  # type: ignore[union-attr]


def test_what_has_no_stack_says_why_and_a_runtime_that_cannot_serve_is_refused() -> None:
    other = choose(body("europe-docker.pkg.dev/my/own-image:1"), env={})
    assert other.runtime == HOST and "not a prebuilt TensorFlow image" in other.why
    with pytest.raises(UsageError, match="no stack for europe-docker.pkg.dev/my/own-image:1"):
        choose(body("europe-docker.pkg.dev/my/own-image:1"), "stack", env={})
    containers = {"jobSpec": {"workerPoolSpecs": [{"containerSpec": {"imageUri": "x/y:1"}}]}}
    assert choose(containers, env={}).runtime == CONTAINER
    with pytest.raises(UsageError, match="applies to Python package pools"):
        choose(containers, "image", env={})
    with pytest.raises(UsageError, match="VTRAIN_RUNTIME='stck': one of auto, stack, image, host"):
        choose(body(f"{US}/tf-cpu.2-15.py310:latest"), env={"VTRAIN_RUNTIME": "stck"})
    assert executor_images(body("a", "b", "a")) == ["a", "b"]
    assert stack_for(f"{US}/tf-cpu.2-11.py310:latest") is None  # no row: older than vtrain's images


# --------------------------------------------------------------------------- the stack, built and reused


@pytest.fixture
def on_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VTRAIN_RUNTIME", raising=False)


def _estimator_job(tmp_path: Path) -> Path:
    job = tmp_path / "estimator.yaml"
    job.write_text(f"""name: estimator
region: us-central1
base_output_dir: {tmp_path / 'out'}
trainer:
  package: {ESTIMATOR}
  module: trainer.task
  image: tf-cpu.2-15
cluster:
  chief: {{machine_type: n1-standard-4}}
  workers: {{replicas: 1}}
  parameter_servers: {{replicas: 1}}
  evaluator: {{replicas: 1}}
""", encoding="utf-8")
    return job


@pytest.mark.slow
def test_the_estimator_row_rehearses_on_tf_2_15_and_succeeds_when_its_chief_does(
        tmp_path: Path, on_stack: None, cache: Path) -> None:
    """TensorFlow removed Estimator in 2.16: on this machine's TensorFlow (2.21) every replica died with `module
    'tensorflow' has no attribute 'estimator'`. On the image's stack the chief, worker, parameter server and
    evaluator train; the job ends when the chief does (the parameter server never exits by itself)."""
    result = CliRunner().invoke(cli, ["local", str(_estimator_job(tmp_path)), "--plain", "--timeout", "5m"])
    assert result.exit_code == 0, result.output
    assert "runtime: stack: the default for a prebuilt image: the image's stack, tf-cpu.2-15 (TensorFlow 2.15.1, " \
        "Python 3.10), TensorFlow's CPU build" in result.output
    assert "local results can differ" not in result.output  # the image's TensorFlow is the one that ran
    run = next((tmp_path / "out" / "vtrain-local").iterdir())
    summary = json.loads((run / "result.json").read_text())
    assert summary["state"] == "JOB_STATE_SUCCEEDED" and summary["replicas"]["chief-0"] == 0
    python, _ = find_python("3.10")
    minor = "3.10" if python is not None else f"{sys.version_info.major}.{sys.version_info.minor}"
    for label in ("chief-0", "worker-0", "ps-0", "evaluator-0"):
        said = (run / f"{label}.log").read_text()
        assert f"estimator replica {label}: TensorFlow 2.15.1, Python {minor}" in said, said[-2000:]
    # A second use downloads nothing: the stack is whole in the run's cache, under its lease.
    stack = stack_for(f"{US}/tf-cpu.2-15.py310:latest")
    assert stack is not None
    built, lease = prepare_stack(stack, cache)
    try:
        assert built.cached and built.downloaded_mb == 0 and built.venv.parent == cache / "envs"
    finally:
        lease.release()


@pytest.mark.slow
def test_the_emulator_installs_a_prebuilt_job_over_the_image_stack(tmp_path: Path, on_stack: None,
                                                                   cache: Path) -> None:
    """`vtrain emulator --run-jobs` (and so a tuning job's trials there) asks the same decision: the trainer's
    environment is layered over the image's stack, its Python the image's minor where this machine has one."""
    from vtrain.emulator.local_jobs import install_packages
    from vtrain.trainer.packaging import build_and_stage

    (tmp_path / "staged").mkdir()
    staged = build_and_stage(str(PROBE), str(tmp_path / "staged"), "trainer.task", progress=False)
    job = body(f"{US}/tf-cpu.2-15.py310:latest")
    job["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"] = [s.uri for s in staged]  # type: ignore[index]
    said: list[str] = []
    env, images = install_packages(job, cache, said.append)
    assert images == {}
    try:
        assert env.tensorflow == "2.15.1"
        probe = "import sys, importlib.metadata as m; print(sys.version_info[:2], m.version('tensorflow-cpu'))"
        out = subprocess.run([env.python, "-c", probe], capture_output=True, text=True, check=True).stdout
        python, _ = find_python("3.10")
        assert ("(3, 10)" if python else f"(3, {sys.version_info.minor})") in out and "2.15.1" in out
        assert any(line.startswith("runtime: stack:") for line in said), said
    finally:
        if env.lease is not None:
            env.lease.release()


def test_offline_with_nothing_cached_is_one_line_that_names_the_stack(tmp_path: Path, on_stack: None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # uv's cache empty...
    monkeypatch.setenv("UV_OFFLINE", "1")  # ...and no network: nothing can be had
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    job = _estimator_job(tmp_path)
    job.write_text(job.read_text().replace("tf-cpu.2-15", "tf-cpu.2-13"), encoding="utf-8")
    result = CliRunner().invoke(cli, ["local", str(job), "--plain"])
    assert result.exit_code == 1, result.output
    error = [line for line in result.output.splitlines() if line.startswith("error")]
    assert len(error) == 1, result.output
    assert "cannot build the image's stack tf-cpu.2-13 (TensorFlow 2.13.1, Python 3.10) (tensorflow-cpu==2.13.1" \
        in error[0]
    assert "connect to PyPI once (it is kept for every later run), or run with --runtime host" in error[0]
    assert "Traceback" not in result.output
    assert not any((tmp_path / "cache" / "envs").glob("stack-*/bin"))  # nothing half-built is kept


def test_doctor_says_which_runtime_a_job_would_rehearse_on_and_why(tmp_path: Path, on_stack: None) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(_estimator_job(tmp_path).read_text().replace(f"base_output_dir: {tmp_path / 'out'}",
                   "base_output_dir: gs://my-bucket/out\nstaging_bucket: gs://my-bucket/staging"), encoding="utf-8")
    result = CliRunner().invoke(cli, ["doctor", str(job)])
    line = next(line for line in result.output.splitlines() if line.startswith("runtime"))
    assert line.startswith("runtime   stack: the default for a prebuilt image: the image's stack, tf-cpu.2-15 "
                           "(TensorFlow 2.15.1, Python 3.10), TensorFlow's CPU build, on this machine"), line
    python, where = find_python("3.10")
    assert (f"Python 3.10 from {where} ({python})" if python else "no Python 3.10 here") in line
    host = CliRunner().invoke(cli, ["doctor", str(job), "-o", "json"], env={"VTRAIN_RUNTIME": "host"})
    assert json.loads(host.stdout)["runtime"] == "host: VTRAIN_RUNTIME=host: this machine's Python and TensorFlow, " \
        "not the image's"
