"""`vtrain timeline`: draw a run's timeline again, from a local run's folder or a Vertex job's logs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from vtrain.commands._options import where_options
from vtrain.commands.submit import _POLL

if TYPE_CHECKING:
    from vtrain.cloud.target import Where


@click.command()
@click.argument("target", metavar="RUN_DIR|JOB_ID")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write timeline.html/.png here. Default: the run folder; for a Vertex job ./timeline-JOB_ID/.")
@_POLL
@where_options
def timeline(target: str, out_dir: Path | None, poll: float, where: Where) -> None:
    """Draw timeline.html (and timeline.png with matplotlib) of a run: one lane per replica over time,
    its steps, restarts, faults fired, failures and recoveries.

    RUN_DIR is a local run's folder (OUTPUT/vtrain-local/JOB_ID, with its result.json) or an output
    dir (its latest run). Anything else is a Vertex job ID or name: its lanes come from its Cloud
    Logging lines (first to last line of each replica; Vertex reports no steps there).
    """
    from vtrain.view.timeline import draw_run

    path = Path(target).expanduser()
    if path.is_dir():
        from vtrain.constants import LOCAL_RUNS_DIR
        from vtrain.errors import UsageError

        run_dir = path if (path / "result.json").exists() else path / LOCAL_RUNS_DIR / "latest"
        if not (run_dir / "result.json").exists():
            raise UsageError(f"{path} is no local run's folder: it has no result.json (nor {LOCAL_RUNS_DIR}/latest/); "
                             "pass OUTPUT/vtrain-local/JOB_ID, or a Vertex job ID")
        into = out_dir or run_dir
        into.mkdir(parents=True, exist_ok=True)
        written = draw_run(run_dir.resolve(), into=into)
    else:
        written = _vertex(target, out_dir, poll, where)
    for file in written:
        click.echo(str(file))
    if not any(f.suffix == ".png" for f in written):
        click.echo("timeline.png needs matplotlib: pip install 'vtrain[plot]'", err=True)


def _vertex(job: str, out_dir: Path | None, poll: float, where: Where) -> list[Path]:
    import re

    from vtrain.cloud.jobs import get_job
    from vtrain.constants import JOB_ID_PATTERN, JOB_NAME_PATTERN
    from vtrain.errors import UsageError
    from vtrain.view.timeline import draw_run, result_from_logs

    if not re.fullmatch(f"{JOB_ID_PATTERN}|{JOB_NAME_PATTERN}", job.strip()):  # before any lookup or API call
        raise UsageError(f"{job!r} is neither a folder nor a Vertex job ID (digits) or name "
                         "(projects/PROJECT/locations/REGION/customJobs/ID)")
    handle = get_job(job, where, poll=poll)
    result = result_from_logs(handle.name, handle.display_name, handle.state, handle.logs(timestamps=True))
    into = out_dir or Path(f"timeline-{handle.job_id}")
    into.mkdir(parents=True, exist_ok=True)
    return draw_run(into, result, into=into)
