"""Issue 11 phase 2: `vtrain local` restarts failed replicas as Vertex AI does, and injects faults.

The probe trainer (tests/data/trainers/probe) fails a set number of times, reports steps, listens,
daemonizes: every rule of the policy runs against real processes in a second or two. The two
TensorFlow tests train the templates for real (MultiWorkerMirrored, chief + 1 worker on 127.0.0.1: the
smallest cluster with a peer to fail with, each TensorFlow start costing ~7 CPU-s): a worker SIGKILLed
mid-run and a preempted chief both resume from their backups.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.local.test_local_run import (
    KERAS,
    ONE_WORKER,
    PROBE,
    TWO_WORKERS,
    alive,
    assert_clean,
    cli_env,
    job_file,
    port_free,
)
from vtrain.errors import FaultSpecError
from vtrain.local.faults import parse_fault
from vtrain.local.options import RunOptions
from vtrain.local.runner import LocalJob, run_local

CUSTOM_LOOP = KERAS.parent / "custom-loop"
CHIEF = "  chief: {machine_type: n1-standard-4}"


def start(tmp_path: Path, cache: Path, args: list[str], cluster: str = TWO_WORKERS, faults: tuple[str, ...] = (),
          extra: str = "", package: Path = PROBE, **kw: object) -> tuple[LocalJob, io.StringIO, io.StringIO]:
    out, notices = io.StringIO(), io.StringIO()
    options = RunOptions(output_dir=tmp_path / "out", cache_dir=cache, faults=[parse_fault(f) for f in faults],
                         **kw)  # type: ignore[arg-type]
    job = run_local(job_file(tmp_path, args, cluster, package=package, extra=extra), options=options, out=out,
                    notices=notices)
    return job, out, notices


def restarts(job: LocalJob) -> dict[str, int]:
    return {k: v for k, v in job.summary["restarts"]["restarts"].items() if v}


def until(check: Callable[[], object], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def daemons(log: str) -> list[int]:
    return [int(p) for p in re.findall(r"daemonized (\d+)", log)]


# --------------------------------------------------------------------------- the policy on real processes


@pytest.mark.slow
def test_a_failed_worker_is_restarted_in_place_and_the_job_succeeds(tmp_path: Path, cache: Path) -> None:
    dump = tmp_path / "seen"
    job, out, notices = start(tmp_path, cache, [f"--dump={dump}", "--fail=worker-1", "--fail-times=1",
                                                "--sleep=chief-0", "--seconds=3"])
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED", job.error
    assert "[vtrain] worker-1 exited 3; restarting 1/5\n" in notices.getvalue()
    assert restarts(job) == {"worker-1": 1} and job.summary["restarts"]["attempts"] == 1
    [event] = [e for e in job.summary["restarts"]["events"] if e["action"] == "restart"]
    assert (event["replica"], event["exit_code"], event["permanent"], event["count"]) == ("worker-1", 3, False, 1)
    # In place: the same port, cluster spec and working dir (Vertex keeps the hostname), the count told.
    first, again = (json.loads((dump / name).read_text()) for name in ("worker-1.json", "worker-1.restart1.json"))
    for key in ("TF_CONFIG", "CLUSTER_SPEC", "CLOUD_ML_JOB_ID", "AIP_MODEL_DIR", "MY_VAR"):
        assert first["env"][key] == again["env"][key], key
    assert first["cwd"] == again["cwd"] and first["argv"] == again["argv"]
    assert (first["env"]["VTRAIN_RESTART_COUNT"], again["env"]["VTRAIN_RESTART_COUNT"]) == ("0", "1")
    assert again["env"]["VTRAIN_JOB_ATTEMPT"] == "1"
    assert again["env"]["VTRAIN_STATUS_FILE"] == str(job.run_dir / "status" / "worker-1.json")
    # Its log keeps both runs; job.log tells the story.
    log = job.replica_log("worker-1").read_text()
    assert log.count("probe worker-1 starting") == 2 and "worker-1 restart 1, job attempt 1" in log
    assert "[vtrain] worker-1 exited 3; restarting 1/5" in "\n".join(job.logs())
    assert "[vtrain] restarts: worker-1 1 (attempt 1 of the job)" in notices.getvalue()
    assert_clean(job)


@pytest.mark.slow
def test_a_restarted_chief_serves_on_the_same_port(tmp_path: Path, cache: Path) -> None:
    """What a restarted coordinator (DiLoCo's syncer) needs: its peers reach it again at the same address."""
    job, out, _ = start(tmp_path, cache, ["--listen=all", "--fail=chief-0", "--fail-times=1", "--fail-after=1",
                                          "--sleep=chief-0", "--seconds=2"], worker_grace=1)
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED", job.error
    port = job.ports["chief-0"]
    assert out.getvalue().count(f"[chief-0] chief-0 listening on {port}") == 2
    assert restarts(job) == {"chief-0": 1}
    assert_clean(job)
    assert port_free(port)


def test_a_permanent_error_fails_at_once_without_a_restart(tmp_path: Path, cache: Path) -> None:
    job, _, notices = start(tmp_path, cache, ["--sleep=all", "--no-such-flag"])  # a typo in trainer.args
    assert job.wait(timeout=60) == "JOB_STATE_FAILED"
    error = job.error or ""
    assert re.match(r"(chief|worker)-\d exited 2: permanent error, the trainer refused its arguments \(.*task.py: "
                    r"error: unrecognized arguments: --no-such-flag\)\n", error), error
    assert "failing the job without a restart" in notices.getvalue()
    assert restarts(job) == {} and job.summary["restarts"]["attempts"] == 1
    assert job.replica_log("chief-0").read_text().count("usage:") <= 1  # it ran once (if at all)
    assert_clean(job)


@pytest.mark.slow
def test_exhausted_restarts_retry_the_whole_job_then_fail_with_the_count(tmp_path: Path, cache: Path) -> None:
    job, out, notices = start(tmp_path, cache, ["--fail=worker-0", "--sleep=chief-0,worker-1", "--seconds=60"],
                              kill_grace=1)
    assert job.wait(timeout=120) == "JOB_STATE_FAILED"
    error = job.error or ""
    assert error.startswith("worker-0 exited 3 after 5 restarts and 3 job retries\nlast lines of worker-0")
    said = notices.getvalue()
    assert said.count("[vtrain] worker-0 exited 3; restarting 5/5\n") == 4
    for n in (1, 2, 3):
        assert f"[vtrain] worker-0 exited 3 after 5 restarts; retrying the whole job {n}/3\n" in said
    assert "failing the job" in said.splitlines()[-2] and "restarts: worker-0 20 (attempt 4 of the job)" in said
    summary = job.summary["restarts"]
    assert summary["attempts"] == 4 and restarts(job) == {"worker-0": 20}
    # A whole-job retry starts every replica again, counting from 0, told the attempt.
    assert out.getvalue().count("[chief-0] chief-0 restart 0, job attempt") == 4
    assert "[chief-0] chief-0 restart 0, job attempt 4" in out.getvalue()
    assert_clean(job)


@pytest.mark.slow
def test_restart_job_on_worker_restart_restarts_every_replica(tmp_path: Path, cache: Path) -> None:
    job, out, notices = start(tmp_path, cache, ["--fail=worker-1", "--fail-times=1", "--fail-after=0.5",
                                                "--sleep=chief-0,worker-0", "--seconds=2"],
                              extra="scheduling: {restart_job_on_worker_restart: true}", kill_grace=1, worker_grace=3)
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED", job.error
    assert "worker-1 exited 3; restarting every replica 1/5 (restart_job_on_worker_restart)" in notices.getvalue()
    assert restarts(job) == {"chief-0": 1, "worker-0": 1, "worker-1": 1}
    assert "[chief-0] chief-0 restart 1, job attempt 1" in out.getvalue()
    assert_clean(job)


def test_never_keeps_fail_fast(tmp_path: Path, cache: Path) -> None:
    job, _, notices = start(tmp_path, cache, ["--fail=worker-1", "--fail-times=1", "--sleep=all"],
                            restart_policy="never")
    assert job.wait(timeout=60) == "JOB_STATE_FAILED"
    assert (job.error or "").startswith("worker-1 exited 3\nlast lines of worker-1")
    assert "[vtrain] worker-1 exited 3; failing the job (--restart-policy never)" in notices.getvalue()
    assert restarts(job) == {} and job.summary["restarts"]["policy"] == "never"
    assert job.replica_log("worker-1").read_text().count("starting") == 1
    assert_clean(job)


@pytest.mark.slow
def test_cancel_and_timeout_win_over_restarts(tmp_path: Path, cache: Path) -> None:
    args = ["--fail=worker-0", "--fail-after=0.3", "--sleep=chief-0,worker-1", "--fork=all"]
    job, out, _ = start(tmp_path, cache, args, kill_grace=1)
    until(lambda: "restarting 2/5" in "\n".join(job.logs()))
    job.cancel()
    assert job.wait(timeout=60) == "JOB_STATE_CANCELLED"
    assert_clean(job, [int(p) for p in re.findall(r"forked (\d+)", out.getvalue())])
    (tmp_path / "t").mkdir()
    job, out, _ = start(tmp_path / "t", cache, args, timeout=2.0, kill_grace=1)
    assert job.wait(timeout=60) == "JOB_STATE_FAILED"
    assert job.error == "timed out after 2 s (--timeout / scheduling.timeout)"
    assert 0 < sum(restarts(job).values()) < 20
    assert_clean(job, [int(p) for p in re.findall(r"forked (\d+)", out.getvalue())])


def test_what_a_restarted_replica_left_behind_goes_with_it(tmp_path: Path, cache: Path) -> None:
    """No orphans, also across restarts: a crashed replica's daemon is ended before it runs again."""
    job, out, notices = start(tmp_path, cache, ["--daemonize=worker-0", "--fail=worker-0", "--fail-times=1",
                                                "--sleep=all", "--seconds=60"], kill_grace=1)
    until(lambda: len(daemons(out.getvalue())) == 2)
    first, second = daemons(out.getvalue())
    assert not alive(first) and alive(second) and not job.done
    assert f"ended 1 process(es) the previous worker-0 left running outside its process group (daemonized): " \
           f"pid {first}" in notices.getvalue()
    job.cancel()
    assert job.wait(timeout=60) == "JOB_STATE_CANCELLED"
    assert not alive(second)
    assert_clean(job)


# --------------------------------------------------------------------------- faults


@pytest.mark.slow
def test_faults_kill_preempt_and_freeze_at_steps(tmp_path: Path, cache: Path) -> None:
    faults = ("worker-1:kill@step:5", "chief-0:preempt:1s@step:8", "worker-0:stop:1s@step:3")
    job, out, notices = start(tmp_path, cache, ["--steps=all", "--count=40", "--step-seconds=0.05",
                                                "--ignore-term=chief-0"], faults=faults, worker_grace=5)
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED", job.error
    said = notices.getvalue()
    assert re.search(r"\[vtrain\] fault worker-1:kill@step:5: SIGKILL worker-1 at step [5-9]\n", said)
    assert "[vtrain] worker-1 exited 137 (SIGKILL); restarting 1/5" in said
    # The chief ignores SIGTERM: a Spot VM's SIGKILL comes after the grace.
    assert re.search(r"fault chief-0:preempt:1s@step:8: SIGTERM chief-0 at step \d+ \(preempted; SIGKILL in 1s\)", said)
    assert "[vtrain] fault chief-0:preempt:1s@step:8: SIGKILL chief-0, still running 1s after SIGTERM" in said
    assert "[vtrain] chief-0 exited 137 (SIGKILL); restarting 1/5" in said
    assert re.search(r"fault worker-0:stop:1s@step:3: SIGSTOP worker-0 at step \d+ for 1s", said)
    assert "[vtrain] fault worker-0:stop:1s@step:3: SIGCONT worker-0 after 1s" in said
    assert restarts(job) == {"chief-0": 1, "worker-1": 1}  # a frozen replica is no failure
    fired = {f["spec"]: f for f in job.summary["faults"]}
    assert set(fired) == set(faults) and fired["worker-1:kill@step:5"]["at_step"] >= 5
    # The probe starts again at step 1: every step the killed run did is redone, and that is measured.
    recoveries = {r["replica"]: r for r in job.summary["restarts"]["recoveries"]}
    assert recoveries["worker-1"]["resumed_at_step"] == 1 and recoveries["worker-1"]["steps_redone"] >= 5
    assert "worker-1 resumed at step 1 " in said
    assert_clean(job)


@pytest.mark.slow
def test_faults_after_a_duration_and_twice_on_one_replica(tmp_path: Path, cache: Path) -> None:
    job, _, notices = start(tmp_path, cache, ["--sleep=all", "--seconds=4"], faults=("worker-0:kill@0.5s",
                            "worker-0:kill@0.5s"), worker_grace=1)  # fmt: skip
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED", job.error
    assert "[vtrain] worker-0 exited 137 (SIGKILL); restarting 2/5" in notices.getvalue()
    assert restarts(job) == {"worker-0": 2} and len(job.summary["faults"]) == 2
    assert_clean(job)


def test_a_fault_for_a_replica_the_run_lacks_is_refused_before_anything_runs(tmp_path: Path, cache: Path) -> None:
    with pytest.raises(FaultSpecError, match=r"^fault 'worker-2:kill@1s': this run has no replica worker-2 \(it has "
                                             r"chief-0, worker-0, worker-1\); did you mean 'worker-1'\?$"):
        start(tmp_path, cache, [], faults=("worker-2:kill@1s",))
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_restart_policy_faults_and_json(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, ["--sleep=all", "--seconds=3"], TWO_WORKERS)
    base = [sys.executable, "-m", "vtrain", "local", str(path)]
    done = subprocess.run([*base, "--output-dir", str(tmp_path / "o"), "--fault", "worker-1:kill@1s", "-o", "json"],
                          env=cli_env(cache), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["state"] == "JOB_STATE_SUCCEEDED" and result["restarts"]["restarts"]["worker-1"] == 1
    assert [f["spec"] for f in result["faults"]] == ["worker-1:kill@1s"]
    assert "[vtrain] worker-1 exited 137 (SIGKILL); restarting 1/5" in done.stderr
    assert "[vtrain] restarts: worker-1 1 (attempt 1 of the job)" in done.stderr
    done = subprocess.run([*base, "--output-dir", str(tmp_path / "n"), "--fault", "worker-1:kill@1s",
                           "--restart-policy", "never"], env=cli_env(cache), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 10, done.stderr
    assert "ended JOB_STATE_FAILED" in done.stderr and "worker-1 exited 137 (SIGKILL)" in done.stderr
    for args, message in [
        (["--fault", "worker-7:kill@1s"], "error: fault 'worker-7:kill@1s': this run has no replica worker-7 (it has "
                                          "chief-0, worker-0, worker-1); did you mean 'worker-1'?\n"),
        (["--fault", "worker-1:explode@1s"], "kind 'explode' is not one of kill, preempt[:GRACE], stop:SECONDS"),
        (["--restart-policy", "always"], "'always' is not one of 'vertex', 'never'"),
    ]:
        done = subprocess.run([*base, *args], env=cli_env(cache), capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_cli_a_fault_for_a_tuning_study_is_a_usage_error(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, [], CHIEF, extra="tuning:\n  metric: {name: score, goal: maximize}\n  parameters:\n"
                    "    x: {type: discrete, values: [1, 3]}\n  algorithm: grid\n  max_trials: 2")
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--fault", "chief-0:kill@1s"],
                          env=cli_env(cache), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("error: --fault applies to a single job: a job file with `tuning:` runs a study of many "
                           "trials (remove --fault, or the tuning block with --set tuning=null)\n")
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--follow", "chief-0"],
                          env=cli_env(cache), capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (2, "error: --follow applies to a single job: a study's trials print "
                                              "their lines with --stream-logs (they are always in each trial's log "
                                              "files)\n")


# --------------------------------------------------------------------------- real TensorFlow


def weights(out: Path) -> list[str]:
    paths = [out / "model" / "weights.json", *sorted(out.glob("workertemp/worker-*/weights.json"))]
    return [json.loads(p.read_text())["sha256"] for p in paths]


@pytest.mark.slow
def test_a_worker_killed_mid_run_resumes_from_its_backup(tmp_path: Path, cache: Path) -> None:
    """Keras (tf_keras under MultiWorkerMirrored) with BackupAndRestore each epoch: worker-0 is SIGKILLed
    in epoch 2; its peer's collectives fail with it and it is restarted too (TF's documented
    behaviour); both resume from the epoch-1 backup, not from 0, and end with the same weights."""
    job, _, notices = start(tmp_path, cache, ["--epochs=3", "--steps-per-epoch=30", "--batch-size=16"],
                            cluster=ONE_WORKER, package=KERAS, faults=("worker-0:kill@step:40",))
    assert job.wait(timeout=240) == "JOB_STATE_SUCCEEDED", job.error
    assert "[vtrain] worker-0 exited 137 (SIGKILL); restarting 1/5" in notices.getvalue()
    assert restarts(job)["worker-0"] == 1 and job.summary["restarts"]["attempts"] == 1
    recovered = {r["replica"]: r for r in job.summary["restarts"]["recoveries"]}
    assert 30 < recovered["worker-0"]["resumed_at_step"] <= 40  # after the epoch-1 backup (step 30), not at 1
    log = job.replica_log("worker-0").read_text()
    assert log.count("Epoch 1/3") == 1 and log.count("Epoch 2/3") == 2 and "restarts 1" in log
    shas = weights(tmp_path / "out")
    assert len(shas) == 2 and len(set(shas)) == 1, "replicas ended with different weights"
    assert_clean(job)


@pytest.mark.slow
def test_a_preempted_chief_saves_on_sigterm_and_resumes(tmp_path: Path, cache: Path) -> None:
    """The custom loop: SIGTERM (a Spot preemption) → TF's PreemptionCheckpointHandler saves on every
    replica and they exit 143; restarted, they resume at the saved step with nothing redone."""
    job, out, notices = start(tmp_path, cache, ["--epochs=2", "--steps-per-epoch=50", "--batch-size=16",
                                                "--checkpoint-every=1000"],
                              cluster=ONE_WORKER, package=CUSTOM_LOOP, faults=("chief-0:preempt:60s@step:30",))
    assert job.wait(timeout=240) == "JOB_STATE_SUCCEEDED", job.error
    said = notices.getvalue()
    assert "[vtrain] chief-0 exited 143 (SIGTERM); restarting 1/5" in said
    assert "SIGKILL chief-0, still running" not in said  # it saved and left within the grace
    assert "[chief-0] " in out.getvalue() and "SIGTERM: saving a checkpoint after this step" in out.getvalue()
    assert list((tmp_path / "out" / "checkpoints" / "preempt").glob("ckpt-*.index"))
    assert not list((tmp_path / "out" / "checkpoints" / "steps").glob("ckpt-[1-9]?.index"))  # no step backup before
    resumed = [int(m) for m in re.findall(r"\[chief-0\].*resuming at step (\d+)", out.getvalue())]
    assert len(resumed) == 1 and resumed[0] >= 30
    chief = {r["replica"]: r for r in job.summary["restarts"]["recoveries"]}["chief-0"]
    assert chief["steps_redone"] == 0
    shas = weights(tmp_path / "out")
    assert len(shas) == 2 and len(set(shas)) == 1, "replicas ended with different weights"
    assert_clean(job)
