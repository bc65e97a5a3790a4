"""`vtrain local` runs a DiLoCo job end to end: the syncer on pool 0, two custom-loop learners (real TF).

The learners train alone, exchange every 10 steps, end with the same global model (equal weights.json
checksums); the first learner writes the model, the syncer its checkpoint and summary. A learner
SIGKILLed mid-run is restarted in place by the supervisor (Vertex's policy) and rejoins with the
global model; the syncer SIGKILLed or preempted at its 3rd outer step is restarted, resumes from its
checkpoint and loses no round; tests/diloco/test_diloco_service.py covers the syncer's side of every fault
at the service level.

Four jobs, ten TensorFlow learner starts (each ~10 CPU-s here): the two fault-free runs (one per template),
whose exact round counts no fault may blur, and two runs with a fault on a learner and one on the syncer,
one fault after the other, each fault's restart counted exactly (a fault fires once, so a restart one fault
caused elsewhere would show as a second).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write_job
from vtrain.handle import SUCCEEDED
from vtrain.local.faults import parse_fault
from vtrain.local.runner import run_local

REPO = Path(__file__).resolve().parents[2]


def run_diloco(tmp_path: Path, cache: Path, template: str, args: str, *, extra: str = "",
               faults: tuple[str, ...] = ()) -> tuple[Any, str]:
    """A 2-learner DiLoCo job of `template` through `vtrain local`, waited for; (job, its output)."""
    path = write_job(tmp_path, f"""
        name: diloco-{template}
        trainer:
          package: {REPO / "trainer_templates" / template}
          module: trainer.task
          args: [{args}]
        distribution_strategy: diloco
        diloco: {{inner_steps: 10, grace: 1s, straggler_timeout: 10s, registration_timeout: 120s{extra}}}
        cluster:
          chief: {{machine_type: n1-standard-4}}
          workers: {{replicas: 2}}
    """)
    out = io.StringIO()
    job = run_local(path, output_dir=tmp_path / "out", cache_dir=cache, out=out,
                    faults=[parse_fault(f) for f in faults])
    assert job.wait(600) == SUCCEEDED, out.getvalue()[-4000:]
    return job, out.getvalue()


def weights(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """weights.json of the first learner (the model) and of the second (its scratch copy)."""
    base = tmp_path / "out"
    return (json.loads((base / "model" / "weights.json").read_text()),
            json.loads((base / "workertemp" / "worker-1" / "weights.json").read_text()))


def syncer_summary(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "out" / "checkpoints" / "diloco" / "summary.json").read_text())


def run_fault_free(tmp_path: Path, cache: Path, template: str, extra: str = "") -> str:
    """A fault-free 40-step job of `template`: what every such run shows, asserted; its output."""
    job, out = run_diloco(tmp_path, cache, template, "--epochs=2, --steps-per-epoch=20", extra=extra)
    lead, other = weights(tmp_path)
    assert lead["is_chief"] and lead["strategy"] == "diloco"
    assert set(job.summary["replicas"].values()) == {0}  # the syncer outlived every learner: none was stopped
    assert lead["sha256"] == other["sha256"]  # every learner ends with the global model
    summary = syncer_summary(tmp_path)
    assert summary["rounds"] == [4] and summary["learners"] == {"workerpool1-0": 4, "workerpool1-1": 4}
    assert (tmp_path / "out" / "checkpoints" / "diloco" / "syncer.npz").is_file()
    return out


def assert_restarted_only_where_faulted(job: Any) -> dict[str, Any]:
    """The job's restarts: the syncer (chief-0) and worker-1 once each, for their own fault; worker-0 never.

    Each fault fires once, so a restart one fault caused in another replica shows as a second restart:
    the syncer merged around the killed learner (its one restart is its own fault, nothing more) and the
    learners reconnected to the restarted syncer (worker-1's one restart is its own kill)."""
    restarts = job.summary["restarts"]
    assert restarts["restarts"].get("chief-0") == 1, restarts
    assert restarts["restarts"].get("worker-1") == 1, restarts  # restarted in place, once
    assert not restarts["restarts"].get("worker-0"), restarts
    return dict(restarts)


def assert_syncer_resumed_from_its_checkpoint(restarts: dict[str, Any], tmp_path: Path, rounds: int) -> None:
    """The syncer, faulted at its 3rd outer step, resumed from its checkpoint, lost no merged round and
    merged on to the end (`rounds` of H steps: at most the one merge between the fault's trigger and the
    signal itself is not checkpointed; a learner that lags after its own restart only adds rounds)."""
    (recovery,) = [r for r in restarts["recoveries"] if r["replica"] == "chief-0"]
    assert recovery["resumed_at_step"] >= 4 and recovery["steps_redone"] == 0  # no merged round lost
    summary = syncer_summary(tmp_path)
    assert summary["resumed_from"][0] >= 3
    assert summary["rounds"][0] >= rounds - 1 and set(summary["learners"]) == {"workerpool1-0", "workerpool1-1"}
    lead, other = weights(tmp_path)
    # the learners reconnected, the killed one rejoined: both end with the resumed global model
    assert lead["sha256"] == other["sha256"]


@pytest.mark.slow
def test_a_custom_loop_diloco_job_runs_locally_and_learners_end_equal(tmp_path: Path, cache: Path) -> None:
    run_fault_free(tmp_path, cache, "custom-loop")
    assert (tmp_path / "out" / "checkpoints" / "steps" / "worker-0").is_dir()  # each learner keeps its own


@pytest.mark.slow
def test_a_killed_learner_is_restarted_and_rejoins_and_a_killed_syncer_resumes_from_its_checkpoint(
    tmp_path: Path, cache: Path
) -> None:
    # Two faults, one job: the syncer SIGKILLed at its 3rd outer step (~ the learners' step 30), worker-1 at its
    # step 55, which it reaches only after the restarted syncer merged its 5th round: always in that order.
    # The syncer with checkpoint_every 0: a checkpoint after every merge, and it reports an outer step only
    # once it is checkpointed, so a SIGKILL at its 3rd merge can cost no round. 200 steps (~2 s): long enough
    # that the launcher sees step 55 before the learner is done.
    job, out = run_diloco(tmp_path, cache, "custom-loop", "--epochs=2, --steps-per-epoch=100, --checkpoint-every=10",
                          extra=", checkpoint_every: 0s", faults=("chief-0:kill@step:3", "worker-1:kill@step:55"))
    restarts = assert_restarted_only_where_faulted(job)
    assert_syncer_resumed_from_its_checkpoint(restarts, tmp_path, rounds=200 // 10)
    # the killed learner rejoined the syncer it had registered with (learners that reconnect to a restarted
    # syncer register anew); then, the syncer summary's learners, weights equal: asserted above
    assert "workerpool1-1 rejoined" in out


@pytest.mark.slow
def test_a_keras_diloco_job_with_overlap_runs_locally_and_learners_end_equal(tmp_path: Path, cache: Path) -> None:
    # The Keras template with overlap: merges applied inside model.fit between batches, on real tf.Variables.
    out = run_fault_free(tmp_path, cache, "keras", extra=", overlap: true")
    # overlap was on (how many merges came in between batches depends on the machine's load)
    assert re.search(r"workerpool1-0: 40 steps, rounds \[4\], .* \d+ merge\(s\) applied while training", out)


@pytest.mark.slow
def test_a_keras_learner_killed_mid_fit_restores_its_backup_then_rejoins_and_a_preempted_syncer_resumes(
    tmp_path: Path, cache: Path
) -> None:
    # The Keras template: BackupAndRestore first, then the DiLoCo callback, whose join replaces the restored
    # (stale) local weights with the syncer's global model. The same job preempts the syncer at its 3rd outer
    # step with the default checkpoint_every (60 s): no periodic checkpoint is due, the SIGTERM handler writes
    # one on the way out. worker-1 reaches step 45 only after the restarted syncer merged its 4th round.
    job, out = run_diloco(tmp_path, cache, "keras", "--epochs=2, --steps-per-epoch=60, --backup-every=10",
                          faults=("chief-0:preempt@step:3", "worker-1:kill@step:45"))
    restarts = assert_restarted_only_where_faulted(job)
    assert_syncer_resumed_from_its_checkpoint(restarts, tmp_path, rounds=120 // 10)
    (recovery,) = [r for r in restarts["recoveries"] if r["replica"] == "worker-1"]
    assert recovery["resumed_at_step"] > 40  # from its step-40 backup (or later), not from scratch
    assert "workerpool1-1 rejoined" in out
