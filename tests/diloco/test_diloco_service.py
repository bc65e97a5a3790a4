"""The DiLoCo syncer and learners as real processes on 127.0.0.1 (numpy learners: no TensorFlow).

What the fault rules promise, at the service level: a killed learner is merged around, a hung one
stalls a merge at most grace + straggler_timeout, a learner that never starts or a missing syncer
hits a deadline instead of hanging, the syncer resumes from its checkpoint, strangers are refused.
(The same faults through `vtrain local`'s restart policy wait for the supervisor to restart replicas.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import REPO
from vtrain.diloco import traffic
from vtrain.diloco.codec import fragments
from vtrain.local.ports import free_ports


class Job:
    def __init__(self, tmp: Path, learners: int, **settings: Any) -> None:
        self.tmp, self.learners = tmp, learners
        self.port = free_ports(1)[0]
        self.settings = {"inner_steps": 10, "grace": 0.5, "straggler_timeout": 2.0, "registration_timeout": 20.0,
                         "checkpoint_every": 0.0, **settings}
        self.procs: list[subprocess.Popen[bytes]] = []

    def env(self, task: tuple[str, int], token_job: str = "job-1") -> dict[str, str]:
        spec = {"cluster": {"workerpool0": [f"127.0.0.1:{self.port}"],
                            "workerpool1": [f"127.0.0.1:{9}" for _ in range(self.learners)]},
                "task": {"type": task[0], "index": task[1]}, "environment": "cloud"}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VTRAIN_", "CLUSTER_SPEC", "AIP_"))}
        env.update(CLUSTER_SPEC=json.dumps(spec), VTRAIN_DILOCO=json.dumps(self.settings), CLOUD_ML_JOB_ID=token_job,
                   AIP_CHECKPOINT_DIR=str(self.tmp / "ckpt"), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        return env

    def syncer(self, name: str = "syncer") -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([sys.executable, "-m", "vtrain.diloco"], env=self.env(("workerpool0", 0)),
                                stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        self.procs.append(proc)
        return proc

    def learner(self, index: int, *args: str, token_job: str = "job-1") -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"learner{index}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen([sys.executable, "-m", "tests.diloco_toy", "--seed", str(index), "--out",
                                 str(self.tmp / f"learner{index}.json"), *args],
                                env=self.env(("workerpool1", index), token_job), stdout=log, stderr=subprocess.STDOUT,
                                cwd=REPO)
        self.procs.append(proc)
        return proc

    def result(self, index: int) -> dict[str, Any]:
        return json.loads((self.tmp / f"learner{index}.json").read_text())

    def summary(self) -> dict[str, Any]:
        return json.loads((self.tmp / "ckpt" / "diloco" / "summary.json").read_text())

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def wait_for(self, name: str, text: str, limit: float = 60) -> None:
        end = time.monotonic() + limit
        while text not in self.log(name):
            assert time.monotonic() < end, f"{text!r} never appeared in {name}.log:\n{self.log(name)[-2000:]}"
            time.sleep(0.05)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def job_factory(tmp_path: Path) -> Any:
    made: list[Job] = []

    def make(learners: int, **settings: Any) -> Job:
        made.append(Job(tmp_path, learners, **settings))
        return made[-1]

    yield make
    for job in made:
        job.close()


@pytest.mark.slow
def test_learners_end_with_one_global_model_and_traffic_is_what_estimate_says(job_factory: Any) -> None:
    job = job_factory(3, compression="int8", fragments=2)
    syncer = job.syncer()
    learners = [job.learner(i, "--steps", "60") for i in range(3)]
    assert [p.wait(60) for p in learners] == [0, 0, 0]
    assert syncer.wait(60) == 0, job.log("syncer")
    results = [job.result(i) for i in range(3)]
    assert results[0]["final"] == results[1]["final"] == results[2]["final"]
    # 60 steps, a fragment every 5 (steps 5, 15, ... for fragment 0; 10, 20, ... for 1), then
    # finish() sends fragment 0's last 5 steps.
    assert results[0]["rounds"] == [7, 6]
    summary = job.summary()
    assert summary["merges"] == 13 and summary["rejected"] == 0
    # Non-trainable state is averaged: each toy learner drives `stat` towards its seed (0, 1, 2): mean 1.
    assert all(abs(v - 1.0) < 0.05 for v in results[0]["final"][2])
    sizes = [64, 1, 4]
    frag = [sum(traffic.encoded_size(sizes[i], "int8") for i in ix) for ix in fragments_of(sizes, 2)]
    measured = results[0]["traffic"]["delta_payload"]
    assert measured == 7 * frag[0] + 6 * frag[1]  # what the client sent is exactly what the formula counts
    sent = results[0]["traffic"]["sent"]
    assert sent >= measured and traffic.bytes_per_step(sizes, 10, "int8", 2)["up"] * 60 >= 6 * sum(frag)


def fragments_of(sizes: list[int], count: int) -> list[list[int]]:
    from vtrain.diloco.codec import TensorSpec

    return fragments([TensorSpec(str(i), "float32", (n,), True) for i, n in enumerate(sizes)], count)


@pytest.mark.slow
def test_with_overlap_learners_train_on_while_the_syncer_merges_and_lose_no_step(job_factory: Any) -> None:
    job = job_factory(3, overlap=True, fragments=2)
    syncer = job.syncer()
    learners = [job.learner(i, "--steps", "100", "--delay", "0.01") for i in range(3)]
    assert [p.wait(60) for p in learners] == [0, 0, 0]
    assert syncer.wait(60) == 0, job.log("syncer")
    results = [job.result(i) for i in range(3)]
    assert results[0]["final"] == results[1]["final"] == results[2]["final"]
    for r in results:
        # merges applied between steps rather than waited for: what overlap is for
        assert r["traffic"]["extra"].get("merged_while_training", 0) >= 5, r["traffic"]
        assert r["traffic"]["syncs"] == 20  # an exchange every 5 steps, none skipped
        # 10 exchanges of each fragment, then finish sends fragment 0's last 5 steps (in one merge or, on a
        # loaded machine where the learners' last deltas arrive apart, more)
        assert r["rounds"][1] == 10 and r["rounds"][0] >= 11
    # (that no step is lost or counted twice is the lone-learner test's exact check, below)
    assert job.summary()["merges"] == sum(results[0]["rounds"]) and job.summary()["rejected"] == 0


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.slow
def test_a_lone_learner_with_plain_averaging_follows_its_own_sgd_path(job_factory: Any, overlap: bool) -> None:
    # One learner, outer lr 1, no momentum: every merge gives back the parameters it sent. So its path
    # must be exactly local SGD: with overlap, the steps taken while a delta was in flight are kept
    # (a merge that replaced them would cost ~1 of every 5 steps) and none is counted twice.
    from tests.diloco_toy import TARGET, sgd_step

    job = job_factory(1, overlap=overlap, fragments=2, outer_momentum=0.0)
    syncer = job.syncer()
    learner = job.learner(0, "--steps", "100", "--delay", "0.01")
    assert learner.wait(60) == 0 and syncer.wait(60) == 0, job.log("syncer")
    rng = np.random.default_rng(0)
    w = rng.normal(size=64).astype(np.float32)
    rng.normal(size=1), rng.normal(size=4)
    for _ in range(100):
        w = sgd_step(w, rng)
    final = job.result(0)
    assert np.abs(np.array(final["final"][0]) - TARGET).mean() > 0.001  # not trivially at the target
    assert np.allclose(final["final"][0], w, rtol=0, atol=1e-5)
    assert (final["traffic"]["extra"].get("merged_while_training", 0) > 0) == overlap


@pytest.mark.slow
def test_a_killed_learner_is_merged_around_and_the_job_succeeds(job_factory: Any) -> None:
    # The syncer waits registration_timeout for the killed learner to rejoin before it ends: most of this test's
    # time. 10 s still gives three processes that start slowly on a loaded machine room to register.
    job = job_factory(3, registration_timeout=10.0)
    syncer = job.syncer()
    learners = [job.learner(i, "--steps", "100", "--delay", "0.01") for i in range(3)]
    job.wait_for("syncer", "fragment 0 round 2:")
    learners[2].send_signal(signal.SIGKILL)
    assert learners[0].wait(60) == 0 and learners[1].wait(60) == 0
    assert syncer.wait(60) == 0, job.log("syncer")
    assert "workerpool1-2 disconnected; merging without it" in job.log("syncer")
    summary = job.summary()
    assert summary["merges"] == 10
    assert summary["max_stall"] < 0.5 + 2.0  # never waited on the dead learner beyond grace + straggler_timeout
    assert job.result(0)["final"] == job.result(1)["final"]


@pytest.mark.slow
def test_a_hung_learner_stalls_one_merge_at_most_then_rejoins(job_factory: Any) -> None:
    job = job_factory(3, straggler_timeout=1.5)
    syncer = job.syncer()
    learners = [job.learner(i, "--steps", "80", "--delay", "0.01") for i in range(3)]
    job.wait_for("syncer", "fragment 0 round 2:")
    learners[2].send_signal(signal.SIGSTOP)
    job.wait_for("syncer", "fragment 0 round 5:")  # the others go on without it
    learners[2].send_signal(signal.SIGCONT)
    assert [p.wait(60) for p in learners] == [0, 0, 0]
    assert syncer.wait(60) == 0, job.log("syncer")
    summary = job.summary()
    assert summary["max_stall"] < 0.5 + 1.5 + 1.0  # grace + straggler_timeout (+ scheduling slack)
    assert job.result(0)["final"] == job.result(1)["final"] == job.result(2)["final"]


@pytest.mark.slow
def test_a_learner_that_never_starts_does_not_hang_the_job(job_factory: Any) -> None:
    job = job_factory(3, registration_timeout=2.0)
    syncer = job.syncer()
    learners = [job.learner(i, "--steps", "30") for i in range(2)]
    assert [p.wait(60) for p in learners] == [0, 0]
    assert syncer.wait(60) == 0, job.log("syncer")
    assert job.summary()["learners"] == {"workerpool1-0": 3, "workerpool1-1": 3}


def test_no_learner_at_all_fails_the_syncer_at_the_registration_deadline(job_factory: Any) -> None:
    job = job_factory(2, registration_timeout=1.0)
    assert job.syncer().wait(60) == 1
    assert "no learner registered within registration_timeout (1 s)" in job.log("syncer")


def test_a_learner_without_a_syncer_gives_up_at_its_deadline(job_factory: Any) -> None:
    job = job_factory(1, registration_timeout=1.0)
    proc = job.learner(0)
    assert proc.wait(60) != 0
    assert "no syncer at 127.0.0.1" in job.log("learner0")


@pytest.mark.slow
def test_strangers_and_other_models_are_refused_with_the_reason(job_factory: Any) -> None:
    job = job_factory(3, registration_timeout=3.0)
    syncer = job.syncer()
    good = job.learner(0, "--steps", "20")
    job.wait_for("syncer", "workerpool1-0 registered")
    stranger = job.learner(1, token_job="another-job")
    other_model = job.learner(2, "--dim-mismatch")
    assert stranger.wait(60) != 0 and other_model.wait(60) != 0
    assert "the syncer refused us: wrong token" in job.log("learner1")
    assert "model mismatch: manifest" in job.log("learner2")
    assert good.wait(60) == 0 and syncer.wait(60) == 0


@pytest.mark.slow
def test_a_restarted_syncer_resumes_from_its_checkpoint_and_learners_reconnect(job_factory: Any) -> None:
    job = job_factory(2)
    first = job.syncer("syncer")
    learners = [job.learner(i, "--steps", "120", "--delay", "0.01") for i in range(2)]
    job.wait_for("syncer", "fragment 0 round 4:")  # round 3's checkpoint is written before round 4 merges
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    second = job.syncer("syncer2")
    assert [p.wait(90) for p in learners] == [0, 0]
    assert second.wait(60) == 0, job.log("syncer2")
    summary = job.summary()
    assert summary["resumed_from"][0] >= 3  # nothing lost before the last checkpoint
    assert summary["rounds"][0] >= 9  # 120 steps / H=10, less what a restart loses (merges after the checkpoint)
    assert "resumed from" in job.log("syncer2")
    assert all(job.result(i)["traffic"]["reconnects"] == 1 for i in range(2))
    assert job.result(0)["final"] == job.result(1)["final"]


@pytest.mark.slow
def test_with_a_quorum_a_straggler_stops_when_the_quorum_is_done(job_factory: Any) -> None:
    job = job_factory(3, min_quorum=2, grace=0.1)
    syncer = job.syncer()
    straggler = job.learner(2, "--steps", "60", "--delay", "0.05")
    # In training before the others start: the quick ones' whole run (~0.1 s) is shorter than a Python
    # start on a loaded machine. (One that comes after the end is the next test's case.)
    job.wait_for("syncer", "workerpool1-2 registered")
    learners = [job.learner(0, "--steps", "60"), job.learner(1, "--steps", "60"), straggler]
    assert [p.wait(60) for p in learners] == [0, 0, 0]
    assert syncer.wait(60) == 0, job.log("syncer")
    assert "the syncer ended training" in job.log("learner2")
    assert job.result(0)["final"] == job.result(1)["final"] == job.result(2)["final"]
    assert job.result(2)["traffic"]["syncs"] < 6  # it did not train on alone after the others finished


@pytest.mark.slow
def test_a_learner_that_starts_after_the_end_takes_the_final_model_and_exits_0(job_factory: Any) -> None:
    # Vertex restarts a learner, or its image pulls slowly, while the quorum finishes: the syncer still
    # waits for a learner saving the model, and the latecomer must not train on alone meanwhile.
    job = job_factory(3, min_quorum=2)
    syncer = job.syncer()
    quick, saving = job.learner(0, "--steps", "20"), job.learner(1, "--steps", "20", "--after-final", "6")
    assert quick.wait(60) == 0
    job.wait_for("syncer", "workerpool1-1 is done")
    late = job.learner(2, "--steps", "200", "--delay", "0.05")  # 10 s of training if nobody stopped it
    assert late.wait(30) == 0, job.log("learner2")
    assert "the syncer ended training" in job.log("learner2")
    assert "workerpool1-2 came after the end" in job.log("syncer")
    # the welcome said training was over: not one exchange (nor an H-step round of wasted work)
    assert job.result(2)["final"] == job.result(0)["final"] and job.result(2)["traffic"]["syncs"] == 0
    assert saving.wait(60) == 0 and syncer.wait(30) == 0, job.log("syncer")


@pytest.mark.slow
def test_the_syncer_outlives_the_learners_last_work(job_factory: Any) -> None:
    # The syncer is the chief: its exit ends the job and Vertex stops the others, so a learner still
    # saving the model after the final exchange must keep it alive.
    job = job_factory(2)
    syncer = job.syncer()
    quick, saving = job.learner(0, "--steps", "20"), job.learner(1, "--steps", "20", "--after-final", "3")
    assert quick.wait(60) == 0
    job.wait_for("syncer", "workerpool1-1 is done")
    time.sleep(1.5)
    assert syncer.poll() is None, job.log("syncer")  # learner 1 is still at work: no exit yet
    assert saving.wait(60) == 0
    assert syncer.wait(30) == 0, job.log("syncer")
