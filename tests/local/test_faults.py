"""Fault specs (flag and label forms) and the pure scheduler that says which signal is due when."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from vtrain.commands._faultopts import fault_option, restart_policy_option
from vtrain.errors import FaultSpecError, UsageError
from vtrain.local.faults import (
    FaultScheduler,
    FaultSpec,
    check_replicas,
    label_value,
    parse_fault,
    parse_label_value,
    parse_seconds,
    specs_from_labels,
)


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("worker-1:kill@30s", FaultSpec("worker-1", "kill", after=30.0)),
        ("chief:preempt@step:200", FaultSpec("chief-0", "preempt", step=200)),
        ("chief-0:preempt:10s@1m", FaultSpec("chief-0", "preempt", 10.0, after=60.0)),
        ("worker-0:stop:20s@1.5s", FaultSpec("worker-0", "stop", 20.0, after=1.5)),
        ("worker-0:stop:20@0", FaultSpec("worker-0", "stop", 20.0, after=0.0)),
        (" PS-0:KILL@1m30s ", FaultSpec("ps-0", "kill", after=90.0)),
        ("evaluator-0:kill@step:1", FaultSpec("evaluator-0", "kill", step=1)),
        ("worker-0:late@15s", FaultSpec("worker-0", "late", after=15.0)),
    ],
)
def test_parse_fault(text: str, spec: FaultSpec) -> None:
    assert parse_fault(text) == spec
    assert parse_fault(str(spec)) == spec  # str() is the canonical spelling


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("worker-1:kill", "is not REPLICA:KIND@WHEN"),
        ("@30s", "is not REPLICA:KIND@WHEN"),
        ("gpu-1:kill@30s", "'gpu-1' is not a replica (chief-0, worker-N, ps-N, evaluator-N)"),
        ("chief-1:kill@30s", "the chief is chief-0"),
        ("worker-1:kil@30s",
         "kind 'kil' is not one of kill, preempt[:GRACE], stop:SECONDS, late; did you mean 'kill'?"),
        ("worker-1:stop@30s", "stop needs how long, e.g. stop:20s"),
        ("worker-1:kill:5s@30s", "kill takes no argument"),
        ("worker-1:preempt:soon@30s", "'soon' is not a duration"),
        ("worker-1:kill@step:0", "step:N needs a whole number of steps >= 1, got '0'"),
        ("worker-1:kill@step:x", "step:N needs a whole number"),
        ("worker-1:kill@later", "WHEN 'later' is neither a duration (30s, 2m, 1.5s) nor step:N"),
        ("worker-0:late@step:3", "a late start is a duration after the others started (late@15s), not a step"),
        ("worker-0:late:5s@10s", "late takes no argument: how late is WHEN"),
    ],
)
def test_bad_faults_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(FaultSpecError, match="fault") as err:
        parse_fault(text)
    assert message in str(err.value)
    assert isinstance(err.value, UsageError) and err.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("2h", 7200.0),
        ("12", 12.0),
        ("0.5s", 0.5),
        ("", None),
        ("1x", None),
        ("-3", None),
    ],
)
def test_parse_seconds(text: str, seconds: float | None) -> None:
    assert parse_seconds(text) == seconds


def test_check_replicas_names_the_nearest() -> None:
    check_replicas([parse_fault("worker-0:kill@1s")], ["chief-0", "worker-0"])
    with pytest.raises(
        FaultSpecError,
        match=r"this run has no replica worker-2 \(it has chief-0, worker-0, "
        r"worker-1\); did you mean 'worker-1'\?",
    ):
        check_replicas([parse_fault("worker-2:kill@1s")], ["chief-0", "worker-0", "worker-1"])


def test_labels_round_trip() -> None:
    specs = [
        parse_fault("worker-1:kill@30s"),
        parse_fault("chief-0:preempt:10s@step:50"),
        parse_fault("worker-0:stop:20s@1m"),
    ]
    values = [label_value(s) for s in specs]
    assert values == ["worker-1_kill_30s", "chief-0_preempt-10s_step-50", "worker-0_stop-20s_60s"]
    assert [parse_label_value(v) for v in values] == specs
    labels = {"team": "ml", "vtrain-fault-2": values[1], "vtrain-fault": values[0], "vtrain-fault-10": values[2]}
    assert specs_from_labels(labels) == specs
    with pytest.raises(FaultSpecError, match="is not REPLICA_KIND_WHEN"):
        parse_label_value("worker-1-kill-30s")
    with pytest.raises(FaultSpecError, match="use whole seconds"):
        label_value(parse_fault("worker-1:kill@1.5s"))


def test_kill_fires_once_after_the_delay_from_the_current_start() -> None:
    s = FaultScheduler([parse_fault("worker-1:kill@10s"), parse_fault("worker-1:kill@10s")])
    assert s.due(100.0) == []  # not started yet
    s.on_start("worker-1", 100.0)
    assert s.due(109.9) == []
    [action] = s.due(110.0)
    assert (action.replica, action.signal, action.line) == (
        "worker-1",
        "SIGKILL",
        "fault worker-1:kill@10s: SIGKILL worker-1",
    )
    assert s.due(111.0) == []  # the second waits for the restarted process
    s.on_exit("worker-1")
    s.on_start("worker-1", 115.0)
    assert s.due(124.0) == [] and [a.signal for a in s.due(125.0)] == ["SIGKILL"]
    assert s.pending == [] and [f["at"] for f in s.fired] == [110.0, 125.0]


def test_step_faults_wait_for_the_current_process_to_report() -> None:
    s = FaultScheduler([parse_fault("chief-0:kill@step:50")])
    s.on_start("chief-0", 0.0)
    assert s.due(1000.0, {"chief-0": None}) == [] and s.due(1000.0, {"chief-0": 49}) == []
    [action] = s.due(1001.0, {"chief-0": 51})
    assert action.line == "fault chief-0:kill@step:50: SIGKILL chief-0 at step 51"
    assert s.fired[0]["at_step"] == 51


def test_preempt_is_sigterm_then_sigkill_unless_it_exits() -> None:
    s = FaultScheduler([parse_fault("chief-0:preempt@1s"), parse_fault("worker-0:preempt:5s@1s")], preempt_grace=30)
    s.on_start("chief-0", 0.0)
    s.on_start("worker-0", 0.0)
    assert [(a.replica, a.signal, a.line) for a in s.due(1.0)] == [
        ("chief-0", "SIGTERM", "fault chief-0:preempt@1s: SIGTERM chief-0 (preempted; SIGKILL in 30s)"),
        ("worker-0", "SIGTERM", "fault worker-0:preempt:5s@1s: SIGTERM worker-0 (preempted; SIGKILL in 5s)"),
    ]
    s.on_exit("chief-0")  # saved its checkpoint and left in time
    [kill] = s.due(6.0)
    assert (kill.replica, kill.signal) == ("worker-0", "SIGKILL")
    assert kill.line == "fault worker-0:preempt:5s@1s: SIGKILL worker-0, still running 5s after SIGTERM"
    assert s.due(31.0) == []


def test_stop_then_cont_and_the_next_fault_waits() -> None:
    s = FaultScheduler([parse_fault("worker-0:stop:20s@2s"), parse_fault("worker-0:kill@3s")])
    s.on_start("worker-0", 0.0)
    assert [(a.signal, a.line) for a in s.due(2.0)] == [
        ("SIGSTOP", "fault worker-0:stop:20s@2s: SIGSTOP worker-0 for 20s")
    ]
    assert s.due(10.0) == []  # frozen: the kill waits for SIGCONT
    assert [(a.signal, a.line) for a in s.due(22.0)] == [
        ("SIGCONT", "fault worker-0:stop:20s@2s: SIGCONT worker-0 after 20s"),
        ("SIGKILL", "fault worker-0:kill@3s: SIGKILL worker-0"),
    ]


def test_a_late_start_is_held_back_not_signalled() -> None:
    s = FaultScheduler([parse_fault("worker-0:late@15s"), parse_fault("worker-0:kill@step:3")])
    assert s.late_starts() == {"worker-0": 15.0}
    assert [str(f) for f in s.pending] == ["worker-0:late@15s", "worker-0:kill@step:3"]
    assert s.due(20.0, {"worker-0": None}) == []  # a late start is no signal; the kill waits for a process
    assert s.started_late("worker-0", 15.04) == "fault worker-0:late@15s: starting worker-0 15s after the others"
    assert s.late_starts() == {} and s.fired[0]["at"] == 15.04
    s.on_start("worker-0", 15.04)
    assert [a.signal for a in s.due(16.0, {"worker-0": 3})] == ["SIGKILL"]
    assert [parse_label_value(label_value(parse_fault("worker-0:late@15s")))] == [parse_fault("worker-0:late@15s")]
    with pytest.raises(FaultSpecError, match="worker-0 already starts late"):
        FaultScheduler([parse_fault("worker-0:late@15s"), parse_fault("worker-0:late@30s")])


def test_the_options_parse_on_a_command() -> None:
    @click.command()
    @fault_option
    @restart_policy_option
    def cmd(faults: tuple[FaultSpec, ...], restart_policy: str) -> None:
        click.echo(f"{restart_policy} {' '.join(map(str, faults))}")

    ok = CliRunner().invoke(cmd, ["--fault", "worker-1:kill@30s", "--fault", "chief:preempt@step:5"])
    assert (ok.exit_code, ok.output) == (0, "vertex worker-1:kill@30s chief-0:preempt@step:5\n")
    assert CliRunner().invoke(cmd, ["--restart-policy", "never"]).output == "never \n"
    bad = CliRunner().invoke(cmd, ["--fault", "worker-1:explode@30s"])
    assert bad.exit_code == 2
    assert "Invalid value for '--fault': fault 'worker-1:explode@30s': kind 'explode' is not one of" in bad.output
    assert "Traceback" not in bad.output


def test_the_steps_a_replica_pauses_at_are_its_pending_step_faults() -> None:
    scheduler = FaultScheduler([parse_fault("worker-0:kill@step:4"), parse_fault("worker-0:preempt@30s"),
                                parse_fault("worker-0:stop:1s@step:9"), parse_fault("chief-0:kill@step:2")])
    assert (scheduler.armed_steps("worker-0"), scheduler.armed_steps("chief-0")) == ([4, 9], [2])
    assert scheduler.armed_steps("worker-1") == []
    scheduler.on_start("worker-0", 0.0)
    [fired] = scheduler.due(1.0, {"worker-0": 4})
    assert fired.signal == "SIGKILL" and scheduler.armed_steps("worker-0") == [9]  # the next process's
