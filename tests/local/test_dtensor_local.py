"""`vtrain local` for a DTensor job (issue 22): each chief/worker replica is told how many logical CPU
devices its part of the mesh needs (VTRAIN_LOCAL_DEVICES); the slow part runs the model-parallel template
as 2 replicas x 2 CPUs through `vtrain local`, fault-free and with a replica killed mid-run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    DTENSOR_HIDDEN,
    dtensor_fault_free,
    dtensor_local_run,
    dtensor_records,
    write_job,
)
from tests.helpers import model_parallel_job as job_file
from vtrain.errors import UsageError
from vtrain.jobfile.load import load_config
from vtrain.local import env as localenv
from vtrain.local.runner import build_procs
from vtrain.request.custom_job import build_job_dict

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "trainer_templates" / "model-parallel"


def job_dict(tmp_path: Path, mesh: str, workers: int, extra: str = "") -> dict[str, Any]:
    config = load_config(job_file(tmp_path, mesh, workers, extra=extra), target="local")
    return build_job_dict(config, artifacts=["file:///p/t.tar.gz"])


def test_each_replica_is_told_its_share_of_the_mesh(tmp_path: Path) -> None:
    plan = localenv.plan(job_dict(tmp_path, "{batch: 2, model: 2}", 1))
    assert localenv.dtensor_devices(plan) == 2
    assert plan.notices[-1] == ("dtensor: mesh batch=2,model=2 over 2 replica(s): each makes 2 logical CPU "
                                "device(s) (VTRAIN_LOCAL_DEVICES=2) unless it is given GPUs")
    procs = build_procs(plan, python="python3", venv=None, output_dir=tmp_path / "out", run_dir=tmp_path / "run",
                        job_id="1", host_env={"VTRAIN_LOCAL_DEVICES": "7"}, gpus={})  # fmt: skip
    by_label = {p.replica.label: p.env for p in procs}
    assert by_label["chief-0"]["VTRAIN_LOCAL_DEVICES"] == by_label["worker-0"]["VTRAIN_LOCAL_DEVICES"] == "2"
    assert by_label["chief-0"]["VTRAIN_DTENSOR_MESH"] == "batch=2,model=2"
    assert by_label["evaluator-0"].get("VTRAIN_LOCAL_DEVICES") == "7"  # not a client: the host's value


def test_the_jobs_own_local_devices_win(tmp_path: Path) -> None:
    job = job_dict(tmp_path, "{batch: 2, model: 2}", 1)
    for pool in filter(None, job["jobSpec"]["workerPoolSpecs"]):
        pool["pythonPackageSpec"]["env"].append({"name": "VTRAIN_LOCAL_DEVICES", "value": "4"})
    plan = localenv.plan(job)
    procs = build_procs(plan, python="python3", venv=None, output_dir=tmp_path / "out", run_dir=tmp_path / "run",
                        job_id="1", host_env={}, gpus={})  # fmt: skip
    assert {p.env["VTRAIN_LOCAL_DEVICES"] for p in procs} == {"4"}


def test_a_shrunk_cluster_keeps_the_mesh_or_is_refused(tmp_path: Path) -> None:
    job = job_dict(tmp_path, "{batch: 4, model: 2}", 3)  # 4 clients x 2
    shrunk = localenv.plan(job, max_replicas=3)  # chief + 1 worker + evaluator: 2 clients x 4
    assert localenv.dtensor_devices(shrunk) == 4
    with pytest.raises(UsageError, match=r"mesh batch=4,model=2 \(8 devices\) cannot be split over the 3 "
                                         r"chief/worker replica\(s\) this run starts; choose --max-replicas"):
        localenv.plan(job, max_replicas=4)


def test_other_jobs_get_no_local_devices(tmp_path: Path) -> None:
    path = write_job(tmp_path, f"""
        name: plain
        trainer: {{package: {TEMPLATE}, module: trainer.task}}
        cluster: {{chief: {{machine_type: n1-standard-4}}}}
    """)
    plan = localenv.plan(build_job_dict(load_config(path, target="local"), artifacts=["file:///p/t.tar.gz"]))
    assert localenv.dtensor_devices(plan) is None and not plan.notices


# --------------------------------------------------------------------------- real runs (slow)

@pytest.fixture(scope="module")
def fault_free(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The fault-free run (tests.helpers.DTENSOR_ARGS: 8 steps, a checkpoint every 3), made once per test run;
    tests/runtime/test_dtensor.py reads the same run as its 2-client reference."""
    return dtensor_records(dtensor_fault_free(tmp_path_factory))


@pytest.mark.slow
def test_a_dtensor_job_runs_through_vtrain_local(fault_free: list[dict[str, Any]]) -> None:
    chief, worker = fault_free
    assert (chief["client"], worker["client"], chief["mesh"]) == (0, 1, "batch=2,model=2")
    assert chief["sha256"] == worker["sha256"] and len(chief["losses"]) == 8
    for record in (chief, worker):  # 2 logical CPUs each, each holding half of the block's kernels
        assert record["shard_shapes"]["w1"] == [[8, DTENSOR_HIDDEN // 2]] * 2 and len(record["device_bytes"]) == 2


@pytest.mark.slow
@pytest.mark.alone  # the kill, sent when step 4 is reported, must land before the 8th (last) step: a busy second
# worker delays the launcher's poll past it (seen: resumed from 8 while other jobs shared the two cores)
def test_a_killed_replica_restarts_the_job_from_the_sharded_checkpoint(
    tmp_path: Path, cache: Path, fault_free: list[dict[str, Any]]
) -> None:
    job, out, (chief, worker) = dtensor_local_run(tmp_path, cache, "worker-0:kill@step:4",
                                                  extra="scheduling: {restart_job_on_worker_restart: true}")
    assert job.summary["restarts"]["restarts"] == {"chief-0": 1, "worker-0": 1}  # the whole job, as Vertex
    # A checkpoint every 3 steps; the kill is sent when step 4 is reported, and a loaded machine may run a
    # step or two more first: the job resumes from a complete checkpoint before the 8th (last) step.
    assert chief["resumed_from"] == worker["resumed_from"] and chief["resumed_from"] in (3, 6)
    assert chief["sha256"] == worker["sha256"] == fault_free[0]["sha256"]  # the same model as fault-free
    assert chief["losses"][-1] == pytest.approx(fault_free[0]["losses"][-1], rel=1e-6)
    assert "resumed from step" in out
