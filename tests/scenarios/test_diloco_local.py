"""`vtrain local` runs a DiLoCo job end to end: the syncer on pool 0, two custom-loop learners (real TF).

The learners train alone, exchange every 10 steps, end with the same global model (equal weights.json
checksums); the first learner writes the model, the syncer its checkpoint and summary. A learner
SIGKILLed mid-run is restarted in place by the supervisor (Vertex's policy) and rejoins with the
global model; the syncer SIGKILLed at its 3rd outer step is restarted, resumes from its checkpoint and
loses no round; tests/diloco/test_diloco_service.py covers the syncer's side of every fault at the service level.
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
               fault: str | None = None) -> tuple[Any, str]:
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
                    faults=[parse_fault(fault)] if fault else ())
    assert job.wait(600) == SUCCEEDED, out.getvalue()[-4000:]
    return job, out.getvalue()


def weights(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """weights.json of the first learner (the model) and of the second (its scratch copy)."""
    base = tmp_path / "out"
    return (json.loads((base / "model" / "weights.json").read_text()),
            json.loads((base / "workertemp" / "worker-1" / "weights.json").read_text()))


def syncer_summary(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "out" / "checkpoints" / "diloco" / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize(("template", "extra"), [("custom-loop", ""), ("keras", ", overlap: true")])
def test_a_diloco_job_runs_locally_and_learners_end_equal(tmp_path: Path, cache: Path, template: str,
                                                          extra: str) -> None:
    # The Keras template with overlap: merges applied inside model.fit between batches, on real tf.Variables.
    job, out = run_diloco(tmp_path, cache, template, "--epochs=2, --steps-per-epoch=20", extra=extra)
    lead, other = weights(tmp_path)
    assert lead["is_chief"] and lead["strategy"] == "diloco"
    assert set(job.summary["replicas"].values()) == {0}  # the syncer outlived every learner: none was stopped
    assert lead["sha256"] == other["sha256"]  # every learner ends with the global model
    summary = syncer_summary(tmp_path)
    assert summary["rounds"] == [4] and summary["learners"] == {"workerpool1-0": 4, "workerpool1-1": 4}
    assert (tmp_path / "out" / "checkpoints" / "diloco" / "syncer.npz").is_file()
    if template == "custom-loop":
        assert (tmp_path / "out" / "checkpoints" / "steps" / "worker-0").is_dir()  # each learner keeps its own
    else:
        # overlap was on (how many merges came in between batches depends on the machine's load)
        assert re.search(r"workerpool1-0: 40 steps, rounds \[4\], .* \d+ merge\(s\) applied while training", out)


@pytest.mark.slow
def test_a_killed_learner_is_restarted_and_rejoins(tmp_path: Path, cache: Path) -> None:
    # 200 steps (~2 s): long enough that the launcher sees step 55 before the learner is done
    job, _ = run_diloco(tmp_path, cache, "custom-loop", "--epochs=2, --steps-per-epoch=100, --checkpoint-every=10",
                        fault="worker-1:kill@step:55")
    assert job.summary["restarts"]["restarts"].get("worker-1") == 1  # restarted in place, once
    assert not job.summary["restarts"]["restarts"].get("chief-0")  # the syncer merged around it
    lead, other = weights(tmp_path)
    assert lead["sha256"] == other["sha256"]  # the restarted learner rejoined: both end with the global model
    assert set(syncer_summary(tmp_path)["learners"]) == {"workerpool1-0", "workerpool1-1"}


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "every"), [("kill", "0s"), ("preempt", "60s")])
def test_a_killed_or_preempted_syncer_is_restarted_and_resumes_from_its_checkpoint(tmp_path: Path, cache: Path,
                                                                                   fault: str, every: str) -> None:
    # kill with checkpoint_every 0: a checkpoint after every merge, and the syncer reports an outer step
    # only once it is checkpointed, so a SIGKILL at its 3rd merge can cost no round. preempt with the
    # default 60 s: no periodic checkpoint is due, the SIGTERM handler writes one on the way out.
    job, _ = run_diloco(tmp_path, cache, "custom-loop", "--epochs=2, --steps-per-epoch=100",
                        extra=f", checkpoint_every: {every}", fault=f"chief-0:{fault}@step:3")
    restarts = job.summary["restarts"]
    assert restarts["restarts"].get("chief-0") == 1, restarts
    assert not restarts["restarts"].get("worker-0") and not restarts["restarts"].get("worker-1")
    (recovery,) = [r for r in restarts["recoveries"] if r["replica"] == "chief-0"]
    assert recovery["resumed_at_step"] >= 4 and recovery["steps_redone"] == 0  # no merged round lost
    summary = syncer_summary(tmp_path)
    assert summary["resumed_from"][0] >= 3
    # 200 steps / H=10 = 20 rounds: the learners' in-flight deltas are sent again to the resumed syncer;
    # at most the one merge between the kill's trigger and the SIGKILL itself (not checkpointed) is lost.
    assert summary["rounds"][0] >= 19 and set(summary["learners"]) == {"workerpool1-0", "workerpool1-1"}
    lead, other = weights(tmp_path)
    assert lead["sha256"] == other["sha256"]  # the learners reconnected and end with the resumed global model


@pytest.mark.slow
def test_a_keras_learner_killed_mid_fit_restores_its_backup_then_rejoins_with_the_global_model(
    tmp_path: Path, cache: Path
) -> None:
    # The Keras template: BackupAndRestore first, then the DiLoCo callback, whose join replaces the restored
    # (stale) local weights with the syncer's global model.
    job, out = run_diloco(tmp_path, cache, "keras", "--epochs=2, --steps-per-epoch=60, --backup-every=10",
                          fault="worker-1:kill@step:45")
    restarts = job.summary["restarts"]
    assert restarts["restarts"].get("worker-1") == 1 and not restarts["restarts"].get("chief-0"), restarts
    (recovery,) = [r for r in restarts["recoveries"] if r["replica"] == "worker-1"]
    assert recovery["resumed_at_step"] > 40  # from its step-40 backup (or later), not from scratch
    assert "workerpool1-1 rejoined" in out
    lead, other = weights(tmp_path)
    assert lead["sha256"] == other["sha256"]  # both end with the global model
