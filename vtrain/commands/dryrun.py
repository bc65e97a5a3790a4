"""`vtrain validate` and `vtrain render`: the offline, credential-free dry run for CI."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from vtrain.commands._options import UserPath, output_option, project_option, region_option, set_option
from vtrain.errors import ConfigError
from vtrain.foreign import printable

if TYPE_CHECKING:
    from vtrain.jobfile.model import JobConfig

_JOB = click.argument("job_file", metavar="JOB.yaml", type=UserPath(dir_okay=False))
_TARGET = click.option(
    "--target",
    type=click.Choice(["vertex", "local"]),
    default="vertex",
    show_default=True,
    help="Check for Vertex AI (gs:// everywhere), or for `vtrain local` (local paths allowed).",
)


def _summary(config: object) -> str:
    from vtrain.jobfile.model import JobConfig

    assert isinstance(config, JobConfig)
    parts = []
    for pool in config.pools():
        machine = pool.machine_type
        if pool.accelerator:
            machine += f" + {pool.accelerator_count} × {pool.accelerator}"
        if pool.tpu_topology:
            machine += f" ({pool.tpu_topology})"
        parts.append(f"{pool.role} {pool.replicas} × {machine}")
    dtensor = config.used_dtensor
    if dtensor is not None:
        dims = " x ".join(f"{name} {size}" for name, size in dtensor.mesh)
        parts.append(f"dtensor mesh {dims} = {dtensor.size} devices")
    tuning = config.tuning
    if tuning is not None:
        parts.append(f"tuning {tuning.metric.name} ({tuning.metric.goal}) by {tuning.algorithm} search over "
                     f"{', '.join(p.name for p in tuning.parameters)}: {tuning.max_trials} trials, "
                     f"{tuning.parallel_trials} at a time")
    return "; ".join(parts)


@click.command()
@click.argument("job_files", metavar="JOB.yaml...", nargs=-1, required=True, type=click.Path(dir_okay=False))
@output_option("text", "json", "github")
@set_option
@_TARGET
def validate(job_files: tuple[str, ...], output: str, overrides: tuple[str, ...], target: str) -> None:
    """Check job files against Vertex AI's rules; list every problem.

    Exit 0 when all are valid, 2 when any is not. Each problem reads
    FILE:LINE:COL: key.path: what is wrong; what is allowed; did you mean X?
    -o json lists the problems as objects; -o github prints GitHub Actions
    workflow commands (::error file=F,line=L,col=C::...), one per problem.
    """
    invalid = 0
    found: list[dict[str, object]] = []
    for job_file in job_files:
        try:
            _validate_one(job_file, output, overrides, target, found)
        except ConfigError as err:
            if output == "text" and len(job_files) == 1:
                raise
            invalid += 1
            if output == "text":
                err.show()
            elif output == "github":
                for problem in err.problems + err.warnings:
                    click.echo(problem.github())
            found.extend(p.to_dict() for p in err.problems + err.warnings)
    if output == "json":
        click.echo(json.dumps(found, indent=2))
    if invalid:
        if output != "json":
            click.echo(f"error: {invalid} of {len(job_files)} job files invalid", err=True)
        raise SystemExit(2)


def _validate_one(
    job_file: str, output: str, overrides: tuple[str, ...], target: str, found: list[dict[str, object]]
) -> None:
    from vtrain.jobfile.load import load_config

    config = load_config(job_file, overrides, target=target)
    if target == "vertex":
        _where_render_looks(config, job_file)
    if output == "json":
        found.extend(p.to_dict() for p in config.warnings)
        return
    if output == "github":
        for warning in config.warnings:
            click.echo(warning.github())
        click.echo(printable(f"{job_file}: valid: {_summary(config)}"))  # a file name a glob found, a name
        return
    for warning in config.warnings:
        click.echo(str(warning), err=True)
    click.echo(printable(f"{job_file}: valid: {_summary(config)}"))  # a file name a glob found, a name


def _where_render_looks(config: Any, job_file: str) -> None:
    """The project and region render and submit would take from the environment (VTRAIN_PROJECT,
    GOOGLE_CLOUD_REGION, gcloud's configuration) are checked too: what they will refuse, validate
    refuses first (exit 2), naming where the value came from."""
    from vtrain.cloud.target import Where
    from vtrain.errors import BackendError, Problem

    where = Where()
    for key, resolve in (("region", where.region_for), ("project", where.project_for)):
        try:
            resolve(config)
        except BackendError as err:
            raise ConfigError([Problem(key, str(err), job_file)]) from None


@click.command()
@_JOB
@output_option("json", "yaml", "gcloud")
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
    if model_request or config.model is not None:
        _model_request(request, where, output, model_request)
        if model_request:
            return
    text = render_job(request.body, output, show_secrets=show_secrets, project=where.project_for(config),
                      region=config.region)
    click.echo(text, nl=False)
    hint = _estimate_hint(config)
    if hint:
        click.echo(hint, err=True)


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
