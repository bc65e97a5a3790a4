"""`vtrain package`: build the trainer and vtrain runtime sdists and stage them, as `submit` will."""

from __future__ import annotations

import click

from vtrain.commands._options import UserPath, echo_json, output_option, set_option


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 / 1024:.1f} MiB"


@click.command()
@click.argument("job_file", metavar="JOB.yaml", type=UserPath(dir_okay=False))
@click.option(
    "--allow-credentials",
    is_flag=True,
    help="Package files that look like credentials (keys, .env) instead of refusing them; with --launcher, also a "
    "job whose env or args look secret (the image carries the job file).",
)
@click.option(
    "--target",
    type=click.Choice(["vertex", "local"]),
    default="vertex",
    show_default=True,
    help="Check the job for Vertex AI (gs:// staging), or for `vtrain local` (a local staging directory).",
)
@click.option(
    "--launcher",
    metavar="REPOSITORY",
    default=None,
    help="Instead: build the image launcher_op's pipeline step runs in (vtrain, its pipelines dependencies and "
    "this job file's folder at its absolute path) and push it to REPOSITORY; prints REPOSITORY:TAG@DIGEST.",
)
@click.option(
    "--launcher-base",
    metavar="IMAGE",
    default=None,
    help="The Python base image of --launcher's image  [default: python:3.11-slim].",
)
@click.option(
    "--launcher-python",
    metavar="MAJOR.MINOR",
    default=None,
    help="The Python version of --launcher-base, when its config does not say it (no PYTHON_VERSION).",
)
@click.option(
    "--launcher-platform",
    metavar="TAG",
    default=None,
    help="The newest wheel platform tag --launcher-base runs (e.g. manylinux_2_35_x86_64), when vtrain cannot "
    "read its C library.",
)
@output_option("text", "json")
@set_option
def package(job_file: str, allow_credentials: bool, target: str, launcher: str | None, launcher_base: str | None,
            output: str, overrides: tuple[str, ...], launcher_python: str | None = None,
            launcher_platform: str | None = None) -> None:
    """Build the trainer package and stage it (with vtrain's runtime) under staging_bucket; with
    trainer.build, build the trainer's image and push it to trainer.build.repository.

    Nothing is sent unless every check passes: the package, its entry module, no credential
    files, and a writable staging location. Packages are named by a hash of their sources,
    so an unchanged trainer is neither rebuilt nor uploaded again; the URIs are the ones
    `vtrain render` shows.
    """
    from vtrain.jobfile.load import load_config
    from vtrain.trainer.packaging import build_and_stage, builds_dir, describe

    if launcher is not None or any(v is not None for v in (launcher_base, launcher_python, launcher_platform)):
        _launcher(job_file, launcher, (launcher_base, launcher_python, launcher_platform), allow_credentials, output,
                  overrides)
        return
    config = load_config(job_file, overrides, target=target)
    trainer = config.trainer
    if trainer.build is not None:  # the image: built on its base and pushed, as `submit` does before the create
        from vtrain.cloud.images import blob_line, body_images, push_images, summary
        from vtrain.cloud.images import describe as describe_images
        from vtrain.jobfile.artifacts import plan_artifacts
        from vtrain.request.build import build_request

        text = output == "text"
        artifacts = plan_artifacts(config)
        body = build_request(config, artifacts).body
        pushed = push_images(config, body_images(body), allow_credentials=allow_credentials,
                             on_image=(lambda p: click.echo(summary(p))) if text else None,
                             on_blob=(lambda b: click.echo(blob_line(b), err=True)) if text else None,
                             selection=artifacts.selection)  # built from the files the names were hashed from
        if output == "json":
            echo_json(describe_images(pushed))
        return
    if trainer.package is None:
        if output == "json":
            echo_json([])
        else:
            kind = "a container image" if trainer.container is not None else "prebuilt package_uris"
            click.echo(f"nothing to package: the trainer uses {kind}")
        return
    objects = build_and_stage(
        trainer.package,
        config.staging_bucket or "",
        trainer.module,
        allow_credentials=allow_credentials,
        progress=output == "text",
        skip=config.job_files(),
        builds=builds_dir(),
    )
    if output == "json":
        echo_json(describe(objects))
        return
    for role, obj in zip(("trainer", "runtime"), objects, strict=True):
        state = "uploaded" if obj.uploaded else "already staged"
        click.echo(f"{role:<8} {state:<15} {obj.uri}  ({_size(obj.size)})")


def _launcher(job_file: str, repository: str | None, settings: tuple[str | None, str | None, str | None],
              allow_credentials: bool, output: str, overrides: tuple[str, ...]) -> None:
    """`package --launcher REPOSITORY`: the launcher step's image (vtrain.trainer.image.launcher), built and pushed:
    the job file judged by the one secret policy and what it names (vtrain.jobfile.artifacts.launcher_job)."""
    from vtrain.errors import UsageError
    from vtrain.trainer.image.launcher import DEFAULT_BASE, launcher_image

    base, python_version, platform = settings
    if repository is None:
        given = [flag for flag, value in zip(("--launcher-base", "--launcher-python", "--launcher-platform"), settings,
                                             strict=True) if value is not None]
        raise UsageError(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} --launcher REPOSITORY (where "
                         "the launcher image goes)")
    if overrides:
        raise UsageError("--set does not apply to --launcher: the image holds the job file as it is on disk (give "
                         "launcher_op its args instead)")
    from vtrain.cloud.images import blob_line
    from vtrain.pipelines.image import launcher_job  # no kfp: vtrain.pipelines loads its names when used

    # checked and judged for secrets before anything is built; its trainer folder and named files go in too
    job = launcher_job(job_file, allow_credentials=allow_credentials, allow="pass --allow-credentials to ship them")
    text = output == "text"
    pushed = launcher_image(job_file, repository, base=base or DEFAULT_BASE, package=job.package, files=job.files,
                            python_version=python_version, platform=platform, allow_credentials=allow_credentials,
                            on_blob=(lambda b: click.echo(blob_line(b), err=True)) if text else None)
    if text:
        sent = pushed.layer_bytes()
        click.echo(f"launcher {pushed.image}  ({_size(sent)} sent)" if sent else f"launcher {pushed.image}  "
                   "(nothing sent: the registry had it)")
        return
    echo_json({"image": pushed.image, "digest": pushed.digest, "sent": pushed.sent, "blobs": pushed.blobs})
