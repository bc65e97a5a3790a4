"""Faults to inject into a local run, as a Spot VM or a flaky machine would: parsing and a pure scheduler.

    vtrain local job.yaml --fault worker-1:kill@30s --fault chief-0:preempt@step:200

A spec is ``REPLICA:KIND@WHEN``:

* REPLICA: a replica label, ``chief-0`` (or ``chief``), ``worker-N``, ``ps-N``, ``evaluator-N``;
* KIND: ``kill`` (SIGKILL), ``preempt`` or ``preempt:GRACE`` (SIGTERM, then SIGKILL after GRACE,
  default 30 s: the notice a Spot VM gets), ``stop:SECONDS`` (SIGSTOP, SIGCONT SECONDS later: a
  frozen machine), ``late`` (the replica is started WHEN after the others: a VM Vertex brought up
  later; no signal);
* WHEN: a duration after the replica's current process started (``45s``, ``2m``, ``1.5s``), or
  ``step:N``: once that process has reported step N (``runtime.report_step``, read from the
  file named by VTRAIN_STATUS_FILE: :mod:`vtrain.runtime.status`). For ``late``, a duration after
  the job's other replicas started (``worker-0:late@15s``).

Each spec fires once. Specs for the same replica fire in the order given, each measured from the
process running when the previous one is done, so ``--fault worker-1:kill@10s`` twice kills
worker-1 ten seconds into its first run and ten seconds into its restarted run.

The emulator takes the same faults from a job's labels (label values allow only ``a-z0-9_-``):
``vtrain-fault: worker-1_kill_30s``, ``vtrain-fault-2: chief-0_preempt-10s_step-50``,
``worker-0_stop-20s_10s`` (:func:`specs_from_labels`).

:class:`FaultScheduler` is pure: the supervisor tells it when each replica (re)starts and exits
and which step each reports; :meth:`FaultScheduler.due` answers with the signals to send now.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vtrain.errors import FaultSpecError

KINDS = ("kill", "preempt", "stop", "late")
KIND_NAMES = "kill, preempt[:GRACE], stop:SECONDS, late"
DEFAULT_PREEMPT_GRACE = 30.0  # Compute Engine's preemption notice for Spot VMs
FAULT_LABEL = "vtrain-fault"
_REPLICA = re.compile(r"^(chief|worker|ps|evaluator)(?:-(\d+))?$")
SYNTAX = ("REPLICA:KIND@WHEN, e.g. worker-1:kill@30s, chief-0:preempt@step:200, worker-0:stop:20s@1m, "
          "worker-0:late@15s")


@dataclass(frozen=True)
class FaultSpec:
    """One fault: what to do to which replica, and when."""

    replica: str
    kind: str  # kill | preempt | stop | late
    seconds: float | None = None  # stop: how long frozen; preempt: the grace before SIGKILL
    after: float | None = None  # seconds after the replica's process started
    step: int | None = None  # or: once it reported this step

    def __str__(self) -> str:
        kind = self.kind if self.seconds is None else f"{self.kind}:{_fmt(self.seconds)}"
        when = f"step:{self.step}" if self.step is not None else _fmt(self.after or 0.0)
        return f"{self.replica}:{kind}@{when}"

    def to_dict(self) -> dict[str, Any]:
        return {"spec": str(self), "replica": self.replica, "kind": self.kind, "seconds": self.seconds,
                "after": self.after, "step": self.step}  # fmt: skip


def _fmt(seconds: float) -> str:
    return f"{seconds:g}s"


def parse_seconds(text: str) -> float | None:
    """Seconds by vtrain's one duration grammar (:mod:`vtrain.durations`); None if it is not one."""
    from vtrain.durations import DurationError
    from vtrain.durations import parse_seconds as seconds

    try:
        return seconds(text)
    except DurationError:
        return None


def _replica(text: str, spec: str) -> str:
    m = _REPLICA.match(text.strip().lower())
    if not m:
        raise FaultSpecError(f"fault '{spec}': '{text}' is not a replica (chief-0, worker-N, ps-N, evaluator-N)")
    if m.group(1) == "chief" and m.group(2) not in (None, "0"):
        raise FaultSpecError(f"fault '{spec}': the chief is chief-0 (pool 0 has exactly one replica)")
    return f"{m.group(1)}-{m.group(2) or '0'}"


def parse_fault(text: str) -> FaultSpec:
    """`REPLICA:KIND@WHEN` → FaultSpec; FaultSpecError (exit 2) saying what is wrong and what is allowed."""
    spec = text.strip()
    target, at, when = spec.rpartition("@")
    if not at or not target or not when:
        raise FaultSpecError(f"fault '{spec}' is not {SYNTAX}")
    replica_text, _, kind_text = target.partition(":")
    replica = _replica(replica_text, spec)
    kind, _, arg = kind_text.strip().lower().partition(":")
    if kind not in KINDS:
        from difflib import get_close_matches

        near = get_close_matches(kind, KINDS, n=1)
        hint = f"; did you mean '{near[0]}'?" if near else ""
        raise FaultSpecError(f"fault '{spec}': kind '{kind}' is not one of {KIND_NAMES}{hint}")
    seconds = None
    if kind == "kill" and arg:
        raise FaultSpecError(f"fault '{spec}': kill takes no argument (SIGKILL is immediate)")
    if kind == "late" and arg:
        raise FaultSpecError(f"fault '{spec}': late takes no argument: how late is WHEN (worker-0:late@15s)")
    if kind == "stop" and not arg:
        raise FaultSpecError(f"fault '{spec}': stop needs how long, e.g. stop:20s")
    if arg:
        seconds = parse_seconds(arg)
        if seconds is None:
            raise FaultSpecError(f"fault '{spec}': '{arg}' is not a duration like 20s, 1m or 1.5s")
        if seconds <= 0:
            raise FaultSpecError(f"fault '{spec}': {kind}:{arg} must be longer than 0s")
    when = when.strip().lower()
    if when.startswith("step:"):
        if kind == "late":
            raise FaultSpecError(f"fault '{spec}': a late start is a duration after the others started (late@15s), "
                                 "not a step: the replica has reported none yet")
        step = when[5:].strip()
        if not (step.isascii() and step.isdigit()) or int(step) < 1:  # '²' is a digit to str.isdigit
            raise FaultSpecError(f"fault '{spec}': step:N needs a whole number of steps >= 1, got '{step}'")
        return FaultSpec(replica, kind, seconds, step=int(step))
    after = parse_seconds(when)
    if after is None:
        raise FaultSpecError(f"fault '{spec}': WHEN '{when}' is neither a duration (30s, 2m, 1.5s) nor step:N")
    return FaultSpec(replica, kind, seconds, after=after)


def check_replicas(specs: Iterable[FaultSpec], labels: Sequence[str]) -> None:
    """Every spec names a replica this run has (after --max-replicas); else one line with the nearest."""
    from difflib import get_close_matches

    for spec in specs:
        if spec.replica not in labels:
            near = get_close_matches(spec.replica, labels, n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise FaultSpecError(f"fault '{spec}': this run has no replica {spec.replica} "
                                 f"(it has {', '.join(labels)}){hint}")  # fmt: skip


# ---- the emulator's labels --------------------------------------------------------------------
def label_value(spec: FaultSpec) -> str:
    """The spec as a label value (a-z0-9_-, ≤ 63): worker-1_kill_30s, chief-0_preempt-10s_step-50."""
    kind = spec.kind if spec.seconds is None else f"{spec.kind}-{_fmt(spec.seconds)}"
    when = f"step-{spec.step}" if spec.step is not None else _fmt(spec.after or 0.0)
    value = f"{spec.replica}_{kind}_{when}"
    if not re.fullmatch(r"[a-z0-9_-]{1,63}", value):
        raise FaultSpecError(f"fault '{spec}' cannot be a label value ({value!r}: use whole seconds)")
    return value


def parse_label_value(value: str) -> FaultSpec:
    """`worker-1_kill_30s` → the spec `worker-1:kill@30s`."""
    parts = value.split("_")
    if len(parts) != 3:
        raise FaultSpecError(
            f"label {FAULT_LABEL}={value!r} is not REPLICA_KIND_WHEN, e.g. worker-1_kill_30s, "
            "chief-0_preempt-10s_step-50, worker-0_stop-20s_1m"
        )
    replica, kind, when = parts
    kind_name, dash, arg = kind.partition("-")
    kind = f"{kind_name}:{arg}" if dash else kind_name
    when = f"step:{when[5:]}" if when.startswith("step-") else when
    return parse_fault(f"{replica}:{kind}@{when}")


def specs_from_labels(labels: Mapping[str, str]) -> list[FaultSpec]:
    """The faults a job asks the emulator for: labels `vtrain-fault`, `vtrain-fault-2`, ... in key order."""
    keys = sorted(
        (k for k in labels if k == FAULT_LABEL or re.fullmatch(rf"{FAULT_LABEL}-\d+", k)),
        key=lambda k: int(k.rsplit("-", 1)[1]) if k != FAULT_LABEL else 1,
    )
    return [parse_label_value(labels[k]) for k in keys]


# ---- the scheduler ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Action:
    """Send `signal` to `replica`'s process group now; print `line` as a [vtrain] notice."""

    replica: str
    signal: str  # SIGKILL | SIGTERM | SIGSTOP | SIGCONT
    line: str
    spec: FaultSpec


@dataclass
class _Follow:
    at: float
    signal: str
    line: str
    spec: FaultSpec


@dataclass
class FaultScheduler:
    """Which faults are due, from replica start times and reported steps. No clock, no processes."""

    specs: Sequence[FaultSpec]
    preempt_grace: float = DEFAULT_PREEMPT_GRACE
    fired: list[dict[str, Any]] = field(default_factory=list)
    _queue: dict[str, list[FaultSpec]] = field(default_factory=dict)
    _started: dict[str, float] = field(default_factory=dict)
    _follow: dict[str, _Follow] = field(default_factory=dict)

    _late: dict[str, FaultSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for spec in self.specs:
            if spec.kind == "late":
                if spec.replica in self._late:
                    raise FaultSpecError(f"fault '{spec}': {spec.replica} already starts late "
                                         f"({self._late[spec.replica]}); one late start per replica")
                self._late[spec.replica] = spec
            else:
                self._queue.setdefault(spec.replica, []).append(spec)

    def late_starts(self) -> dict[str, float]:
        """The replicas held back at the job's start, and how many seconds after the others each starts."""
        return {replica: spec.after or 0.0 for replica, spec in self._late.items()}

    def started_late(self, replica: str, now: float) -> str:
        """`replica`, held back, starts now (`now` seconds after the others): the line that says so."""
        spec = self._late.pop(replica)
        self.fired.append({**spec.to_dict(), "at": round(now, 3), "at_step": None})
        return f"fault {spec}: starting {replica} {_fmt(round(now, 1))} after the others"

    def on_start(self, replica: str, at: float) -> None:
        """`replica`'s process (re)started at `at`: WHEN durations count from here."""
        self._started[replica] = at
        self._follow.pop(replica, None)

    def on_exit(self, replica: str) -> None:
        """`replica`'s process is gone: a pending SIGKILL/SIGCONT for it is moot."""
        self._started.pop(replica, None)
        self._follow.pop(replica, None)

    def armed_steps(self, replica: str) -> list[int]:
        """The steps `replica`'s next process has a fault waiting for (its env's VTRAIN_FAULT_STEPS: the
        runtime pauses there, so the signal lands at that step)."""
        return sorted({spec.step for spec in self._queue.get(replica, ()) if spec.step is not None})

    @property
    def pending(self) -> list[FaultSpec]:
        return [*self._late.values(), *(spec for specs in self._queue.values() for spec in specs)]

    def due(self, now: float, steps: Mapping[str, int | None] | None = None) -> list[Action]:
        """The signals to send at `now`; `steps` = the step each replica's *current* process reported."""
        steps = steps or {}
        out: list[Action] = []
        for replica, follow in list(self._follow.items()):
            if now >= follow.at:
                del self._follow[replica]
                out.append(Action(replica, follow.signal, follow.line, follow.spec))
        for replica, queue in list(self._queue.items()):
            started = self._started.get(replica)
            if not queue or started is None or replica in self._follow:
                continue
            spec = queue[0]
            step = steps.get(replica)
            if spec.step is not None:
                ready = step is not None and step >= spec.step
            else:
                ready = now - started >= (spec.after or 0.0)
            if ready:
                queue.pop(0)
                if spec.kind != "stop":  # this process is going: the next fault waits for its successor
                    del self._started[replica]
                out.append(self._fire(spec, now, step))
        return out

    def _fire(self, spec: FaultSpec, now: float, step: int | None) -> Action:
        r = spec.replica
        at = f" at step {step}" if spec.step is not None else ""
        self.fired.append({**spec.to_dict(), "at": round(now, 3), "at_step": step})
        if spec.kind == "kill":
            return Action(r, "SIGKILL", f"fault {spec}: SIGKILL {r}{at}", spec)
        if spec.kind == "stop":
            seconds = spec.seconds or 0.0
            self._follow[r] = _Follow(
                now + seconds, "SIGCONT", f"fault {spec}: SIGCONT {r} after {_fmt(seconds)}", spec
            )
            return Action(r, "SIGSTOP", f"fault {spec}: SIGSTOP {r}{at} for {_fmt(seconds)}", spec)
        grace = self.preempt_grace if spec.seconds is None else spec.seconds
        line = f"fault {spec}: SIGKILL {r}, still running {_fmt(grace)} after SIGTERM"
        self._follow[r] = _Follow(now + grace, "SIGKILL", line, spec)
        return Action(r, "SIGTERM", f"fault {spec}: SIGTERM {r}{at} (preempted; SIGKILL in {_fmt(grace)})", spec)


__all__ = [
    "DEFAULT_PREEMPT_GRACE",
    "FAULT_LABEL",
    "KINDS",
    "Action",
    "FaultScheduler",
    "FaultSpec",
    "check_replicas",
    "label_value",
    "parse_fault",
    "parse_label_value",
    "parse_seconds",
    "specs_from_labels",
]
