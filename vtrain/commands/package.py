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
    help="Package files that look like credentials (keys, .env) instead of refusing them.",
)
@click.option(
    "--target",
    type=click.Choice(["vertex", "local"]),
    default="vertex",
    show_default=True,
    help="Check the job for Vertex AI (gs:// staging), or for `vtrain local` (a local staging directory).",
)
@output_option("text", "json")
@set_option
def package(job_file: str, allow_credentials: bool, target: str, output: str, overrides: tuple[str, ...]) -> None:
    """Build the trainer package and stage it (with vtrain's runtime) under staging_bucket; with
    trainer.build, build the trainer's image and push it to trainer.build.repository.

    Nothing is sent unless every check passes: the package, its entry module, no credential
    files, and a writable staging location. Packages are named by a hash of their sources,
    so an unchanged trainer is neither rebuilt nor uploaded again; the URIs are the ones
    `vtrain render` shows.
    """
    from vtrain.jobfile.load import load_config
    from vtrain.trainer.packaging import build_and_stage, describe

    config = load_config(job_file, overrides, target=target)
    trainer = config.trainer
    if trainer.build is not None:  # the image: built on its base and pushed, as `submit` does before the create
        from vtrain.cloud.images import blob_line, body_images, push_images, summary
        from vtrain.cloud.images import describe as describe_images
        from vtrain.request.build import build_request
        from vtrain.trainer.artifacts import plan_artifacts

        text = output == "text"
        body = build_request(config, plan_artifacts(config)).body
        pushed = push_images(config, body_images(body), allow_credentials=allow_credentials,
                             on_image=(lambda p: click.echo(summary(p))) if text else None,
                             on_blob=(lambda b: click.echo(blob_line(b), err=True)) if text else None)
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
    )
    if output == "json":
        echo_json(describe(objects))
        return
    for role, obj in zip(("trainer", "runtime"), objects, strict=True):
        state = "uploaded" if obj.uploaded else "already staged"
        click.echo(f"{role:<8} {state:<15} {obj.uri}  ({_size(obj.size)})")
