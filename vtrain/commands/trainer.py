"""`vtrain init`: start a trainer from a template, with a job file that validates.

The templates live in `trainer_templates/` at the top of the source tree;
`vtrain/trainer_templates` links there and package-data ships them in the
installed package, so one path works for a checkout and an install alike.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from vtrain.commands._options import echo_json, output_option
from vtrain.constants import MAX_DISPLAY_NAME
from vtrain.errors import InitError

TEMPLATES = ("keras", "custom-loop")
DEFAULT_BUCKET = "gs://my-vtrain-bucket"
_SKIP = {"__pycache__", "build", "dist", ".pytest_cache"}

JOB_FILE = """\
{modeline}
# vtrain job file. Check it offline with `vtrain validate vtrain.yaml`, run every replica
# on this machine with `vtrain local vtrain.yaml`, and on Vertex AI with `vtrain submit`.
# Relative paths are relative to this file.
name: {name}
region: us-central1
staging_bucket: {bucket}/staging        # a bucket you own, in `region`
base_output_dir: {bucket}/{path}        # AIP_MODEL_DIR etc. go under here
trainer:
  package: .                    # this directory: pyproject.toml + trainer/
  module: trainer.task
  image: tf-cpu.2-17            # prebuilt tf-cpu|tf-gpu|tf-tpu . 2-NN{image_note}
  args: [--epochs=3, --steps-per-epoch=50]
distribution_strategy: auto     # vtrain.runtime picks it per replica from the environment
cluster:
  chief: {{machine_type: n1-standard-4}}
  workers: {{replicas: 1}}        # machine keys left out are inherited from chief
"""

_IMAGE_NOTE = {
    "keras": "; keep tf-keras in pyproject.toml at ~=2.NN.0",
    "custom-loop": "",
}


def templates_root() -> Path:
    return Path(__file__).resolve().parent.parent / "trainer_templates"


def job_name(directory: Path) -> str:
    """A job name from the directory name: lowercase letters, digits and dashes."""
    return _slug(directory.resolve().name)


def _slug(text: str) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if not name:
        return "my-job"
    return name if name[0].isalpha() else f"job-{name}"


def _yaml_text(value: str) -> str:
    """`value` as a YAML scalar that reads back as this very string (quoted only when it must be)."""
    import yaml

    try:
        if yaml.safe_load(f"name: {value}") == {"name": value}:
            return value
    except yaml.YAMLError:
        pass
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def template_files(template: str) -> dict[Path, Path]:
    """Relative destination path -> source file, build leftovers skipped."""
    root = templates_root() / template
    if template not in TEMPLATES or not root.is_dir():
        raise InitError(f"no template {template!r}; choose one of: {', '.join(TEMPLATES)}")
    return {
        src.relative_to(root): src
        for src in sorted(root.rglob("*"))
        if src.is_file()
        and not _SKIP.intersection(src.relative_to(root).parts)
        and not src.name.endswith(".pyc")
        and ".egg-info" not in str(src.relative_to(root))
    }


def scaffold(
    directory: Path, template: str = "keras", name: str | None = None, bucket: str = DEFAULT_BUCKET
) -> list[Path]:
    """Copy a template into `directory` and write vtrain.yaml (with a modeline pointing editors at
    vtrain.schema.json, written beside it); returns the files written.

    Nothing is written when any destination already exists: the error names them all.
    """
    bucket = bucket.rstrip("/")
    if not bucket.startswith("gs://") or len(bucket) <= len("gs://"):
        raise InitError(f"--bucket must look like gs://BUCKET, got {bucket!r}")
    if name and not name.strip():
        raise InitError("--name must not be blank")
    if name and len(name) > MAX_DISPLAY_NAME:
        raise InitError(f"--name is {len(name)} characters; Vertex allows at most {MAX_DISPLAY_NAME}")
    contents: dict[Path, bytes] = {rel: src.read_bytes() for rel, src in template_files(template).items()}
    name = name or job_name(directory)
    from vtrain.schema_json import MODELINE, SCHEMA_FILE, job_schema

    job = JOB_FILE.format(name=_yaml_text(name), path=_slug(name), bucket=bucket, image_note=_IMAGE_NOTE[template],
                          modeline=MODELINE)
    contents[Path("vtrain.yaml")] = job.encode()
    # The modeline's target: editors complete and check the job file with it, offline.
    contents[Path(SCHEMA_FILE)] = (json.dumps(job_schema(), indent=2, ensure_ascii=False) + "\n").encode()
    existing = [directory / rel for rel in contents if (directory / rel).exists()]
    if existing:
        listed = ", ".join(str(p) for p in existing)
        raise InitError(f"refusing to overwrite existing file(s): {listed}; nothing was written")
    written = []
    try:
        for rel, data in contents.items():
            dest = directory / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "xb") as f:  # "x": never clobber a file that appeared meanwhile
                f.write(data)
            written.append(dest)
    except OSError as err:
        done = f"; wrote {len(written)} file(s) before that" if written else ""
        raise InitError(f"cannot write {err.filename or directory}: {err.strerror or err}{done}") from None
    return written


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "-t",
    "--template",
    type=click.Choice(TEMPLATES),
    default="keras",
    show_default=True,
    help="keras: model.fit (tf_keras under multi-worker); custom-loop: strategy.run.",
)
@click.option("--name", help="Job name in vtrain.yaml. Default: derived from DIRECTORY.")
@click.option(
    "--bucket",
    default=DEFAULT_BUCKET,
    show_default=True,
    help="Cloud Storage bucket for staging and outputs (gs://BUCKET).",
)
@output_option("text", "json")
def init(directory: Path, template: str, name: str | None, bucket: str, output: str) -> None:
    """Create a trainer package in DIRECTORY from a template, with a vtrain.yaml job file.

    Refuses to overwrite any existing file.
    """
    written = scaffold(directory, template, name, bucket)
    if output == "json":
        echo_json({"directory": str(directory), "template": template, "files": [str(p) for p in written]})
        return
    for path in written:
        click.echo(f"created {path}")
    click.echo(f"next: vtrain validate {directory / 'vtrain.yaml'}")
