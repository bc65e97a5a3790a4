"""`vtrain replay JOB`: a job's ending on Vertex AI rehearsed here, ending with one verdict line."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from vtrain.commands._faultopts import restart_policy_option
from vtrain.commands._options import (
    UserPath,
    duration_callback,
    max_replicas_option,
    output_option,
    startup_timeout_option,
    watch_options,
    where_options,
)


@click.command()
@click.argument("job", metavar="JOB")
@click.option("--output-dir", type=UserPath(file_okay=False, utf8=True),
              help="Where the replay writes (its AIP_* dirs, its run folder). Default: a new temporary dir, kept. "
              "Never the job's own base_output_dir.")
@max_replicas_option
@click.option("--timeout", callback=duration_callback, metavar="DURATION",
              help="Stop the replay after this long (e.g. 10m). Default: the job's scheduling.timeout.")
@startup_timeout_option
@click.option("--verbose", "-v", is_flag=True, help="Stream every line of every replica.")
@restart_policy_option
@watch_options
@where_options
@output_option("text", "json")
def replay(job: str, output_dir: str | None, max_replicas: int | None, timeout: float | None,
           startup_timeout: float | None, verbose: bool, restart_policy: str, plain: bool,
           progress_every: float | None, where: Any, output: str) -> None:
    """Replay JOB (a CustomJob's ID or resource name) here: did its ending on Vertex come from the trainer?

    Reads the job, its state and error and its log: the replica that failed first, its exit code, its last
    reported step and its last error lines. Then runs the same request here (its packages, its pools, --max-replicas
    capping them), resuming from the job's own checkpoints under its base_output_dir when there are any; a failure
    from outside the trainer (a preemption, a killed replica, a stock-out) is injected again, as a fault at the same
    step. Ends with one line: `replay: reproduced ...` or `replay: not reproduced ...` with what differs and what
    that suggests. A running or succeeded job replays too: its outcome so far is what is compared.
    Exit code: 0 reproduced, 1 not reproduced, 11 the replay was cancelled (Ctrl-C), 2 a bad option.
    """
    from vtrain.commands.local import tell_where
    from vtrain.errors import JobFailed
    from vtrain.handle import CANCELLED, exit_code
    from vtrain.home.replay import judge, plan_replay, start_replay
    from vtrain.local.options import RunOptions
    from vtrain.view.live import Watch, live_possible

    def notice(text: str) -> None:
        click.echo(f"[vtrain] {text}", err=True)

    options = RunOptions(output_dir=output_dir, max_replicas=max_replicas, timeout=timeout,
                         startup_timeout=startup_timeout or 120.0, restart_policy=restart_policy)
    the_plan = plan_replay(job, where, options, notice=notice)
    logs = sys.stderr if output == "json" else sys.stdout
    view = Watch(live=not plain and live_possible(sys.stderr), logs=logs, verbose=verbose,
                 progress_every=30.0 if progress_every is None else progress_every)  # fmt: skip

    def to_view(text: str) -> None:
        view.notices.write(f"[vtrain] {text}\n")
        view.notices.flush()

    local = None
    try:
        local = start_replay(the_plan, notice=to_view, on_line=view.on_line)
        view.watch(local, local.wait)
    except KeyboardInterrupt:
        if local is not None:
            local.cancel(force=True)
            local.wait()
        raise JobFailed(f"the replay of {job} was cancelled", state=CANCELLED,
                        exit_code=exit_code(CANCELLED)) from None
    tell_where(local, view, list(local.summary["replicas"]))
    verdict = judge(the_plan, local)
    if output == "json":
        click.echo(json.dumps(verdict.to_dict(), indent=2))
    else:
        for line in verdict.cloud.lines:
            click.echo(f"[vtrain] on Vertex, {verdict.cloud.replica}'s last error lines: {line}", err=True)
        click.echo(verdict.line)
    if not verdict.reproduced:
        click.get_current_context().exit(1)
