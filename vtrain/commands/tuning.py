"""`vtrain local` on a job file with `tuning:`: the study runs here, with a live table of trials."""

from __future__ import annotations

import json
import sys
import threading
from typing import IO, Any

import click

from vtrain.errors import JobFailed
from vtrain.foreign import printable


class LiveTable:
    """Notices as lines and, on a terminal, the trial table redrawn below them at each change;
    elsewhere the lines only (the table comes once, at the end)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.lock = threading.Lock()
        self.shown = 0
        self.study: Any = None

    def _erase(self) -> None:
        if self.shown:
            self.stream.write(f"\033[{self.shown}F\033[J")
            self.shown = 0

    def _draw(self) -> None:
        if self.live and self.study is not None and self.study.trials:
            lines = self.study.table()
            self.stream.write("\n".join(lines) + "\n")
            self.shown = len(lines)

    def write(self, text: str) -> int:
        # a trial's error quotes its trainer
        shown = "\n".join(printable(part, limit=None) for part in text.split("\n"))
        with self.lock:
            self._erase()
            self.stream.write(shown)
            self._draw()
            self.stream.flush()
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def changed(self, study: Any) -> None:
        with self.lock:
            self.study = study
            self._erase()
            self._draw()
            self.stream.flush()

    def close(self) -> None:
        with self.lock:
            self._erase()
            self.live = False


def run_study(config: Any, *, output_dir: str | None, max_parallel: int | None, seed: int, max_replicas: int | None,
              timeout: float | None, startup_timeout: float, allow_credentials: bool, output: str,
              stream_logs: bool, restart_policy: str = "vertex", runtime: str = "auto") -> None:
    """Run the study, print the table and the best trial; exit as `vtrain local` does."""
    from vtrain.handle import SUCCEEDED
    from vtrain.local.options import RunOptions
    from vtrain.local.study_run import run_local_tuning

    options = RunOptions(output_dir=output_dir, max_replicas=max_replicas, timeout=timeout,
                         startup_timeout=startup_timeout, allow_credentials=allow_credentials,
                         restart_policy=restart_policy, runtime=runtime)
    display = LiveTable(sys.stderr)
    study = None
    try:
        study = run_local_tuning(config, options=options, max_parallel=max_parallel, seed=seed,
                                 notices=display,  # type: ignore[arg-type]
                                 out=(sys.stderr if output == "json" else sys.stdout) if stream_logs else None,
                                 on_change=display.changed)
        state = study.wait()
    except KeyboardInterrupt as err:
        if study is None:
            raise
        from vtrain.proctree import interruption

        said = interruption(err)[0]
        click.echo(f"[vtrain] interrupted ({said}): stopping every trial ({said} again to kill at once)", err=True)
        study.cancel()
        try:
            state = study.wait()
        except KeyboardInterrupt:
            study.cancel(force=True)
            state = study.wait()
    finally:
        display.close()
    result = study.summary
    if output == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        for line in study.table():
            click.echo(line)
    best = study.best
    seconds = result["seconds"]
    if state == SUCCEEDED and best is not None:
        click.echo(f"[vtrain] study {study.display_name} SUCCEEDED in {seconds:.1f} s: best trial {best.id}, "
                   f"{study.tuning.metric.name} {best.final:.6g} with {' '.join(best.args)}; outputs in "
                   f"{study.output_dir}", err=True)
        return
    detail = f": {study.error}" if study.error and study.error != "cancelled" else ""
    raise JobFailed(f"study {study.display_name} ({study.job_id}) ended {state} after {seconds:.1f} s{detail}\n"
                    f"outputs and logs: {study.output_dir}", state=state, exit_code=study.exit_code)


def echo_trials(job: Any) -> None:
    """For a HyperparameterTuningJob handle: the trial table and the best trial (nothing for a CustomJob)."""
    if getattr(job, "kind", "") != "tuning":
        return
    from vtrain.tuning.table import format_table, format_value

    rows = job.rows()
    metric, _ = job.metric
    best = job.best_trial
    if not rows:
        click.echo("trials: none yet")
        return
    click.echo("trials:")
    for line in format_table(rows, metric, best):
        click.echo(f"  {line}")
    if best is not None:
        row = next(r for r in rows if r.id == best)
        flags = " ".join(f"--{k}={v}" for k, v in row.params.items())
        click.echo(f"best trial {best}: {metric} {format_value(row.value)} with {flags}")
