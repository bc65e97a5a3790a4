"""`vtrain validate`: check job files offline, with no credentials (the CI dry run)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from vtrain.commands._options import output_option, set_option
from vtrain.errors import ConfigError
from vtrain.foreign import printable

if TYPE_CHECKING:
    pass

_TARGET = click.option(
    "--target",
    type=click.Choice(["vertex", "local"]),
    default="vertex",
    show_default=True,
    help="Check for Vertex AI (gs:// everywhere), or for `vtrain local` (local paths allowed).",
)


def _summary(config: object) -> str:
    from vtrain.jobfile.config import JobConfig

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
