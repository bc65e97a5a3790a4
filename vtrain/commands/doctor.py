"""`vtrain doctor [JOB.yaml]`: the local setup explained and the cloud side checked, nothing changed."""

from __future__ import annotations

import platform
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from vtrain.commands._options import (
    echo_json,
    output_option,
    set_option,
    where_options,
)

if TYPE_CHECKING:
    from vtrain.cloud.target import Where


@click.command()
@click.argument("job_file", metavar="[JOB.yaml]", required=False, type=click.Path(dir_okay=False))
@output_option("text", "json")
@set_option
@where_options
def doctor(
    job_file: str | None,
    output: str,
    overrides: tuple[str, ...],
    where: Where,
) -> None:
    """Explain where vtrain's calls would go and check that they would work: credentials (and
    whose), the project and the Vertex AI API; with JOB.yaml also its staging bucket (exists,
    writable, in the job's region), service account (exists, you may act as it), output dir, quota,
    TensorBoard, experiment and `model.parent` (exists), and which runtime `vtrain local` would
    rehearse it on, and why (the image's stack, the image itself, or this machine's Python).

    Reads and lists only: nothing is uploaded or created. Exit 0 when every check passes
    (warnings allowed), 1 when one fails, 2 for an invalid job file.
    """
    from vtrain.cloud.preflight import FAIL, SKIP, Check, Report, run_preflight
    from vtrain.constants import VERSION
    from vtrain.errors import BackendError

    config = None
    if job_file:
        from vtrain.jobfile.load import load_config

        config = load_config(job_file, overrides)
    info = {"vtrain": VERSION, "python": platform.python_version(), "job file": job_file or "-"}
    if config is not None:
        info["runtime"] = rehearsal_runtime(config)
    from vtrain.cloud.target import resolve_endpoint

    # Each setting is resolved on its own, so a bad one is reported under its own name.
    steps: tuple[tuple[str, Callable[[], object]], ...] = (
        ("region", lambda: where.region_for(config)), ("endpoint", lambda: resolve_endpoint(where.api_endpoint)),
        ("project", lambda: where.resolve(config=config)))
    failed_at = None
    for name, resolve in steps:
        try:
            resolve()
        except BackendError as err:
            failed_at = Check(name, FAIL, str(err))
            break
    if failed_at is not None:
        report = Report((failed_at, Check("vertex ai", SKIP, f"needs a {failed_at.name}")))
    else:
        target = where.resolve(config=config)
        info.update(project=target.project, region=target.region, endpoint=target.endpoint)
        report = run_preflight(target, config)
    from vtrain.request.redact import redact_strings  # an endpoint may carry user:password@

    if output == "json":
        echo_json(redact_strings({**info, **report.to_dict()}))
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            click.echo(redact_strings(f"{key:<{width}}  {value}"))
        for check in report.checks:
            click.echo(redact_strings(str(check)))
        failed = len(report.failed)
        click.echo(f"{failed} of {len(report.checks)} checks failed" if failed else "all checks passed")
    raise SystemExit(0 if report.ok else 1)


def rehearsal_runtime(config: object) -> str:
    """What `vtrain local` would run this job's replicas on, and why (:mod:`vtrain.local.runtimes`); for the
    image's stack also which Python it would use and whether it is built."""
    from vtrain.errors import UsageError
    from vtrain.jobfile.artifacts import Artifacts
    from vtrain.local.runtimes import choose_runtime
    from vtrain.request.custom_job import build_job_dict

    try:
        choice = choose_runtime(build_job_dict(config, Artifacts.stand_ins()))  # type: ignore[arg-type]
    except UsageError as err:
        return f"cannot run here: {err}"
    text = f"{choice.runtime}: {choice.why}"
    if choice.stack is not None and choice.runtime == "stack":
        from vtrain.local.stacks import find_python

        python, where = find_python(choice.stack.python)
        text += (f"; Python {choice.stack.python} from {where} ({python})" if python is not None else
                 f"; no Python {choice.stack.python} here (looked at {where}): uv installs one where it can, else "
                 "the stack runs on this machine's Python, with a notice")
    return text
