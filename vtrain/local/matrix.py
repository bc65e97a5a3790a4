"""`vtrain local JOB --fault-matrix`: the job under the faults users meet on Vertex, one run after another, and
whether each ended as Vertex would end it.

    vtrain local job.yaml --fault-matrix                 # every scenario
    vtrain local job.yaml --fault-matrix kill,late       # some

First a fault-free run (its steps and its time place the faults), then one run per scenario, each in its own
output folder (no checkpoint of one run reaches the next):

========  ====================================  ===========================================================
scenario  what                                  the fault
========  ====================================  ===========================================================
kill      a worker killed mid-run               ``worker-0:kill@step:N``, N half the steps the first run made
preempt   the chief preempted (a Spot VM)       ``chief-0:preempt@step:N``: SIGTERM, SIGKILL after the grace
late      a worker started late                 ``worker-0:late@D``, D half the first run's time (5 to 60 s)
stop      a replica frozen                      ``worker-0:stop:F@step:N``, F half the first run's time (3-30 s)
retry     a whole-job retry                     ``worker-0:kill@step:1`` six times: past the 5 restarts a replica
                                                gets, Vertex retries the whole job
========  ====================================  ===========================================================

(a job with no worker uses the chief where a worker is named, and has no `late` row). What Vertex would do is
the restart policy's answer (:mod:`vtrain.local.policy`, with the job's ``scheduling``): each fault's exits fed to
a fresh :class:`~vtrain.local.policy.RestartPolicy`; a fault that exhausts no budget is survived, so the job must
succeed (its trainer resuming from its checkpoints), one past ``disableRetries`` or ``--restart-policy never``
fails it. A row passes when the run ended that way. Recovery time and steps redone are the restart policy's own
measures (the longest of the run).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtrain.errors import UsageError
from vtrain.local.faults import FaultSpec, parse_fault
from vtrain.local.policy import FAIL, MAX_RESTARTS, Exit, PolicyConfig, RestartPolicy

if TYPE_CHECKING:
    from vtrain.local.job import LocalJob
    from vtrain.local.options import RunOptions

SUCCEEDED = "JOB_STATE_SUCCEEDED"
FAILED = "JOB_STATE_FAILED"
SCENARIOS = ("kill", "preempt", "late", "stop", "retry")
MATRIX_TIMEOUT_FACTOR = 10.0
MIN_TIMEOUT = 300.0
TITLES = {"fault-free": "no fault", "kill": "a worker killed mid-run", "preempt": "the chief preempted",
          "late": "a worker started late", "stop": "a replica frozen", "retry": "a whole-job retry"}


def parse_names(text: str | None) -> list[str]:
    """`kill,late` (or `all`, or nothing: every scenario) → the scenarios, in the table's order; UsageError."""
    if text is None or text.strip().lower() in ("", "all"):
        return list(SCENARIOS)
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in SCENARIOS:
            from difflib import get_close_matches

            near = get_close_matches(name, SCENARIOS, n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise UsageError(f"--fault-matrix {text}: '{name}' is not a scenario ({', '.join(SCENARIOS)}){hint}")
    return [n for n in SCENARIOS if n in names]


@dataclass(frozen=True)
class Baseline:
    """What the fault-free run showed: its seconds, and the last step each replica reported (None: none)."""

    seconds: float
    steps: Mapping[str, int | None]


def plan_faults(name: str, labels: Sequence[str], baseline: Baseline) -> list[str] | None:
    """The fault specs of scenario `name` for a run with these replica labels; None when it does not apply."""
    worker = next((label for label in labels if label.startswith("worker-")), None)
    target = worker or "chief-0"

    def mid(label: str) -> str:
        step = baseline.steps.get(label)
        return f"step:{max(1, step // 2)}" if step else f"{max(1.0, round(baseline.seconds / 2, 1)):g}s"

    half = baseline.seconds / 2
    if name == "kill":
        return [f"{target}:kill@{mid(target)}"]
    if name == "preempt":
        return [f"chief-0:preempt@{mid('chief-0')}"]
    if name == "late":
        return [f"{worker}:late@{round(min(60.0, max(5.0, half))):g}s"] if worker else None
    if name == "stop":
        return [f"{target}:stop:{round(min(30.0, max(3.0, half))):g}s@{mid(target)}"]
    if name == "retry":
        at = "step:1" if baseline.steps.get(target) else "1s"
        return [f"{target}:kill@{at}"] * (MAX_RESTARTS + 1)
    raise ValueError(name)


def expected_state(job: Mapping[str, Any], labels: Sequence[str], faults: Sequence[FaultSpec],
                   policy: str = "vertex") -> str:
    """How Vertex would end the job under `faults`, by the restart policy alone: FAILED when their exits fail it."""
    rules = RestartPolicy(PolicyConfig.from_job(job, policy), tuple(labels))
    for n, spec in enumerate(faults):
        if spec.kind not in ("kill", "preempt"):  # a late start, a freeze: no exit of their own
            continue
        code = -9 if spec.kind == "kill" else -15
        if rules.on_exit(Exit(spec.replica, code, at=float(n))).action == FAIL:
            return FAILED
    return SUCCEEDED


@dataclass(frozen=True)
class Row:
    """One scenario's run: what was injected, how it ended, what Vertex would do, the measures."""

    scenario: str
    title: str
    faults: tuple[str, ...]
    expected: str
    outcome: str
    seconds: float
    recovery_seconds: float | None
    steps_redone: int | None
    restarts: int
    attempts: int
    run_dir: str | None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == self.expected

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "faults": list(self.faults), "passed": self.passed}


def row_of(name: str, faults: Sequence[str], expected: str, job: LocalJob) -> Row:
    summary = job.summary
    restarts = summary.get("restarts") or {}
    recoveries = restarts.get("recoveries") or []
    seconds = [r["seconds"] for r in recoveries if r.get("seconds") is not None]
    redone = [r["steps_redone"] for r in recoveries if r.get("steps_redone") is not None]
    error = str(summary.get("error") or "").split("\n", 1)[0] or None
    return Row(name, TITLES[name], tuple(faults), expected, str(summary.get("state")), float(summary.get("seconds", 0)),
               max(seconds) if seconds else None, max(redone) if redone else None,
               sum((restarts.get("restarts") or {}).values()), int(restarts.get("attempts") or 1),
               str(job.run_dir), error)  # fmt: skip


def run_matrix(start: Callable[[RunOptions], LocalJob], options: RunOptions, job: Mapping[str, Any],
               names: Sequence[str], *, notice: Callable[[str], None] = lambda text: None,
               timeout: float | None = None) -> list[Row]:
    """The fault-free run, then each scenario of `names`, one after another; `start(options)` starts the job with
    the options given (each run's own output folder under `options.output_dir`, its faults). Each run fails after
    `timeout` (--timeout); without one, the fault-free run has the job's own and each scenario
    MATRIX_TIMEOUT_FACTOR times the fault-free run's time, at least MIN_TIMEOUT."""
    import tempfile

    from vtrain.local.env import plan

    labels = [r.label for r in plan(job, options.max_replicas).replicas]
    root = Path(options.output_dir) if options.output_dir is not None else \
        Path(tempfile.mkdtemp(prefix="vtrain-fault-matrix-"))  # fmt: skip
    rows: list[Row] = []

    def one(name: str, specs: list[str], limit: float | None) -> LocalJob:
        faults = [parse_fault(s) for s in specs]
        notice(f"fault matrix {len(rows) + 1}/{len(names) + 1}: {name}" + (f" ({', '.join(specs)})" if specs else ""))
        run = start(options.replace(output_dir=root / name, faults=faults, keep=True, timeout=limit))
        try:
            run.wait()
        finally:
            if not run.done:  # Ctrl-C: nothing left running
                run.cancel(force=True)
                run.wait()
        expected = expected_state(job, labels, faults, options.restart_policy)
        rows.append(row_of(name, specs, expected, run))
        notice(f"fault matrix: {name} ended {run.state.removeprefix('JOB_STATE_')} "
               f"({'as' if rows[-1].passed else 'not as'} Vertex would end it)")
        return run

    first = one("fault-free", [], timeout)
    steps = {label: (points[-1][1] if points else None)
             for label, points in (first.summary.get("steps") or {}).items()}  # fmt: skip
    baseline = Baseline(float(first.summary.get("seconds") or 0.0), steps)
    # A scenario that never ends (a restarted replica waiting for a peer that is gone) fails at this limit, which
    # leaves room for restarts and a whole-job retry: MATRIX_TIMEOUT_FACTOR times the fault-free run, at least 5 min.
    limit = timeout if timeout is not None else max(MIN_TIMEOUT, MATRIX_TIMEOUT_FACTOR * baseline.seconds)
    for name in names:
        specs = plan_faults(name, labels, baseline)
        if specs is None:
            notice(f"fault matrix: {name} does not apply to this job (it has no worker)")
            continue
        one(name, specs, limit)
    return rows


def table(rows: Sequence[Row]) -> list[str]:
    """The matrix as text lines: scenario, faults, outcome, what Vertex would do, recovery, steps redone, result."""
    head = ("scenario", "fault", "outcome", "vertex would", "recovery s", "redone", "result")
    body = [(r.scenario, ", ".join(_short(r.faults)) or "-", r.outcome.removeprefix("JOB_STATE_"),
             r.expected.removeprefix("JOB_STATE_"), f"{r.recovery_seconds:.1f}" if r.recovery_seconds is not None
             else "-", str(r.steps_redone) if r.steps_redone is not None else "-",
             "pass" if r.passed else "FAIL") for r in rows]  # fmt: skip
    widths = [max(len(str(line[i])) for line in (head, *body)) for i in range(len(head))]
    right = {4, 5}

    def fmt(line: Sequence[str]) -> str:
        return "  ".join(str(v).rjust(w) if i in right else str(v).ljust(w)
                         for i, (v, w) in enumerate(zip(line, widths, strict=True))).rstrip()  # fmt: skip

    return [fmt(head), "-" * len(fmt(head)), *(fmt(line) for line in body)]


def _short(faults: Sequence[str]) -> list[str]:
    """Repeated specs once, with their count: `worker-0:kill@step:1 ×6`."""
    out: list[str] = []
    for spec in dict.fromkeys(faults):
        n = list(faults).count(spec)
        out.append(f"{spec} ×{n}" if n > 1 else spec)
    return out


def github(rows: Sequence[Row], file: str | None = None) -> list[str]:
    """One GitHub Actions workflow command per row: ::error for a scenario that did not end as Vertex would,
    ::notice for one that did (the CI guide's annotations; `file` puts them on the job file)."""
    from vtrain.errors import Problem

    out = []
    for r in rows:
        verdict = "as Vertex would" if r.passed else f"not as Vertex would ({r.expected.removeprefix('JOB_STATE_')})"
        detail = f": {r.error}" if r.error and not r.passed else ""
        message = (f"{r.title} ({', '.join(_short(r.faults)) or 'no fault'}) ended "
                   f"{r.outcome.removeprefix('JOB_STATE_')}, {verdict}{detail}")  # fmt: skip
        line = Problem(f"fault matrix {r.scenario}", message, file=file, severity="error").github()
        out.append(line if not r.passed else line.replace("::error ", "::notice ", 1))
    return out


__all__ = ["SCENARIOS", "Baseline", "Row", "expected_state", "github", "parse_names", "plan_faults", "row_of",
           "run_matrix", "table"]
