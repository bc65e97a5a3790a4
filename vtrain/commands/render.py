"""`vtrain render`: the exact request a job file makes, offline (REST JSON, YAML, or gcloud's --config)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from vtrain.commands._options import UserPath, output_option, project_option, region_option, set_option

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig

_JOB = click.argument("job_file", metavar="JOB.yaml", type=UserPath(dir_okay=False))


@click.command()
@_JOB
@output_option("json", "yaml", "gcloud", "kfp")
@set_option
@project_option
@region_option
@click.option("--show-secrets", is_flag=True, help="Print env values whose names look secret instead of <redacted>.")
@click.option("--model", "model_request", is_flag=True,
              help="Print the UploadModel request (models:upload) of the job file's `model:` block instead: what a "
              "succeeding job registers (json or yaml).")
def render(
    job_file: str, output: str, overrides: tuple[str, ...], project: str | None, region: str | None, show_secrets: bool,
    model_request: bool = False,
) -> None:
    """Print the exact CustomJob request, with no cloud access.

    json: the REST body of projects.locations.customJobs.create (hyperparameterTuningJobs.create
    when the file has `tuning:`); yaml: the same as YAML; gcloud: the file for
    `gcloud ai custom-jobs create --config` (`gcloud ai hp-tuning-jobs create --config`); kfp: the job as a
    reusable Vertex AI Pipelines component (a one-step pipeline of CustomTrainingJobOp; needs the
    `pipelines` extra; docs: Pipelines guide).
    """
    from vtrain.cloud.target import Where
    from vtrain.jobfile.artifacts import plan_artifacts
    from vtrain.jobfile.load import load_config
    from vtrain.request.build import build_request
    from vtrain.request.render import render as render_job

    if output == "kfp":
        return _kfp(job_file, overrides, project, region, model_request, show_secrets)
    config = load_config(job_file, overrides)
    for warning in config.warnings:
        click.echo(str(warning), err=True)
    # The project and region `submit` would use, so the rendered request is the one it sends: both checked
    # before the artifacts are planned from the trainer's files.
    where = Where(project, region)
    in_region, in_project = where.region_for(config), where.project_for(config)
    request = build_request(config, plan_artifacts(config, region=in_region), region=in_region, project=in_project)
    config = request.config
    if model_request or config.model is not None:
        _model_request(request, where, output, model_request)
        if model_request:
            return
    text = render_job(request.body, output, show_secrets=show_secrets, project=config.project,
                      region=config.region)
    click.echo(text, nl=False)
    hint = _estimate_hint(config)
    if hint:
        click.echo(hint, err=True)


def _kfp(job_file: str, overrides: tuple[str, ...], project: str | None, region: str | None, model: bool,
         show_secrets: bool) -> None:
    """`render -o kfp`: the component YAML on stdout; where its planned artifacts come from on stderr."""
    from vtrain.cloud.target import Where
    from vtrain.errors import UsageError
    from vtrain.jobfile.load import load_config

    if model:
        raise UsageError("--model renders the UploadModel request as json or yaml, not kfp")
    config = load_config(job_file, overrides)  # the job file's own mistakes first, with or without kfp
    import importlib

    try:
        for name in ("kfp", "google_cloud_pipeline_components"):  # by name, so the line names the one missing
            importlib.import_module(name)
    except ImportError as err:
        raise UsageError(f"-o kfp needs the pipelines extra ({err.name} is not installed): pip install "
                         "'vtrain[pipelines]' and pip install --no-deps google-cloud-pipeline-components==2.22.0 "
                         "(docs: Pipelines guide)") from None
    from vtrain.pipelines.training import component_yaml
    where = Where(project, region)
    if not show_secrets:  # the component must carry the values themselves: the one secret policy says if it may
        from vtrain.jobfile.artifacts import Artifacts
        from vtrain.request.build import build_request
        from vtrain.request.secrets import job_secret_places, refuse_secrets
        from vtrain.userpaths import shown

        # the secrets are in env and args: the artifacts' stand-ins give the same request without reading a file
        body = build_request(config, Artifacts.stand_ins()).body
        refuse_secrets(job_secret_places(body), source=shown(str(config.source)), carrier="the component",
                       allow="pass --show-secrets to write them")
    click.echo(component_yaml(job_file, overrides=overrides, project=where.project_for(config),
                              region=where.region_for(config)), nl=False)
    if config.trainer.package is not None:
        click.echo("the component names the trainer's planned artifacts: `vtrain package` builds and stages them "
                   "before the pipeline runs", err=True)


def _model_request(request: Any, where: Any, output: str, show: bool) -> None:
    """`render --model`: the UploadModel body on stdout; without it, one line on stderr saying it exists."""
    from vtrain.cloud.submit import config_hash
    from vtrain.errors import UsageError
    from vtrain.request.model_upload import build_upload
    from vtrain.request.render import render as render_body

    config = request.config
    if config.model is None:
        raise UsageError(f"{config.source}: --model renders the `model:` block's upload, and this job file has none")
    if not show:
        click.echo(f"after the job succeeds, model '{config.model.display_name}' is registered: `vtrain render "
                   "--model` shows that UploadModel request", err=True)
        return
    if output == "gcloud":
        raise UsageError("--model renders the UploadModel request as json or yaml (gcloud has no --config for it)")
    project = where.project_for(config) or "PROJECT"
    body = {"parent": f"projects/{project}/locations/{config.region}",
            **build_upload(config, project=project, config_hash=config_hash(request.body))}
    click.echo(render_body(body, output), nl=False)


def _estimate_hint(config: JobConfig) -> str | None:
    try:
        from vtrain.estimate import estimate_hint
    except ImportError:
        return None
    return estimate_hint(config)
