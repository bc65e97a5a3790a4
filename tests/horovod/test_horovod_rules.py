"""`distribution_strategy: horovod` in the job file (issue 34): the ring's rules, the runtime's decision,
and the warning for a trainer that still imports the real Horovod."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import planned
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.load import parse_config
from vtrain.jobfile.rules.horovod import horovod_imports
from vtrain.runtime.decision import choose_strategy

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "tests" / "data" / "trainers" / "horovod"
HEAD = """\
name: demo
trainer:
  container: {image_uri: us-docker.pkg.dev/my-proj/repo/trainer:1}
distribution_strategy: horovod
"""
RESTART = "scheduling: {restart_job_on_worker_restart: true}\n"


def parse(text: str) -> JobConfig:
    return parse_config(text, "job.yaml")


def errors(text: str) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        parse(text)
    return [p for p in info.value.problems if p.severity == "error"]


def test_a_ring_of_one_gpu_replicas_is_accepted_and_sent_to_the_replicas() -> None:
    from vtrain.request.custom_job import build_job_dict

    config = parse(HEAD + "cluster:\n  chief: {machine_type: a2-highgpu-1g}\n  workers: {replicas: 3}\n" + RESTART)
    assert not [w for w in config.warnings if w.severity == "error" or "horovod" in w.message]
    pools = build_job_dict(*planned(config))["jobSpec"]["workerPoolSpecs"]
    env = {e["name"]: e["value"] for e in pools[1]["containerSpec"]["env"]}
    assert env["VTRAIN_DISTRIBUTION_STRATEGY"] == "horovod"


def test_parameter_servers_and_reduction_server_have_no_place_in_the_ring() -> None:
    ps = errors(HEAD + "cluster:\n  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 1}\n"
                "  parameter_servers: {replicas: 1}\n" + RESTART)
    assert [p.path for p in ps] == ["distribution_strategy"]
    assert "parameter servers have no place in it; remove cluster.parameter_servers" in ps[0].message
    rs = errors(HEAD + "cluster:\n  chief: {machine_type: a2-highgpu-1g}\n  workers: {replicas: 1}\n"
                "  reduction_server: {replicas: 2}\n" + RESTART)
    assert [p.path for p in rs] == ["distribution_strategy"]
    assert "vtrain.horovod is not tested with it; remove cluster.reduction_server" in rs[0].message


def test_a_multi_gpu_replica_would_leave_gpus_idle() -> None:
    found = errors(HEAD + "cluster:\n  chief: {machine_type: a2-highgpu-4g}\n  workers: {replicas: 1}\n" + RESTART)
    assert {p.path for p in found} == {"cluster.chief.accelerator_count", "cluster.workers.accelerator_count"}
    chief = next(p for p in found if p.path.startswith("cluster.chief"))
    assert (chief.line, chief.message) == (6, "horovod runs one rank per GPU and a Vertex replica is one process, "
                                              "so 4 GPUs per replica would leave 3 idle; use 4x more replicas of a "
                                              "1-GPU machine instead")


def test_without_whole_job_restarts_a_warning_says_a_rank_cannot_rejoin() -> None:
    config = parse(HEAD + "cluster:\n  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 1}\n")
    (warning,) = [w for w in config.warnings if w.path == "scheduling.restart_job_on_worker_restart"]
    assert warning.severity == "warning" and "cannot rejoin the running ring" in warning.message
    alone = parse(HEAD + "cluster:\n  chief: {machine_type: n1-standard-4}\n")  # one rank: nothing to rejoin
    assert not [w for w in alone.warnings if w.path == "scheduling.restart_job_on_worker_restart"]


def test_an_evaluator_running_the_trainer_is_told_hvd_init_stops_there(tmp_path: Path) -> None:
    body = ("name: demo\ntrainer: {package_uris: [gs://bucket/t.tar.gz], module: trainer.task}\n"
            "distribution_strategy: horovod\n" + RESTART + "cluster:\n  chief: {machine_type: n1-standard-4}\n"
            "  workers: {replicas: 1}\n  evaluator: {}\n")
    (warning,) = [w for w in parse(body).warnings if w.path == "cluster.evaluator.module"]
    assert (warning.severity, warning.line) == ("warning", 8)
    assert "the evaluator is not a horovod rank, so the trainer's hvd.init() stops there" in warning.message
    own = body.replace("evaluator: {}", "evaluator: {module: trainer.evaluate}")
    assert not [w for w in parse(own).warnings if w.path == "cluster.evaluator.module"]


def test_the_import_scan_finds_each_form_and_skips_ours(tmp_path: Path) -> None:
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "a.py").write_text(
        "import os\nimport horovod.tensorflow.keras as hvd\n  from horovod.tensorflow import allreduce\n"
        "import vtrain.horovod.keras as hvd2\nimport horovodx\n# import horovod in a comment after code: x\n",
        encoding="utf-8")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "b.py").write_text("import horovod\n", encoding="utf-8")
    (tmp_path / "trainer" / "fifo.py").symlink_to("/dev/null")  # not a regular file: skipped
    assert horovod_imports(tmp_path) == [("trainer/a.py", 2, "horovod.tensorflow.keras"),
                                         ("trainer/a.py", 3, "horovod.tensorflow")]


def test_validate_warns_about_the_real_horovod_and_names_the_one_line_change(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from vtrain.cli import cli

    package = tmp_path / "examples"
    shutil.copytree(EXAMPLES, package)
    job = tmp_path / "job.yaml"
    job.write_text(f"name: demo\ntrainer: {{package: {package}, module: trainer.harness}}\n"
                   "staging_bucket: gs://bucket/staging\ncluster: {chief: {machine_type: n1-standard-4}}\n",
                   encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(job)])
    assert result.exit_code == 0, result.output
    assert f"{job}:2:20: warning: trainer.package: " in result.output
    assert ("trainer/keras_mnist.py:10 imports horovod.tensorflow.keras, which no Vertex image has and which does "
            "not build against current TensorFlow; import vtrain.horovod.keras instead (`import "
            "vtrain.horovod.keras as hvd`) and set distribution_strategy: horovod: see docs/guides/horovod.md"
            ) in result.output
    assert "trainer/tape_mnist.py:8 imports horovod.tensorflow, " in result.output
    for path in package.rglob("*.py"):  # after the one-line change: nothing to say
        path.write_text(path.read_text().replace("import horovod.", "import vtrain.horovod."), encoding="utf-8")
    assert "imports horovod" not in CliRunner().invoke(cli, ["validate", str(job)]).output


def test_the_runtime_decides_horovod_from_the_environment() -> None:
    tf_config = ('{"cluster": {"chief": ["h:1"], "worker": ["h:2", "h:3"]}, '
                 '"task": {"type": "worker", "index": 1}}')
    d = choose_strategy({"TF_CONFIG": tf_config, "VTRAIN_DISTRIBUTION_STRATEGY": "horovod"}, gpus=1, tpu=False)
    assert (d.strategy, d.num_workers, d.multi_worker) == ("horovod", 3, False)
    assert d.reason.startswith("Horovod rank of 3 (chief 0, then the workers)")


def test_estimate_counts_the_ring_and_says_reducers_need_a_port(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from vtrain.cli import cli
    from vtrain.estimate.jobs import estimate_hint

    job = tmp_path / "job.yaml"
    job.write_text(HEAD + "cluster:\n  chief: {machine_type: a2-highgpu-1g}\n  workers: {replicas: 3}\n" + RESTART,
                   encoding="utf-8")
    result = CliRunner().invoke(cli, ["estimate", str(job), "--params", "100M"])
    assert result.exit_code == 0, result.output
    assert "4 × a2-highgpu-1g (chief + workers), 1 GPUs each (4 ring ranks)" in result.output
    assert ("this job's horovod ranks run without Reduction Server (its ring column is theirs): the reducers need "
            "the script ported to MultiWorkerMirroredStrategy") in result.output
    assert estimate_hint(parse(job.read_text())) is None  # render offers no reducers to a horovod job
