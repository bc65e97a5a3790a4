"""`vtrain init`: start a trainer from a template, with a job file that validates.

The templates live in `trainer_templates/` at the top of the source tree;
`vtrain/trainer_templates` links there and package-data ships them in the
installed package, so one path works for a checkout and an install alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
from pathlib import Path

import click

from vtrain.commands._options import UserPath, echo_json, output_option
from vtrain.constants import MAX_DISPLAY_NAME
from vtrain.errors import ConfigError, InitError, PackagingError, UsageError
from vtrain.userpaths import absolute, describe_oserror, path_problem, shown

TEMPLATES = ("keras", "custom-loop", "model-parallel")
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
{strategy}
cluster:
  chief: {{machine_type: n1-standard-4}}
  workers: {{replicas: 1}}        # machine keys left out are inherited from chief
"""

_IMAGE_NOTE = {
    "keras": "; keep tf-keras in pyproject.toml at ~=2.NN.0",
    "custom-loop": "",
    "model-parallel": "",
}


_STRATEGY = {
    "keras": "distribution_strategy: auto     # vtrain.runtime picks it per replica from the environment",
    "custom-loop": "distribution_strategy: auto     # vtrain.runtime picks it per replica from the environment",
    "model-parallel": "distribution_strategy: dtensor  # model parallel: the mesh shards the model over the replicas\n"
    "dtensor:\n"
    "  mesh: {batch: 2, model: 2}    # sizes multiply to replicas (2) x devices per replica: mesh size /\n"
    "                                # replicas logical CPUs on CPU machines, accelerator_count on GPUs\n"
    "scheduling: {restart_job_on_worker_restart: true}  # one replica lost: all resume from the sharded checkpoint",
}


def templates_root() -> Path:
    return Path(__file__).resolve().parent.parent / "trainer_templates"


def job_name(directory: Path) -> str:
    """A job name from the directory name: lowercase letters, digits and dashes."""
    return _slug(absolute(directory).name)


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


def _check_bucket(bucket: str) -> str:
    """--bucket as gs://BUCKET[/PATH], every character one a job file and Cloud Storage accept."""
    from vtrain.trainer.staging import parse_staging

    bucket = bucket.rstrip("/")
    if not bucket.startswith("gs://") or len(bucket) <= len("gs://"):
        raise UsageError(f"--bucket must look like gs://BUCKET, got {bucket!r}")
    odd = sorted({c for c in bucket if not c.isprintable() or c.isspace() or c in "#?[]*"})
    if odd:
        raise UsageError(f"--bucket {bucket!r} holds {', '.join(repr(c) for c in odd)}: not allowed in a "
                         "Cloud Storage bucket name, and risky in an object path")
    try:
        parse_staging(bucket)
    except PackagingError as err:
        raise UsageError(f"--bucket: {err}") from None
    return bucket


def _check_validates(job: str, directory: Path, template: str) -> None:
    """The job file init writes must pass `vtrain validate` as written: checked against the template
    itself (the same files), before anything is written."""
    from vtrain.jobfile.load import parse_config

    try:
        parse_config(job, str(directory / "vtrain.yaml"), source=templates_root() / template / "vtrain.yaml")
    except ConfigError as err:
        raise UsageError("the job file would not validate with these options:\n"
                         + "\n".join(p.message for p in err.problems)) from None


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
    bucket = _check_bucket(bucket)
    if name and not name.strip():
        raise UsageError("--name must not be blank")
    if name and len(name) > MAX_DISPLAY_NAME:
        raise UsageError(f"--name is {len(name)} characters; Vertex allows at most {MAX_DISPLAY_NAME}")
    contents: dict[Path, bytes] = {rel: src.read_bytes() for rel, src in template_files(template).items()}
    name = name or job_name(directory)
    from vtrain.jobfile.json_schema import MODELINE, SCHEMA_FILE, job_schema

    job = JOB_FILE.format(name=_yaml_text(name), path=_slug(name), bucket=bucket, image_note=_IMAGE_NOTE[template],
                          strategy=_STRATEGY[template], modeline=MODELINE)
    _check_validates(job, directory, template)
    contents[Path("vtrain.yaml")] = job.encode()
    # The modeline's target: editors complete and check the job file with it, offline.
    contents[Path(SCHEMA_FILE)] = (json.dumps(job_schema(), indent=2, ensure_ascii=False) + "\n").encode()
    _check_destinations(directory, list(contents))
    return _write_all(directory, contents)


def _check_destinations(directory: Path, files: list[Path]) -> None:
    """Refuse, before writing anything, every destination that exists or has a non-directory in its way.

    `lexists`, not `exists`: a dangling link or a symlink loop named like a destination is in the way too.
    """
    bad = path_problem(str(directory))
    if bad:
        raise InitError(f"the directory '{shown(str(directory))}' {bad}")
    existing: list[str] = []
    blocked: dict[Path, str] = {}
    try:
        for rel in files:
            for parent in [directory, *(directory / p for p in reversed(rel.parents[:-1]))]:
                if os.path.lexists(parent) and not parent.is_dir():
                    loop = parent.is_symlink() and not parent.exists()
                    blocked[parent] = "a symlink that leads nowhere (a loop?)" if loop else "not a directory"
                    break
            else:
                if os.path.lexists(directory / rel):
                    existing.append(str(directory / rel))
    except OSError as err:
        raise InitError(f"cannot look at {shown(str(err.filename or directory))}: {describe_oserror(err)}") from None
    if blocked:
        listed = ", ".join(f"{shown(str(p))} is {why}" for p, why in blocked.items())
        raise InitError(f"cannot write the trainer there: {listed}; nothing was written")
    if existing:
        raise InitError(f"refusing to overwrite existing file(s): {', '.join(existing)}; nothing was written")


def _write_all(directory: Path, contents: dict[Path, bytes]) -> list[Path]:
    """Write every file or none: a failure part-way (disk full, a race) removes what was written."""
    written: list[Path] = []
    made: list[Path] = []
    try:
        for rel, data in contents.items():
            dest = directory / rel
            missing = [p for p in (dest.parent, *dest.parent.parents) if not os.path.lexists(p)]
            dest.parent.mkdir(parents=True, exist_ok=True)
            made.extend(missing)  # deepest first, so removal below empties them in order
            with open(dest, "xb") as f:  # "x": never clobber a file that appeared meanwhile
                written.append(dest)
                f.write(data)
    except OSError as err:
        for path in reversed(written):
            with contextlib.suppress(OSError):
                path.unlink()
        for path in sorted(set(made), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                path.rmdir()
        where = shown(str(err.filename or directory))
        raise InitError(f"cannot write {where}: {describe_oserror(err)}; nothing was written") from None
    return written


def _directory(ctx: click.Context, param: click.Parameter, value: str) -> Path:
    """An empty DIRECTORY (an unset shell variable) must not mean the current directory."""
    if not value.strip():
        raise click.BadParameter("must not be empty (pass . for the current directory)")
    return Path(value)


@click.command()
@click.argument("directory", type=UserPath(file_okay=False), callback=_directory)
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
    click.echo(f"next: vtrain validate {shlex.quote(str(directory / 'vtrain.yaml'))}")  # pasteable as it is
