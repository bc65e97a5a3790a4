"""`vtrain diff`: the plan step for CI, what a submission would change, field by field."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from vtrain.commands._options import (
    echo_json,
    output_option,
    set_option,
    where_options,
)
from vtrain.errors import VtrainError

if TYPE_CHECKING:
    from vtrain.cloud.target import Where

#: Like diff(1): 0 no change, 1 changes, 2 trouble (bad job file or usage, unreadable file, API refusal).
TROUBLE = 2


@click.command()
@click.argument("job_file", metavar="JOB.yaml", type=click.Path(dir_okay=False))
@click.argument("job", metavar="[JOB_ID]", required=False)
@click.option("--against", metavar="FILE", type=click.Path(dir_okay=False),
              help="A saved request: `vtrain render` (json, yaml or gcloud) or `submit --dry-run -o json`.")
@click.option("--last", is_flag=True, help="The newest job vtrain submitted with this job's name.")
@click.option("--show-secrets", is_flag=True, help="Print env values whose names look secret.")
@output_option("text", "json")
@set_option
@where_options
def diff(
    job_file: str,
    job: str | None,
    against: str | None,
    last: bool,
    show_secrets: bool,
    output: str,
    overrides: tuple[str, ...],
    where: Where,
) -> None:
    """Show what would change: the request JOB.yaml makes now against a saved render
    (--against FILE), a submitted job (JOB_ID or resource name), or the last job submitted
    from this file (--last).

    One line per field (+ added, - removed, ~ changed), paths like
    jobSpec.workerPoolSpecs[1].replicaCount. Exit 0 no change, 1 changes, 2 trouble
    (an invalid job file, a bad option, an unreadable file, a refused API call), as diff(1).
    """
    from vtrain.cloud.diff import diff_job
    try:
        result = diff_job(job_file, against=against, job=job, last=last, overrides=overrides,
                          where=where, show_secrets=show_secrets)  # fmt: skip
    except VtrainError as err:
        err.show()
        raise SystemExit(TROUBLE) from None
    if output == "json":
        echo_json(result.to_dict())
    else:
        click.echo(f"--- {result.before}")
        click.echo(f"+++ {result.after}")
        for change in result.changes:
            click.echo(str(change))
        n = len(result.changes)
        click.echo(f"{n} change{'s' if n != 1 else ''}" if n else "no changes")
    raise SystemExit(result.exit_code)
