"""`vtrain submit`: a job file to Vertex AI from the command line, and the options and printing
that `status`, `logs`, `cancel` and `list` (:mod:`vtrain.commands.jobs`) share with it.

Thin: each command parses, calls :mod:`vtrain.cloud.submit`, and prints. Data goes to stdout
(`-o json` for CI); progress, the live status line and notices go to stderr. Refusals
(no project, no credentials, permission, quota) arrive as VtrainError and are printed by
the CLI as one line with a non-zero exit.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

import click

from vtrain.commands._options import (
    UserPath,
    duration_callback,
    echo_json,
    output_option,
    set_option,
    watch_options,
    where_options,
)
from vtrain.commands._recover import recover_options, submit_recovering
from vtrain.errors import JobFailed
from vtrain.handle import TERMINAL_STATES

if TYPE_CHECKING:
    from vtrain.cloud.target import Where

_JOB_FILE = click.argument("job_file", metavar="JOB.yaml", type=UserPath(dir_okay=False))


def _job_ref(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """JOB's shape is checked before any project lookup or API call: a malformed one is a usage error."""
    import re

    from vtrain.constants import JOB_ID_PATTERN, JOB_NAME_PATTERN

    if not re.fullmatch(f"{JOB_ID_PATTERN}|{JOB_NAME_PATTERN}", value.strip()):
        raise click.BadParameter(f"{value!r} is neither a job ID (digits) nor a resource name "
                                 "projects/PROJECT/locations/REGION/customJobs/ID (or hyperparameterTuningJobs/ID)")
    return value


_JOB = click.argument("job", metavar="JOB", callback=_job_ref)
_POLL = click.option(
    "--poll",
    type=click.FloatRange(min=0.01),
    default=10.0,
    show_default=True,
    envvar="VTRAIN_POLL",
    show_envvar=True,
    metavar="SECONDS",
    help="How often to ask Vertex AI for the job's state (and new log lines).",
)


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _short(state: str) -> str:
    return state.removeprefix("JOB_STATE_")


def _time(value: str | None) -> str:
    """RFC 3339 from the API, to the second."""
    if not value:
        return "-"
    return value.split(".")[0].replace("T", " ").rstrip("Z") + "Z"


class _StatusLine:
    """One live line on a terminal (rewritten each poll); elsewhere, one line per state change."""

    def __init__(self, job_id: str, live: bool) -> None:
        self.job_id = job_id
        self.live = live and sys.stderr.isatty()
        self.last: str | None = None

    def __call__(self, state: str, elapsed: float) -> None:
        text = f"{self.job_id}  {_short(state)}  {_duration(elapsed)}"
        if self.live:
            click.echo(f"\r\033[K{text}", err=True, nl=False)
        elif state != self.last:
            click.echo(text, err=True)
        self.last = state

    def close(self) -> None:
        """End the live line (once)."""
        if self.live and self.last is not None:
            click.echo("", err=True)
        self.last = None


def _next_commands(name: str, api_endpoint: str | None) -> list[str]:
    from vtrain.cloud.target import ENDPOINT_ENV

    extra = ""
    if api_endpoint and os.environ.get(ENDPOINT_ENV, "").rstrip("/") != api_endpoint:
        extra = f" --api-endpoint {shlex.quote(api_endpoint)}"
    return [
        f"vtrain status {name}{extra}",
        f"vtrain logs {name} --follow{extra}",
        f"vtrain cancel {name}{extra}",
    ]


def _echo_job_intro(job: Any, api_endpoint: str | None, headline: str) -> None:
    click.echo(headline)
    click.echo(f"  console: {job.console_url}")
    click.echo("  next:")
    for command in _next_commands(job.name, api_endpoint):
        click.echo(f"    {command}")


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MiB"


#: The project a dry run with none set shows in its plan (a valid ID, so the plan's URL is well formed).


def _echo_dry_run(report: dict[str, Any]) -> None:
    from vtrain.request.render import render

    request = report["request"]
    click.echo("Dry run: nothing is uploaded and no API is called.")
    click.echo(f"{request['method']} {request['url']}")
    click.echo(render(request["body"], "json", show_secrets=True), nl=False)
    if report["packages"]:
        click.echo("packages:")
        width = max(len(p["source"]) for p in report["packages"])
        for p in report["packages"]:
            built = f"  (built, {_size(p['size'])})" if "size" in p else ""
            click.echo(f"  {p['role']:<8} {p['source']:<{width}}  ->  {p['uri']}{built}")
    for image in report.get("images", []):
        click.echo(f"image: {image} (built and pushed by submit; layers the registry has are not sent)")
    labels = ", ".join(report["addedAtSubmit"]["labels"])
    click.echo(f"config hash {report['configHash']}; added when submitting: label {labels}")
    for field, what in report.get("resolvedAtSubmit", {}).items():
        click.echo(f"set when submitting: {field} = {what}")
    upload = report.get("modelUpload")
    if upload:
        click.echo("after the job SUCCEEDED (submit --wait, or `vtrain model upload JOB_ID`):")
        click.echo(f"{upload['method']} {upload['url']}")
        click.echo(render(upload["body"], "json", show_secrets=True), nl=False)
        click.echo(f"added when uploading: {upload['addedAtUpload']}")


def _echo_checks(report: Any) -> None:
    """One line per preflight check on stderr (stdout stays the command's data)."""
    for check in report.checks:
        click.echo(f"preflight: {check}", err=True)


def _wait(job: Any, output: str, timeout: float | None, poll: float, stream_logs: bool, plain: bool = False,
          progress_every: float = 30.0) -> None:  # fmt: skip
    from vtrain.cloud.jobs import job_dict, watch
    from vtrain.handle import raise_for_state
    from vtrain.view.vertex import can_watch, watch_job

    status = _StatusLine(job.job_id, live=not stream_logs)
    on_log = (lambda line: click.echo(line, err=output == "json")) if stream_logs else None
    try:
        if can_watch(job):  # a CustomJob: the rows of `vtrain local`'s view, from its state and log
            state = watch_job(job, timeout=timeout, poll=poll, plain=plain, progress_every=progress_every,
                              stream_logs=stream_logs, logs_to_stderr=output == "json",
                              state_line=_StatusLine(job.job_id, live=False))[0]
        else:
            state = watch(job, timeout=timeout, poll=poll, on_state=status, on_log=on_log)
    except KeyboardInterrupt as err:
        from vtrain.proctree import interruption

        status.close()
        said, code = interruption(err)
        click.echo(f"interrupted ({said}): job {job.name} keeps running; stop it with `vtrain cancel {job.name}`",
                   err=True)
        raise SystemExit(code) from None
    finally:
        status.close()
    if output == "json":
        echo_json(job_dict(job))
    elif job.done:
        from vtrain.commands.tuning import echo_trials

        echo_trials(job)
        click.echo(f"{job.name} ended {state} after {_duration(status_elapsed(job))}")
    raise_for_state(job.name, state, job.error)


def _after_end(result: Any, state: str, output: str) -> None:
    """After a job with `model:` SUCCEEDED: its model dir in Model Registry (see vtrain.cloud.model_registry); with
    --recover, the model of the attempt that succeeded. A tuning study has no one model (refused by validate)."""
    if result.plan.config.model is None or result.plan.is_tuning:
        return
    if state != "JOB_STATE_SUCCEEDED":
        click.echo(f"model: not uploaded: the job ended {state}, not SUCCEEDED", err=True)
        return
    from vtrain.cloud.model_registry import register_after

    job = result.job
    registered = register_after(job, result.plan.config, state)
    assert registered is not None  # a SUCCEEDED job with `model:`, not a study: checked above
    if output == "json":
        click.echo(f"model: {registered.name} ({'uploaded' if registered.uploaded else registered.why})", err=True)
    else:
        echo_registered(registered, job.project, output)


def echo_registered(registered: Any, project: str, output: str) -> None:
    """One line per outcome: uploaded, or the version an earlier upload made (and why it was found)."""
    if output == "json":
        echo_json({"model": registered.model, "versionId": registered.version_id, "name": registered.name,
                   "uploaded": registered.uploaded, "console": registered.console_url(project)})
        return
    if registered.uploaded:
        click.echo(f"model registered: {registered.name}")
    else:
        click.echo(f"model not uploaded again: {registered.name} ({registered.why})")
    click.echo(f"  console: {registered.console_url(project)}")


def status_elapsed(job: Any) -> float:
    """Run time from the job's own timestamps (0 when it never started)."""
    proto = job.proto
    if "start_time" not in proto or "end_time" not in proto:
        return 0.0
    return float(max((proto.end_time - proto.start_time).total_seconds(), 0.0))


@click.command()
@_JOB_FILE
@click.option(
    "--dry-run",
    is_flag=True,
    help="Do everything but upload and call the API (no credentials, no network): print the exact "
    "request, the package it would build and where it would go.",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Wait for the job to end, with the live view of `vtrain local` on a terminal (state, step, steps/s, "
    "restarts per replica; steps where the trainer reports them) and progress lines elsewhere. Exit 0 only on "
    "SUCCEEDED; 10 FAILED, 11 CANCELLED, 12 --wait-timeout passed, 13 EXPIRED.",
)
@click.option("--stream-logs", is_flag=True, help="Print the job's log while waiting (implies --wait).")
@click.option(
    "--wait-timeout",
    metavar="DURATION",
    callback=duration_callback,
    help="Wait at most this long (90s, 30m, 2h; implies --wait), then exit 12; the job keeps running.",
)
@click.option(
    "--if-changed",
    is_flag=True,
    help="Do not submit when a job with this vtrain-config-hash is still live; show (or --wait for) it.",
)
@click.option(
    "--allow-credentials",
    is_flag=True,
    help="Package files that look like credentials (keys, .env) instead of refusing them.",
)
@click.option("--show-secrets", is_flag=True, help="With --dry-run: print secret-looking env values.")
@click.option(
    "--preflight/--no-preflight",
    default=None,
    help="Check the cloud side first (credentials, API, staging bucket region and access, service account, "
    "output dir). Default: on for a submission, off for --dry-run (which then needs no credentials).",
)
@recover_options
@_POLL
@watch_options
@output_option("text", "json")
@set_option
@where_options
def submit(
    job_file: str,
    dry_run: bool,
    wait: bool,
    stream_logs: bool,
    wait_timeout: float | None,
    if_changed: bool,
    allow_credentials: bool,
    show_secrets: bool,
    preflight: bool | None,
    recover: int,
    recover_backoff: float,
    poll: float,
    plain: bool,
    progress_every: float,
    output: str,
    overrides: tuple[str, ...],
    where: Where,
) -> None:
    """Validate, check the cloud side (preflight), package, stage and submit a job file to
    Vertex AI as a CustomJob.

    Prints the job's resource name, its console URL and the commands to follow it;
    -o json prints the created job. Every job is labelled vtrain-version and
    vtrain-config-hash (a hash of the rendered request, package URIs included).
    """
    from vtrain.cloud.jobs import job_dict
    from vtrain.cloud.submit import submit_job

    timeout = wait_timeout
    if dry_run:
        from vtrain.cloud.dryrun import dry_run_job

        report, checks = dry_run_job(job_file, overrides=overrides, where=where, preflight=bool(preflight),
                                     allow_credentials=allow_credentials, show_secrets=show_secrets,
                                     notice=lambda text: click.echo(text, err=True))
        if checks is not None and output == "text":
            _echo_checks(checks)
        echo_json(report) if output == "json" else _echo_dry_run(report)
        if checks is not None:
            checks.raise_for_failures()
        return
    if recover:
        return submit_recovering(job_file, recover=recover, backoff=recover_backoff, output=output, poll=poll,
                                 timeout=timeout, overrides=overrides, where=where, allow_credentials=allow_credentials,
                                 preflight=preflight is not False,
                                 after_end=lambda result, state: _after_end(result, state, output))
    result = submit_job(
        job_file,
        overrides=overrides,
        where=where,
        if_changed=if_changed,
        allow_credentials=allow_credentials,
        progress=output == "text",
        poll=poll,
        preflight=preflight is not False,
    )
    for warning in result.preflight.warnings if result.preflight else ():
        click.echo(f"preflight: {warning}", err=True)
    job, target = result.job, result.plan.target
    for made in result.linked:  # found or made before staging
        kind = made.kind or ("tensorboard" if "/tensorboards/" in made.name else "experiment")
        click.echo(f"{kind} '{made.display_name}' {'created' if made.created else 'found'}: {made.name}", err=True)
    for role, obj in zip(("trainer", "runtime"), result.staged, strict=False):
        click.echo(f"{role:<8} {'uploaded' if obj.uploaded else 'already staged':<15} {obj.uri}", err=True)
    if result.images:
        from vtrain.cloud.images import summary

        for pushed in result.images:
            click.echo(summary(pushed), err=True)
    if output == "text":
        if result.recovered:
            headline = (
                f"Not submitted again: {job.name} ({job.display_name}) was created by an earlier submit "
                f"of this job whose answer was lost; it is {job.state}"
            )
        elif result.skipped:
            headline = (
                f"Not submitted: {job.name} ({job.display_name}) has the same config hash "
                f"{result.plan.config_hash} and is {job.state}"
            )
        else:
            headline = f"Submitted {job.name} ({job.display_name})"
        _echo_job_intro(job, target.api_endpoint, headline)
    elif result.recovered:
        click.echo(f"not submitted again: {job.name} was created by an earlier submit of this job", err=True)
    elif result.skipped:
        click.echo(f"not submitted: {job.name} has the same config hash and is {job.state}", err=True)
    if wait or stream_logs or timeout is not None:
        model = result.plan.config.model
        try:
            _wait(job, output, timeout, poll, stream_logs, plain, progress_every)
        except JobFailed as err:
            if model is not None and err.state in TERMINAL_STATES:
                click.echo(f"model: not uploaded: the job ended {err.state}, not SUCCEEDED", err=True)
            elif model is not None:
                click.echo(f"model: not uploaded yet: once the job SUCCEEDED, run `vtrain model upload {job.name} "
                           f"-f {shlex.quote(job_file)}`", err=True)
            raise
        _after_end(result, "JOB_STATE_SUCCEEDED", output)
    elif output == "json":
        echo_json(job_dict(job))
