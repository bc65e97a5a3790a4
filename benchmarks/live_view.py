"""What the live view of `vtrain local` costs (issue 26: ≤ 1% of a run's CPU). Run by hand (not a test):

    python benchmarks/live_view.py [--job configs/quickstart.yaml] [--probe-seconds 20]

Runs a job in this process with the live view drawing to a pseudo-terminal (rich sees a TTY and
redraws once a second, as on a person's screen) and reports the CPU the view's thread used
(time.thread_time inside it: reading the job's progress, building and rendering the table) against
the CPU of the whole run (this process and every replica, getrusage SELF + CHILDREN). Two jobs:
the probe trainer (chief + 2 workers reporting a step every 50 ms, almost no CPU of their own: the
worst case for the ratio) and a real TensorFlow job file (default: the quickstart).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pty
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROBE = REPO / "tests" / "data" / "trainers" / "probe"


def cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(job_file: Path, out: Path) -> dict[str, float]:
    from vtrain.jobfile.load import load_config
    from vtrain.local.options import RunOptions
    from vtrain.local.runner import run_local
    from vtrain.view.live import Watch

    master, slave = pty.openpty()
    os.set_blocking(master, False)
    terminal = os.fdopen(slave, "w", encoding="utf-8", buffering=1)
    drained = [0]
    stop = threading.Event()

    def drain() -> None:  # a terminal that reads what it is sent, as a person's would
        while not stop.is_set():
            with contextlib.suppress(BlockingIOError, OSError):
                drained[0] += len(os.read(master, 65536))
            time.sleep(0.05)

    threading.Thread(target=drain, daemon=True).start()
    view = Watch(live=True, logs=io.StringIO(), err=terminal)
    config = load_config(str(job_file), (), target="local")
    job = run_local(config, options=RunOptions(output_dir=out), out=None, notices=view.notices,
                    on_line=view.on_line)  # fmt: skip
    before, wall = cpu(), time.monotonic()
    view.watch(job, job.wait)
    run_cpu, wall = cpu() - before, time.monotonic() - wall
    stop.set()
    return {"state": job.summary["state"], "wall_s": wall, "run_cpu_s": run_cpu, "view_cpu_s": view.cpu_seconds,
            "share": view.cpu_seconds / run_cpu if run_cpu else float("nan"), "tty_bytes": drained[0]}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", type=Path, default=REPO / "configs" / "quickstart.yaml")
    parser.add_argument("--probe-seconds", type=float, default=20.0)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="vtrain-live-") as work:
        probe = Path(work) / "probe.yaml"
        count = int(args.probe_seconds / 0.05)
        probe.write_text(f"name: live-view-probe\ntrainer:\n  package: {PROBE}\n  module: trainer.task\n"
                         f"  args: [--steps=all, --count={count}, --step-seconds=0.05]\n"
                         "cluster:\n  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 2}\n")  # fmt: skip
        for name, path in (("probe (3 replicas)", probe), (args.job.name, args.job)):
            print(f"running: {name}", file=sys.stderr, flush=True)
            rows.append((name, measure(path, Path(work) / name.split()[0])))
    print(f"{'job':<22} {'state':<10} {'wall s':>7} {'run CPU s':>10} {'view CPU s':>11} {'view share':>11}")
    for name, r in rows:
        state = str(r["state"]).removeprefix("JOB_STATE_")
        print(f"{name:<22} {state:<10} {r['wall_s']:>7.1f} {r['run_cpu_s']:>10.2f} {r['view_cpu_s']:>11.3f} "
              f"{100 * r['share']:>10.2f}%")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
