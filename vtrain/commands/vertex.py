"""`vtrain submit`, `status`, `logs`, `cancel`, `list`: Vertex AI from the command line.

Thin: each command parses, calls :mod:`vtrain.submit`, and prints. Data goes to stdout
(`-o json` for CI); progress, the live status line and notices go to stderr. Refusals
(no project, no credentials, permission, quota) arrive as VtrainError and are printed by
the CLI as one line with a non-zero exit.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from typing import Any

import click

from vtrain.commands._options import (
    api_endpoint_option,
    duration_callback,
    echo_json,
    output_option,
    project_option,
    region_option,
    set_option,
)

_JOB_FILE = click.argument("job_file", metavar="JOB.yaml", type=click.Path(dir_okay=False))
_JOB = click.argument("job", metavar="JOB")
_POLL = click.option(
    "--poll",
    type=click.FloatRange(min=0.01),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How often to ask Vertex AI for the job's state (and new log lines).",
)


def _where(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--project, --region, --api-endpoint: where the command's calls go."""
    return project_option(region_option(api_endpoint_option(fn)))


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
    from vtrain.target import ENDPOINT_ENV

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


def _echo_dry_run(report: dict[str, Any]) -> None:
    from vtrain.render import render

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
    labels = ", ".join(report["addedAtSubmit"]["labels"])
    click.echo(f"config hash {report['configHash']}; added when submitting: label {labels}")


def _wait(job: Any, output: str, timeout: float | None, poll: float, stream_logs: bool) -> None:
    from vtrain.backends.handle import raise_for_state
    from vtrain.submit import job_dict, watch

    status = _StatusLine(job.job_id, live=not stream_logs)
    on_log = (lambda line: click.echo(line, err=output == "json")) if stream_logs else None
    try:
        state = watch(job, timeout=timeout, poll=poll, on_state=status, on_log=on_log)
    except KeyboardInterrupt:
        status.close()
        click.echo(f"interrupted: job {job.name} keeps running; stop it with `vtrain cancel {job.name}`", err=True)
        raise SystemExit(130) from None
    finally:
        status.close()
    if output == "json":
        echo_json(job_dict(job))
    elif job.done:
        from vtrain.commands.tuning import echo_trials

        echo_trials(job)
        click.echo(f"{job.name} ended {state} after {_duration(status_elapsed(job))}")
    raise_for_state(job.name, state, job.error)


def status_elapsed(job: Any) -> float:
    """Run time from the job's own timestamps (0 when it never started)."""
    proto = job.proto
    if "start_time" not in proto or "end_time" not in proto:
        return 0.0
    return max((proto.end_time - proto.start_time).total_seconds(), 0.0)


#: Vertex JobState names without the JOB_STATE_ prefix (tests keep this in step with aiplatform_v1).
JOB_STATES = (
    "queued", "pending", "running", "succeeded", "failed", "cancelling", "cancelled", "paused",
    "expired", "updating", "partially_succeeded",
)  # fmt: skip


def _replica_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A bad --replica is a usage error (exit 2), caught before any API call."""
    if value is None:
        return None
    from vtrain.backends.vertex import task_name
    from vtrain.errors import BackendError

    try:
        task_name(value)
    except BackendError as err:
        raise click.BadParameter(str(err)) from None
    return value


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
    help="Wait for the job to end, with a live status line. Exit 0 only on SUCCEEDED; "
    "10 FAILED, 11 CANCELLED, 12 --wait-timeout passed, 13 EXPIRED.",
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
@_POLL
@output_option("text", "json")
@set_option
@_where
def submit(
    job_file: str,
    dry_run: bool,
    wait: bool,
    stream_logs: bool,
    wait_timeout: float | None,
    if_changed: bool,
    allow_credentials: bool,
    show_secrets: bool,
    poll: float,
    output: str,
    overrides: tuple[str, ...],
    project: str | None,
    region: str | None,
    api_endpoint: str | None,
) -> None:
    """Validate, package, stage and submit a job file to Vertex AI as a CustomJob.

    Prints the job's resource name, its console URL and the commands to follow it;
    -o json prints the created job. Every job is labelled vtrain-version and
    vtrain-config-hash (a hash of the rendered request, package URIs included).
    """
    from vtrain.submit import dry_run as plan_dry_run
    from vtrain.submit import job_dict, plan_submit, submit_job
    from vtrain.target import Where

    timeout = wait_timeout
    where = Where(project, region, api_endpoint)
    if dry_run:
        report = plan_dry_run(
            plan_submit(job_file, overrides=overrides, where=where),
            allow_credentials=allow_credentials,
            show_secrets=show_secrets,
        )
        echo_json(report) if output == "json" else _echo_dry_run(report)
        return
    result = submit_job(
        job_file,
        overrides=overrides,
        where=where,
        if_changed=if_changed,
        allow_credentials=allow_credentials,
        progress=output == "text",
        poll=poll,
    )
    job, target = result.job, result.plan.target
    for role, obj in zip(("trainer", "runtime"), result.staged, strict=False):
        click.echo(f"{role:<8} {'uploaded' if obj.uploaded else 'already staged':<15} {obj.uri}", err=True)
    if output == "text":
        if result.skipped:
            headline = (
                f"Not submitted: {job.name} ({job.display_name}) has the same config hash "
                f"{result.plan.config_hash} and is {job.state}"
            )
        else:
            headline = f"Submitted {job.name} ({job.display_name})"
        _echo_job_intro(job, target.api_endpoint, headline)
    elif result.skipped:
        click.echo(f"not submitted: {job.name} has the same config hash and is {job.state}", err=True)
    if wait or stream_logs or timeout is not None:
        _wait(job, output, timeout, poll, stream_logs)
    elif output == "json":
        echo_json(job_dict(job))


def _fields(job: Any) -> list[tuple[str, str]]:
    data = job.proto
    rows = [
        ("id", job.job_id),
        ("name", job.name),
        ("display name", job.display_name),
        ("state", job.state),
        ("created", _time(_iso(data, "create_time"))),
        ("started", _time(_iso(data, "start_time"))),
        ("ended", _time(_iso(data, "end_time"))),
    ]
    if job.error:
        rows.append(("error", job.error))
    if data.labels:
        rows.append(("labels", ", ".join(f"{k}={v}" for k, v in sorted(data.labels.items()))))
    rows.append(("console", job.console_url))
    return rows


def _iso(proto: Any, field: str) -> str | None:
    return getattr(proto, field).isoformat().replace("+00:00", "Z") if field in proto else None


@click.command()
@_JOB
@output_option("text", "json")
@_where
def status(job: str, output: str, project: str | None, region: str | None, api_endpoint: str | None) -> None:
    """Show a job's state. JOB is a job ID or a full projects/P/locations/R/customJobs/ID name
    (or .../hyperparameterTuningJobs/ID: then the trial table and the best trial too).

    Exit status follows the job: 0 SUCCEEDED, 10 FAILED, 11 CANCELLED, 12 not ended yet, 13 EXPIRED.
    """
    from vtrain.submit import get_job, job_dict
    from vtrain.target import Where

    handle = get_job(job, Where(project, region, api_endpoint))
    if output == "json":
        echo_json(job_dict(handle))
    else:
        from vtrain.commands.tuning import echo_trials

        rows = _fields(handle)
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            click.echo(f"{key:<{width}}  {value}")
        echo_trials(handle)
    raise SystemExit(handle.exit_code)


@click.command()
@_JOB
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the job ends.")
@click.option(
    "--replica",
    metavar="NAME",
    callback=_replica_callback,
    help="Only this replica: chief-0, worker-N, ps-N, reducer-N, evaluator-N (or workerpoolN-M).",
)
@click.option("--timestamps", is_flag=True, help="Start each line with its Cloud Logging timestamp.")
@_POLL
@_where
def logs(
    job: str,
    follow: bool,
    replica: str | None,
    timestamps: bool,
    poll: float,
    project: str | None,
    region: str | None,
    api_endpoint: str | None,
) -> None:
    """Print a job's log from Cloud Logging, each line prefixed by its replica: [chief-0],
    [worker-1], [ps-0], [evaluator-0] as `vtrain local` prints them, [vertex] for Vertex's own lines.
    JOB is a job ID or a full projects/P/locations/R/customJobs/ID name."""
    from vtrain.submit import get_job
    from vtrain.target import Where

    handle = get_job(job, Where(project, region, api_endpoint), poll=poll)
    try:
        for line in handle.logs(follow=follow, replica=replica, timestamps=timestamps):
            click.echo(line)
    except KeyboardInterrupt:
        raise SystemExit(130) from None  # Ctrl-C ends a --follow quietly; the job is untouched


@click.command()
@_JOB
@output_option("text", "json")
@_where
def cancel(job: str, output: str, project: str | None, region: str | None, api_endpoint: str | None) -> None:
    """Ask Vertex AI to stop a job (it goes CANCELLING, then CANCELLED). A job that already
    ended is left alone. JOB is a job ID or a full projects/P/locations/R/customJobs/ID name."""
    from vtrain.submit import cancel_job, job_dict
    from vtrain.target import Where

    handle, sent = cancel_job(job, Where(project, region, api_endpoint))
    if output == "json":
        echo_json(job_dict(handle))
    elif sent:
        click.echo(f"Cancel requested: {handle.name} is {handle.state}")
    else:
        click.echo(f"{handle.name} had already ended: {handle.state}")


@click.command("list")
@click.option(
    "--state",
    type=click.Choice(JOB_STATES, case_sensitive=False),
    help="Only jobs in this state.",
)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most this many jobs.")
@click.option(
    "--filter",
    "filter_",
    metavar="EXPR",
    help="A Vertex AI list filter, ANDed with --state, e.g. 'labels.team=\"ml\"'.",
)
@output_option("text", "json")
@_where
def list_jobs(
    state: str | None,
    limit: int,
    filter_: str | None,
    output: str,
    project: str | None,
    region: str | None,
    api_endpoint: str | None,
) -> None:
    """List CustomJobs and HyperparameterTuningJobs (marked "(tuning)") in the project and region, newest first."""
    from vtrain.submit import job_dict
    from vtrain.submit import list_jobs as find_jobs
    from vtrain.target import Where

    jobs = find_jobs(Where(project, region, api_endpoint), state=state, limit=limit, filter=filter_)
    if output == "json":
        echo_json([job_dict(j) for j in jobs])
        return
    if not jobs:
        click.echo("no jobs")
        return
    rows = [("ID", "STATE", "CREATED", "NAME")]
    rows += [(j.job_id, _short(j.state), _time(_iso(j.proto, "create_time")),
              j.display_name + (" (tuning)" if getattr(j, "kind", "") == "tuning" else "")) for j in jobs]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3])
