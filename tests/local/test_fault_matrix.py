"""Issue 43 part 4: `vtrain local JOB --fault-matrix` runs the job under the faults users meet and says, per
scenario, whether it ended as Vertex would end it.

The table's logic is pure (which fault each scenario injects, what the restart policy makes of it); one matrix of
the probe trainer (tests/data/trainers/probe: a chief and a worker that report steps, ~1 CPU-s a run) shows the whole
command with GitHub annotations, and a trainer whose worker cannot start shows failing rows and exit 10. The
custom-loop template's matrix (real TensorFlow) is the slow acceptance test at the end.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

from tests.emulator.test_emulated_run import run
from tests.local.test_local_restarts import CUSTOM_LOOP
from tests.local.test_local_run import ONE_WORKER, job_file
from vtrain.errors import UsageError
from vtrain.local.faults import parse_fault
from vtrain.local.matrix import Baseline, Row, expected_state, github, parse_names, plan_faults, table

LABELS = ["chief-0", "worker-0"]
JOB = {"jobSpec": {"workerPoolSpecs": [{"replicaCount": "1"}, {"replicaCount": "1"}]}}


def test_the_scenarios_by_name() -> None:
    assert parse_names(None) == parse_names("all") == ["kill", "preempt", "late", "stop", "retry"]
    assert parse_names("late, kill") == ["kill", "late"]  # in the table's order
    with pytest.raises(UsageError, match=r"'kil' is not a scenario \(kill, preempt, late, stop, retry\); did you "
                                         r"mean 'kill'\?"):
        parse_names("kil,late")


def test_each_scenario_places_its_fault_from_the_fault_free_run() -> None:
    ran = Baseline(seconds=40.0, steps={"chief-0": 200, "worker-0": 198})
    assert plan_faults("kill", LABELS, ran) == ["worker-0:kill@step:99"]
    assert plan_faults("preempt", LABELS, ran) == ["chief-0:preempt@step:100"]
    assert plan_faults("late", LABELS, ran) == ["worker-0:late@20s"]
    assert plan_faults("stop", LABELS, ran) == ["worker-0:stop:20s@step:99"]
    assert plan_faults("retry", LABELS, ran) == ["worker-0:kill@step:1"] * 6
    quiet = Baseline(seconds=3.0, steps={"chief-0": None})  # a trainer that reports no step: times instead
    assert plan_faults("kill", ["chief-0"], quiet) == ["chief-0:kill@1.5s"]
    assert plan_faults("late", ["chief-0"], quiet) is None  # no worker to start late
    assert plan_faults("stop", ["chief-0"], quiet) == ["chief-0:stop:3s@1.5s"]
    for name in ("kill", "preempt", "late", "stop", "retry"):
        for spec in plan_faults(name, LABELS, ran) or ():
            assert str(parse_fault(spec)) == spec


def test_what_vertex_would_do_is_the_restart_policy_s_answer() -> None:
    kills = [parse_fault("worker-0:kill@step:1")] * 6
    assert expected_state(JOB, LABELS, kills[:1]) == "JOB_STATE_SUCCEEDED"
    assert expected_state(JOB, LABELS, kills) == "JOB_STATE_SUCCEEDED"  # the sixth: a whole-job retry
    no_retries = {"jobSpec": {**JOB["jobSpec"], "scheduling": {"disableRetries": True}}}
    assert expected_state(no_retries, LABELS, kills[:5]) == "JOB_STATE_SUCCEEDED"
    assert expected_state(no_retries, LABELS, kills) == "JOB_STATE_FAILED"
    assert expected_state(JOB, LABELS, kills[:1], policy="never") == "JOB_STATE_FAILED"
    assert expected_state(JOB, LABELS, [parse_fault("worker-0:late@5s"), parse_fault("worker-0:stop:3s@1s")],
                          policy="never") == "JOB_STATE_SUCCEEDED"  # neither ends a process


def test_the_table_and_the_annotations() -> None:
    rows = [Row("fault-free", "no fault", (), "JOB_STATE_SUCCEEDED", "JOB_STATE_SUCCEEDED", 9.0, None, None, 0, 1,
                None),
            Row("retry", "a whole-job retry", ("worker-0:kill@step:1",) * 6, "JOB_STATE_SUCCEEDED",
                "JOB_STATE_FAILED", 9.0, 6.54, 3, 6, 2, None, "worker-0 exited 2: permanent error")]  # fmt: skip
    assert table(rows) == [
        "scenario    fault                    outcome    vertex would  recovery s  redone  result",
        "----------------------------------------------------------------------------------------",
        "fault-free  -                        SUCCEEDED  SUCCEEDED              -       -  pass",
        "retry       worker-0:kill@step:1 ×6  FAILED     SUCCEEDED            6.5       3  FAIL",
    ]
    assert github(rows, "job.yaml") == [
        "::notice file=job.yaml,title=vtrain%3A fault matrix fault-free::fault matrix fault-free: no fault (no "
        "fault) ended SUCCEEDED, as Vertex would",
        "::error file=job.yaml,title=vtrain%3A fault matrix retry::fault matrix retry: a whole-job retry "
        "(worker-0:kill@step:1 ×6) ended FAILED, not as Vertex would (SUCCEEDED): worker-0 exited 2: permanent error",
    ]



@pytest.mark.slow
@pytest.mark.alone  # a late start and a freeze are timed against the chief's run
def test_the_probe_s_matrix_passes_every_scenario_with_annotations(tmp_path: Path, cache: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(cache))
    path = job_file(tmp_path, ["--steps=all", "--count=15", "--step-seconds=0.1", "--sleep=chief-0", "--seconds=3"],
                    ONE_WORKER)
    code, out, err = run("local", str(path), "--output-dir", str(tmp_path / "m"), "--preempt-grace", "2s",
                         "--fault-matrix", "-o", "github")
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[2:8]] == ["fault-free", "kill", "preempt", "late", "stop", "retry"]
    assert all(line.endswith("pass") for line in lines[2:8]), out
    assert [line.split(" ", 1)[0] for line in lines[8:]] == ["::notice"] * 6
    assert "worker-0:kill@step:1 ×6" in out and "worker-0:late@" in out
    assert "[vtrain] fault matrix: all 6 scenario(s) ended as Vertex would end them" in err
    retry = json.loads(next((tmp_path / "m" / "retry" / "vtrain-local").glob("local-*/result.json")).read_text())
    assert retry["restarts"]["attempts"] == 2 and retry["state"] == "JOB_STATE_SUCCEEDED"
    kill = json.loads(next((tmp_path / "m" / "kill" / "vtrain-local").glob("local-*/result.json")).read_text())
    assert kill["restarts"]["restarts"]["worker-0"] == 1 and kill["restarts"]["recoveries"]


@pytest.mark.slow
def test_a_trainer_that_cannot_run_fails_its_rows_and_exits_10(tmp_path: Path, cache: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(cache))
    path = job_file(tmp_path, ["--no-such-flag"], ONE_WORKER)  # argparse refuses it: a permanent error
    code, out, err = run("local", str(path), "--output-dir", str(tmp_path / "m"), "--fault-matrix", "kill", "-o",
                         "json")
    assert code == 10, err
    rows = json.loads(out)
    assert [(r["scenario"], r["outcome"], r["expected"], r["passed"]) for r in rows] == [
        ("fault-free", "JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED", False),
        ("kill", "JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED", False)]
    assert "permanent error" in rows[0]["error"]
    assert "error: fault matrix: 2 of 2 scenario(s) did not end as Vertex would end them (fault-free, kill)" in err


def test_the_matrix_s_usage_errors(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, [], ONE_WORKER)
    for args, said in [
        (["--fault-matrix", "explode"], "'explode' is not a scenario"),
        (["--fault-matrix", "kill", "--fault", "worker-0:kill@1s"], "--fault-matrix injects its own faults"),
        (["-o", "github"], "-o github annotates a --fault-matrix run"),
    ]:
        code, _, err = run("local", str(path), *args)
        assert code == 2 and said in err, err
    code, out, err = run("local", "--fault-matrix", str(path), "--fault", "worker-0:kill@1s")  # the job, not a list
    assert code == 2 and "--fault-matrix injects its own faults" in err, err


@pytest.mark.slow
def test_the_custom_loop_template_survives_every_scenario(tmp_path: Path, cache: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The acceptance run: MultiWorkerMirrored (a chief and a worker, real TensorFlow), each scenario one run."""
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # 40 steps: a step fault lands at its step however fast the steps are (the replica waits there for the signal)
    path = job_file(tmp_path, ["--epochs=2", "--steps-per-epoch=20", "--batch-size=8", "--checkpoint-every=5"],
                    ONE_WORKER, package=CUSTOM_LOOP)
    code, out, err = run("local", str(path), "--output-dir", str(tmp_path / "m"), "--preempt-grace", "20s",
                         "--fault-matrix")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"custom-loop fault matrix: {after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime:.0f} "
          "CPU-s in its replicas")
    assert code == 0, out + err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["fault-free", "kill", "preempt", "late", "stop", "retry"]
    assert all(line.endswith("pass") for line in lines[2:]), out
