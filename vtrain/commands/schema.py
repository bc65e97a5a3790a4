"""`vtrain schema`: the job file's JSON Schema, for editors and other tools, or (`--markdown`) the
manual's job-file reference table, both generated from the schema's nodes."""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--markdown", is_flag=True, help="Print the job-file reference table (Markdown) instead.")
def schema(markdown: bool) -> None:
    """Print the job file's JSON Schema (draft 2020-12).

    Save it next to your job file and point your editor at it: `vtrain schema >
    vtrain.schema.json`, then start the job file with
    `# yaml-language-server: $schema=vtrain.schema.json` (as `vtrain init` does).
    With --markdown, print the table of every key (the manual's job file reference) instead.
    """
    if markdown:
        from vtrain.jobfile.reference import markdown_table
        from vtrain.request.custom_job import PLAIN_FIELDS  # the Vertex field each plain key becomes

        click.echo(markdown_table({attribute: path for attribute, path in PLAIN_FIELDS}), nl=False)
        return
    from vtrain.jobfile.json_schema import job_schema

    click.echo(json.dumps(job_schema(), indent=2, ensure_ascii=False))
