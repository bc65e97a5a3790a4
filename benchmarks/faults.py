"""Does a trainer survive lost replicas and resume where it was? Run by hand (not a test):

    python benchmarks/faults.py [--template custom-loop|keras] [--epochs 4] [--steps 100] [--only NAME]

A chief + 2 workers job (MultiWorkerMirrored on 127.0.0.1) is run by `vtrain local` once without
faults, then once per scenario with `--fault` flags, under the default `--restart-policy vertex`:

    scenario                 what is injected
    kill a worker at 50%     worker-1:kill@step:N/2            (SIGKILL, as an OOM kill or a crash)
    preempt the chief        chief-0:preempt:10s@step:N/2      (SIGTERM, SIGKILL 10 s later: a Spot VM)
    stop a worker 20 s       worker-0:stop:20s@step:N/3        (SIGSTOP/SIGCONT: a frozen machine)
    kill twice               worker-1:kill@step:N/3, worker-1:kill@step:2N/3
    permanent error          a trainer refusing its arguments (a typo in trainer.args): FAILED at once,
                             no restart

and prints, per scenario: the final state, restarts (per replica, from the job's result), seconds
to recover (failure → first step reported by the restarted replica), steps redone (last step before
the failure − the step it resumed at), and the final loss against the fault-free run's.
Targets (issue 11): steps redone ≤ one backup interval (--checkpoint-every / one epoch for keras);
final loss within 2% of the fault-free run.
Columns: restarts per replica over the run; "recover s", the longest time from a replica's failure
to the first step its restarted process reported; "redone", the most steps any replica did again
(its last step before the failure minus the step it resumed from); "loss vs clean", the final loss
against the fault-free run's. A lost worker fails its peers' collectives, so under
MultiWorkerMirrored every replica restarts once (TensorFlow's documented behaviour), each counted.
About 3 minutes on 2 CPU cores with the defaults (a small model, 4 x 100 steps).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOSS = re.compile(r"\[chief-0\].*epoch (\d+):.*loss ([\d.]+)")
VTRAIN = [sys.executable, "-m", "vtrain"]


@dataclass(frozen=True)
class Scenario:
    name: str
    faults: tuple[str, ...]  # with {half}, {third}, {two_thirds} filled from the total steps
    args: str = ""  # more trainer arguments
    expect: str = "JOB_STATE_SUCCEEDED"


SCENARIOS = (
    Scenario("fault-free", ()),
    Scenario("kill a worker at 50%", ("worker-1:kill@step:{half}",)),
    Scenario("preempt the chief", ("chief-0:preempt:10s@step:{half}",)),
    Scenario("stop a worker 20 s", ("worker-0:stop:20s@step:{third}",)),
    Scenario("kill twice", ("worker-1:kill@step:{third}", "worker-1:kill@step:{two_thirds}")),
    Scenario("permanent error", (), args=", --no-such-flag", expect="JOB_STATE_FAILED"),
)

JOB = """name: faults-bench
base_output_dir: {out}
trainer:
  package: {package}
  module: trainer.task
  image: tf-cpu.2-17
  args: [--epochs={epochs}, --steps-per-epoch={steps}, --batch-size=16{extra}]
cluster:
  chief: {{machine_type: n1-standard-4}}
  workers: {{replicas: 2}}
"""


def run(scenario: Scenario, args: argparse.Namespace, work: Path) -> dict[str, object]:
    total = args.epochs * args.steps
    faults = [f.format(half=total // 2, third=total // 3, two_thirds=2 * total // 3) for f in scenario.faults]
    out = work / re.sub(r"\W+", "-", scenario.name)
    extra = f", --checkpoint-every={args.checkpoint_every}" if args.template == "custom-loop" else ""
    package = work / "trainer"
    if not package.exists():
        shutil.copytree(REPO / "trainer_templates" / args.template, package)
    job = out / "job.yaml"
    out.mkdir(parents=True)
    job.write_text(JOB.format(out=out / "output", package=package, epochs=args.epochs, steps=args.steps,
                              extra=extra + scenario.args))  # fmt: skip
    argv = [*VTRAIN, "local", str(job), "-o", "json", "--timeout", "15m"]
    for fault in faults:
        argv += ["--fault", fault]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"name": scenario.name, "state": f"no result (exit {done.returncode})", "seconds": seconds,
                "log": done.stderr[-2000:]}  # fmt: skip
    restarts = result.get("restarts") or {}  # RestartPolicy.summary(), put there by the supervisor
    recoveries = restarts.get("recoveries") or []
    losses = [float(m.group(2)) for m in LOSS.finditer(done.stderr)]
    return {
        "name": scenario.name,
        "state": result.get("state"),
        "expected": scenario.expect,
        "restarts": {k: v for k, v in (restarts.get("restarts") or {}).items() if v},
        "attempts": restarts.get("attempts", 1),
        "recover_s": [r["seconds"] for r in recoveries],
        "steps_redone": [r["steps_redone"] for r in recoveries],
        "final_loss": losses[-1] if losses else None,
        "seconds": round(seconds, 1),
    }


def table(rows: list[dict[str, object]], baseline: float | None, interval: int) -> str:
    head = (f"{'scenario':<22} {'state':<11} {'restarts':<34} {'recover s':>9} {'redone':>8} {'loss vs clean':>14} "
            f"{'run s':>6}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for row in rows:
        state = str(row["state"]).removeprefix("JOB_STATE_")
        ok = "" if row.get("expected") in (None, row["state"]) else " (!)"
        loss = row.get("final_loss")
        delta = f"{100 * (loss - baseline) / baseline:+.2f}%" if isinstance(loss, float) and baseline else "-"
        redone = [r for r in row.get("steps_redone") or [] if isinstance(r, int)]  # type: ignore[attr-defined]
        over = " (!)" if any(r > interval for r in redone) else ""
        restarts = ", ".join(f"{k} {v}" for k, v in (row.get("restarts") or {}).items()) or "-"  # type: ignore[union-attr]
        recover = row.get("recover_s") or []
        longest = f"{max(recover):.1f}" if recover else "-"  # type: ignore[type-var]
        most = f"{max(redone)}{over}" if redone else "-"
        lines.append(f"{row['name']:<22} {state + ok:<11} {restarts:<34} {longest:>9} {most:>8} {delta:>14} "
                     f"{row['seconds']:>6}")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--template", choices=("custom-loop", "keras"), default="custom-loop")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100, help="steps per epoch")
    parser.add_argument("--checkpoint-every", type=int, default=30, help="custom-loop backup interval (steps)")
    parser.add_argument("--only", help="run only the scenarios whose name contains this")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vtrain-faults-"))
    chosen = [s for s in SCENARIOS if s.name == "fault-free" or not args.only or args.only in s.name]
    rows = []
    try:
        for scenario in chosen:
            print(f"running: {scenario.name}", file=sys.stderr, flush=True)
            rows.append(run(scenario, args, work))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    baseline = rows[0].get("final_loss")
    interval = args.checkpoint_every if args.template == "custom-loop" else args.steps
    print(table(rows, baseline if isinstance(baseline, float) else None, interval))
    return 0 if all(r.get("expected") in (None, r["state"]) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
