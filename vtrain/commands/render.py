"""`vtrain render`: the exact request a job file makes, offline (REST JSON, YAML, or gcloud's --config)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from vtrain.commands._options import UserPath, output_option, project_option, region_option, set_option

if TYPE_CHECKING:
    from vtrain.jobfile.model import JobConfig

_JOB = click.argument("job_file", metavar="JOB.yaml", type=UserPath(dir_okay=False))


@click.command()
@_JOB
@output_option("json", "yaml", "gcloud")
@set_option
@project_option
@region_option
@click.option("--show-secrets", is_flag=True, help="Print env values whose names look secret instead of <redacted>.")
def render(
    job_file: str, output: str, overrides: tuple[str, ...], project: str | None, region: str | None, show_secrets: bool
) -> None:
    """Print the exact CustomJob request, with no cloud access.

    json: the REST body of projects.locations.customJobs.create (hyperparameterTuningJobs.create
    when the file has `tuning:`); yaml: the same as YAML; gcloud: the file for
    `gcloud ai custom-jobs create --config` (`gcloud ai hp-tuning-jobs create --config`).
    """
    from vtrain.cloud.target import Where
    from vtrain.jobfile.load import load_config
    from vtrain.request.build import build_request
    from vtrain.request.render import render as render_job

    config = load_config(job_file, overrides)
    for warning in config.warnings:
        click.echo(str(warning), err=True)
    # The project and region `submit` would use, so the rendered request is the one it sends.
    where = Where(project, region)
    request = build_request(config, region=where.region_for(config))
    config = request.config
    text = render_job(request.body, output, show_secrets=show_secrets, project=where.project_for(config),
                      region=config.region)
    click.echo(text, nl=False)
    hint = _estimate_hint(config)
    if hint:
        click.echo(hint, err=True)


def _estimate_hint(config: JobConfig) -> str | None:
    try:
        from vtrain.estimate import estimate_hint
    except ImportError:
        return None
    return estimate_hint(config)
