"""`vtrain model upload JOB_ID`: register a succeeded job's model (the job file's `model:` block) in
Vertex AI Model Registry, for a submit that did not wait. `submit --wait` does the same by itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from vtrain.commands._options import UserPath, output_option, set_option, where_options
from vtrain.commands.submit import _JOB, echo_registered

if TYPE_CHECKING:
    from vtrain.cloud.target import Where


@click.group()
def model() -> None:
    """The model a job trains, in Vertex AI Model Registry."""


@model.command()
@_JOB
@click.option("--file", "-f", "job_file", default="vtrain.yaml", show_default=True, metavar="JOB.yaml",
              type=UserPath(dir_okay=False), help="The job file whose `model:` block says how to register it.")
@output_option("text", "json")
@set_option
@where_options
def upload(job: str, job_file: str, output: str, overrides: tuple[str, ...], where: Where) -> None:
    """Upload JOB's model dir (AIP_MODEL_DIR: model/ under its base output directory) as the job file's
    `model:` block says. Only a job that SUCCEEDED; idempotent (a version this job, or an identical run,
    made is named, not uploaded again)."""
    from vtrain.cloud.jobs import get_job
    from vtrain.cloud.model_registry import register_model
    from vtrain.errors import ConfigError, Problem
    from vtrain.jobfile.load import load_config

    config = load_config(job_file, overrides)
    if config.model is None:
        raise ConfigError([Problem("model", "the job file has no model: block; add one to say how to register "
                                            "the job's model", job_file)])
    # A bare job ID is looked up where the job file says (flags first), as submit created it; a full name says
    # where it is itself, and only a flag that disagrees with it is a mistake
    handle = get_job(job, where, config=config)
    registered = register_model(handle._backend, config, handle)
    echo_registered(registered, handle.project, output)
