"""`vtrain status`, `logs`, `cancel`, `list`: following jobs that already exist on Vertex AI.

Thin, as :mod:`vtrain.commands.submit`: parse, call :mod:`vtrain.cloud.submit`, print. Data goes to
stdout (`-o json` for CI); refusals arrive as VtrainError, printed by the CLI as one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from vtrain.commands._options import echo_json, label_filter_option, output_option, watch_options, where_options
from vtrain.commands.submit import _JOB, _POLL, _short, _time
from vtrain.foreign import printable, printable_lines

if TYPE_CHECKING:
    from vtrain.cloud.target import Where

#: Vertex JobState names without the JOB_STATE_ prefix (tests keep this in step with aiplatform_v1).
JOB_STATES = (
    "queued", "pending", "running", "succeeded", "failed", "cancelling", "cancelled", "paused",
    "expired", "updating", "partially_succeeded",
)  # fmt: skip


def _replica_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A bad --replica is a usage error (exit 2), caught before any API call."""
    if value is None:
        return None
    from vtrain.cloud.vertex import task_name
    from vtrain.errors import BackendError

    try:
        task_name(value)
    except BackendError as err:
        raise click.BadParameter(str(err)) from None
    return value


def _check_replica(handle: Any, replica: str) -> None:
    """A replica the job does not have would print nothing and exit 0: say which it has instead."""
    from vtrain.cloud.vertex import replica_label, task_name
    from vtrain.errors import UsageError
    from vtrain.jobfile.nodes import did_you_mean

    spec = getattr(getattr(handle.proto, "job_spec", None), "worker_pool_specs", None)
    if spec is None:  # a tuning job: its trials are jobs of their own
        return
    reducers = len(spec) > 2 and bool(spec[2].container_spec.image_uri.endswith(("reductionserver:latest",)))
    tasks = [f"workerpool{i}-{n}" for i, pool in enumerate(spec) for n in range(int(pool.replica_count or 0))]
    if task_name(replica) not in tasks:
        labels = [replica_label(t, reducers) for t in tasks]
        raise UsageError(f"job {handle.name} has no replica {replica} (it has {', '.join(labels)});"
                         f"{did_you_mean(replica, labels)}".rstrip(";"))


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
    if "vtrain-attempt" in data.labels:  # `submit --recover`: which attempt, and the job it replaced
        rows.append(("attempt", data.labels["vtrain-attempt"] + "".join(
            f" (after {v})" for k, v in data.labels.items() if k == "vtrain-previous-attempt")))
    if data.labels:
        rows.append(("labels", ", ".join(f"{k}={v}" for k, v in sorted(data.labels.items()))))
    rows.append(("console", job.console_url))
    from vtrain.cloud.vertex.resources import job_links

    rows.extend(job_links(job))
    rows.extend(_model_rows(job))
    return rows


def _model_rows(job: Any) -> list[tuple[str, str]]:
    """The model version vtrain registered for a vtrain job that SUCCEEDED (`model:`), if any; a failed
    lookup (no aiplatform.models.list, say) is one line on stderr, never a failed status."""
    from vtrain.cloud.submit import HASH_LABEL
    from vtrain.cloud.vertex.client import VertexJob
    from vtrain.errors import BackendError

    if not isinstance(job, VertexJob) or "/customJobs/" not in job.name or job.state != "JOB_STATE_SUCCEEDED" \
            or HASH_LABEL not in job.proto.labels:
        return []
    from vtrain.cloud.model_registry import model_of_job

    try:
        found = model_of_job(job._backend, job.job_id)
    except BackendError as err:
        click.echo(f"model: not looked up: {err}", err=True)
        return []
    if found is None:
        return []
    return [("model", found.name), ("model console", found.console_url(job.project))]


def _watch(handle: Any, poll: float, plain: bool, progress_every: float, output: str) -> None:
    """`status --watch`: the view until the job ends (a tuning job: its status line)."""
    from vtrain.commands.submit import _StatusLine
    from vtrain.view.vertex import can_watch, watch_job

    try:
        if can_watch(handle):
            watch_job(handle, timeout=None, poll=poll, plain=plain, progress_every=progress_every, stream_logs=False,
                      logs_to_stderr=output == "json", state_line=_StatusLine(handle.job_id, live=False))  # fmt: skip
        else:
            line = _StatusLine(handle.job_id, live=not plain)
            try:
                handle.wait(poll=poll, on_state=line)
            finally:
                line.close()
    except KeyboardInterrupt as err:
        from vtrain.proctree import interruption

        said, code = interruption(err)
        click.echo(f"interrupted ({said}): job {handle.name} keeps running", err=True)
        raise SystemExit(code) from None


def _iso(proto: Any, field: str) -> str | None:
    return getattr(proto, field).isoformat().replace("+00:00", "Z") if field in proto else None


@click.command()
@_JOB
@output_option("text", "json")
@click.option(
    "--exit-code",
    "state_exit_code",
    is_flag=True,
    help="Exit with the job's state instead of 0: 0 SUCCEEDED, 10 FAILED, 11 CANCELLED, 12 not ended yet, "
    "13 EXPIRED (for scripts that branch on the outcome).",
)
@click.option("--watch", is_flag=True, help="Follow the job until it ends, in the live view of `vtrain local` on a "
              "terminal (state, step, steps/s, restarts per replica) and progress lines elsewhere; then show its "
              "status and exit as --exit-code does.")
@watch_options
@_POLL
@where_options
def status(
    job: str,
    output: str,
    state_exit_code: bool,
    watch: bool,
    plain: bool,
    progress_every: float,
    poll: float,
    where: Where,
) -> None:
    """Show a job's state. JOB is a job ID or a full projects/P/locations/R/customJobs/ID name
    (or .../hyperparameterTuningJobs/ID: then the trial table and the best trial too).

    Exits 0 when the state was read, whatever it is (as `gcloud ... describe` does), so `set -e`
    scripts can poll a running job; --exit-code maps the state to the exit status instead, and
    --watch waits for the end first (Ctrl-C: exit 130, the job keeps running).
    """
    from vtrain.cloud.jobs import get_job, job_dict

    handle = get_job(job, where, poll=poll)
    if watch:
        _watch(handle, poll, plain, progress_every, output)
        state_exit_code = True
    if output == "json":
        echo_json(job_dict(handle))
    else:
        from vtrain.commands.tuning import echo_trials

        rows = _fields(handle)
        width = max(len(k) for k, _ in rows)
        for key, value in rows:  # the values are Vertex's answer (an error message, a display name)
            # A multi-line value (the error with the replica's last lines) continues under its first line,
            # each line escaped on its own, so no line can pass for a row or move the cursor.
            lines = printable_lines(str(value)) or [""]
            click.echo(f"{key:<{width}}  {lines[0]}")
            for line in lines[1:]:
                click.echo(f"{'':<{width}}  {line}")
        echo_trials(handle)
    if state_exit_code:
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
@where_options
def logs(
    job: str,
    follow: bool,
    replica: str | None,
    timestamps: bool,
    poll: float,
    where: Where,
) -> None:
    """Print a job's log from Cloud Logging, each line prefixed by its replica: [chief-0],
    [worker-1], [ps-0], [evaluator-0] as `vtrain local` prints them, [vertex] for Vertex's own lines.
    JOB is a job ID or a full projects/P/locations/R/customJobs/ID name."""
    from vtrain.cloud.jobs import get_job

    handle = get_job(job, where, poll=poll)
    if replica is not None:
        _check_replica(handle, replica)
    try:
        for line in handle.logs(follow=follow, replica=replica, timestamps=timestamps):
            click.echo(line)
    except KeyboardInterrupt:
        raise SystemExit(130) from None  # Ctrl-C ends a --follow quietly; the job is untouched


@click.command()
@_JOB
@output_option("text", "json")
@where_options
def cancel(job: str, output: str, where: Where) -> None:
    """Ask Vertex AI to stop a job (it goes CANCELLING, then CANCELLED). A job that already
    ended is left alone. JOB is a job ID or a full projects/P/locations/R/customJobs/ID name."""
    from vtrain.cloud.jobs import cancel_job, job_dict

    handle, sent = cancel_job(job, where)
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
@label_filter_option
@output_option("text", "json")
@where_options
def list_jobs(
    state: str | None,
    limit: int,
    filter_: str | None,
    labels: tuple[str, ...],
    output: str,
    where: Where,
) -> None:
    """List CustomJobs and HyperparameterTuningJobs (marked "(tuning)") in the project and region, newest first."""
    from vtrain.cloud.jobs import job_dict
    from vtrain.cloud.jobs import list_jobs as find_jobs

    terms = [filter_] if filter_ else []
    terms += labels
    jobs = find_jobs(where, state=state, limit=limit, filter=" AND ".join(terms) or None)
    if output == "json":
        echo_json([job_dict(j) for j in jobs])
        return
    if not jobs:
        click.echo("no jobs")
        return
    rows = [("ID", "STATE", "CREATED", "NAME")]
    rows += [(j.job_id, _short(j.state), _time(_iso(j.proto, "create_time")),
              printable(j.display_name) + (" (tuning)" if getattr(j, "kind", "") == "tuning" else "")) for j in jobs]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3])
