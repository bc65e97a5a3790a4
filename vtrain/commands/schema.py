"""`vtrain schema`: the job file's JSON Schema, for editors and other tools."""

from __future__ import annotations

import json

import click


@click.command()
def schema() -> None:
    """Print the job file's JSON Schema (draft 2020-12).

    Save it next to your job file and point your editor at it: `vtrain schema >
    vtrain.schema.json`, then start the job file with
    `# yaml-language-server: $schema=vtrain.schema.json` (as `vtrain init` does).
    """
    from vtrain.jobfile.json_schema import job_schema

    click.echo(json.dumps(job_schema(), indent=2, ensure_ascii=False))
