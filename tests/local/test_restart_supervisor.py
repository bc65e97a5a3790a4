"""The restart supervisor on its own: no process is started (Popen, the clock and the job's side are fakes).

What it does with the job's replicas is only what :class:`JobSide` and the records say, so each
step of a restart can be checked here: the environment of each (re)start, step reports read
from the status file, a `step:N` fault sent, the exit decided, the replica started again.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from vtrain import proctree
from vtrain.constants import JOB_ATTEMPT_ENV, RESTART_COUNT_ENV, STATUS_FILE_ENV
from vtrain.local.env import Replica
from vtrain.local.faults import FaultScheduler, parse_fault
from vtrain.local.policy import RESTART, Decision, policy_for_job
from vtrain.local.restarts import JobSide, Proc, RestartSupervisor, SharedLog
from vtrain.runtime.status import Status, write_status


class FakePopen:
    started: list[FakePopen] = []

    def __init__(self, argv: list[str], **kw: Any) -> None:
        self.argv, self.env, self.kwargs, self.pid = argv, kw["env"], kw, 1000 + len(FakePopen.started)
        FakePopen.started.append(self)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Side:
    """The job's side, recorded."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.signals: list[tuple[str, int]] = []
        self.stopped: list[list[str]] = []
        self.drained: list[tuple[str, str]] = []

    def drain(self, p: Proc, log: SharedLog, stream: str) -> None:
        self.drained.append((p.label, stream))
        log.done()

    def stop(self, procs: list[Proc]) -> None:
        self.stopped.append([p.label for p in procs])
        for p in procs:
            p.stopped, p.returncode = True, -15

    def job_side(self) -> JobSide:
        return JobSide(drain=self.drain, stop=self.stop, signal=lambda p, sig: self.signals.append((p.label, sig)),
                       event=self.events.append)


def supervisor(tmp_path: Path, faults: tuple[str, ...] = ()) -> tuple[RestartSupervisor, Side, Clock, list[Proc]]:
    FakePopen.started = []
    replicas = [Replica(0, 0), Replica(1, 0)]
    spec = json.dumps({"cluster": {}, "task": {}})
    procs = [Proc(r, ["trainer"], {"CLUSTER_SPEC": spec}, tmp_path / "work" / r.label, tmp_path / f"{r.label}.log")
             for r in replicas]
    job = {"jobSpec": {"workerPoolSpecs": [{"replicaCount": 1}, {"replicaCount": 1}]}}
    side, clock = Side(), Clock()
    sup = RestartSupervisor(procs, job_id="local-test", run_dir=tmp_path, job=side.job_side(),
                            policy=policy_for_job(job, [p.label for p in procs]),
                            scheduler=FaultScheduler([parse_fault(f) for f in faults]), popen=FakePopen, clock=clock)
    return sup, side, clock, procs


def test_each_start_gets_the_policy_env_and_a_fresh_status_file(tmp_path: Path) -> None:
    sup, side, clock, procs = supervisor(tmp_path)
    sup.start(clock.now)
    assert [p.argv for p in FakePopen.started] == [["trainer"], ["trainer"]]
    env = FakePopen.started[1].env
    assert (env[RESTART_COUNT_ENV], env[JOB_ATTEMPT_ENV]) == ("0", "1")
    assert env[STATUS_FILE_ENV] == str(tmp_path / "status" / "worker-0.json")
    assert all(p.popen is not None and p.cwd.is_dir() for p in procs)
    for p in procs:  # stdout and stderr are drained apart (Vertex logs stderr at ERROR)
        p.reader.join(timeout=5)  # type: ignore[union-attr]
    assert sorted(side.drained) == sorted((p.label, s) for p in procs for s in ("stdout", "stderr"))
    assert all(FakePopen.started[i].kwargs["stderr"] is subprocess.PIPE for i in range(2))


def test_a_step_fault_fires_then_the_exit_restarts_the_replica(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proctree, "sweep", lambda *a, **k: [])  # nothing was left outside a process group
    sup, side, clock, procs = supervisor(tmp_path, ("worker-0:kill@step:5",))
    sup.start(clock.now)
    worker = procs[1]
    status = sup.status_path(worker)
    clock.now += 1
    write_status(status, Status(4, restarts=0, first=1))
    sup.tick()
    assert sup.steps == {"worker-0": 4} and side.signals == []
    write_status(status, Status(5, restarts=0, first=1))
    sup.tick()
    assert side.signals == [("worker-0", signal.SIGKILL)]
    assert side.events == ["fault worker-0:kill@step:5: SIGKILL worker-0 at step 5"]

    worker.returncode = -9  # the job reaped it
    decision = sup.decide(worker)
    assert (decision.action, decision.replicas) == (RESTART, ("worker-0",))
    assert side.events[-1] == "worker-0 exited 137 (SIGKILL); restarting 1/5"
    assert sup.relaunch(decision, lambda: False)
    assert side.stopped == [["worker-0"]]
    again = FakePopen.started[-1]
    assert again.env[RESTART_COUNT_ENV] == "1" and not status.exists()  # the old process's steps are gone
    assert worker.returncode is None and not worker.stopped

    write_status(status, Status(3, restarts=0))  # a late report of the process before: ignored
    sup.tick()
    assert "worker-0" not in sup.steps
    write_status(status, Status(4, restarts=1, first=3))
    sup.tick()
    assert sup.steps == {"worker-0": 4}
    result = sup.result()
    assert result["restarts"]["restarts"]["worker-0"] == 1
    assert [f["spec"] for f in result["faults"]] == ["worker-0:kill@step:5"]
    assert any("worker-0" in line for line in sup.lines())


def test_a_cancel_during_a_restart_starts_nothing(tmp_path: Path) -> None:
    sup, side, clock, procs = supervisor(tmp_path)
    sup.start(clock.now)
    procs[1].returncode = 1
    decision = sup.decide(procs[1])
    before = len(FakePopen.started)
    assert not sup.relaunch(decision, lambda: True)
    assert len(FakePopen.started) == before


def test_the_story_of_a_restart_for_the_view_and_the_timeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proctree, "sweep", lambda *a, **k: [])
    sup, side, clock, procs = supervisor(tmp_path)
    sup.start(clock.now)
    worker = procs[1]
    assert [r["state"] for r in sup.rows()] == ["starting", "starting"]
    for step, at in ((1, 1.0), (2, 1.5), (3, 2.0)):
        clock.now = 100 + at
        write_status(sup.status_path(worker), Status(step, restarts=0, first=1))
        sup.tick()
    row = sup.rows()[1]
    assert (row["state"], row["step"], row["rate"], row["restarts"]) == ("running", 3, 2.0, 0)  # 2 steps in 1 s
    clock.now = 103.0
    worker.returncode = -9
    sup.decide(worker)
    assert sup.rows()[1]["state"] == "exited 137 (SIGKILL)" and sup.rows()[1]["rate"] is None
    clock.now = 103.5
    assert sup.relaunch(Decision(RESTART, ("worker-0",)), lambda: False)
    clock.now = 104.0
    write_status(sup.status_path(worker), Status(2, restarts=1, first=2))
    sup.tick()
    row = sup.rows()[1]
    assert (row["state"], row["step"], row["rate"], row["restarts"]) == ("running", 2, None, 1)  # one point: no rate
    procs[0].returncode = 0
    result = sup.result()
    assert result["steps"] == {"chief-0": [], "worker-0": [[1.0, 1], [1.5, 2], [2.0, 3], [4.0, 2]]}
    assert result["processes"] == [
        {"replica": "chief-0", "restart": 0, "attempt": 1, "start": 0.0, "end": 4.0, "exit": 0},
        {"replica": "worker-0", "restart": 0, "attempt": 1, "start": 0.0, "end": 3.0, "exit": -9},
        {"replica": "worker-0", "restart": 1, "attempt": 1, "start": 3.5, "end": None, "exit": None},
    ]
