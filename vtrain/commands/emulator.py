"""`vtrain emulator`: serve the local Vertex AI JobService emulator until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

from vtrain.commands._options import duration_callback

#: vtrain.emulator.MAX_SECONDS (not imported here: the command's help stays cheap).
_MAX_SECONDS = 1e9
_FAULT_MODES = ("before", "reset", "after", "reset-after", "garble")


def _seconds(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """A duration a job can stay in one state: finite, and within a timestamp's and a wait's range."""
    if not 0 <= value <= _MAX_SECONDS:  # also refuses nan and inf
        raise click.BadParameter(f"{value} is not between 0 and {_MAX_SECONDS:.0f} seconds (~31 years)")
    return value


@click.command()
@click.option(
    "--port",
    default=8080,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port on 127.0.0.1 (0 picks a free one).",
)
@click.option(
    "--run-jobs/--no-run-jobs",
    default=False,
    show_default=True,
    help="Run each job through `vtrain local` (the local runner) instead of "
    "pretending: jobs then succeed or fail as their code does.",
)
@click.option(
    "--runner",
    "runner_spec",
    metavar="MODULE:ATTR",
    help="Use this job runner instead (see vtrain.emulator.runner for the interface).",
)
@click.option(
    "--run-seconds",
    default=10.0,
    show_default=True,
    type=float,
    callback=_seconds,
    help="Without --run-jobs: how long each job stays RUNNING before it SUCCEEDS.",
)
@click.option(
    "--pending-seconds",
    default=2.0,
    show_default=True,
    type=float,
    callback=_seconds,
    help="How long each new job stays PENDING.",
)
@click.option(
    "--queued-seconds",
    default=0.5,
    show_default=True,
    type=float,
    callback=_seconds,
    help="How long each new job stays QUEUED (as Vertex queues it) before PENDING; 0: created PENDING.",
)
@click.option(
    "--fail-next",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Fail the next N requests (to exercise retries), as --fail-mode says.",
)
@click.option(
    "--fail-mode",
    type=click.Choice(_FAULT_MODES),
    default="before",
    show_default=True,
    help="before: answer --fail-code without doing the work; reset: drop the connection first; "
    "after: do the work (a create creates the job), then answer --fail-code; reset-after: do it, "
    "then drop the connection; garble: do it, then answer 200 with JSON cut short.",
)
@click.option(
    "--fail-code",
    type=click.Choice(["429", "500", "503", "504"]),
    default="503",
    show_default=True,
    help="The status --fail-next answers with (modes before and after).",
)
@click.option(
    "--fail-jobs",
    metavar="CAUSE[:N]",
    help="End the first N jobs (default 1) FAILED as Vertex AI would, to test `submit --recover`: "
    "stockout, preempted, internal (retryable), replica, quota (not).",
)
@click.option(
    "--fail-after",
    callback=duration_callback,
    metavar="DURATION",
    help="With --fail-jobs preempted/internal/replica: let the job run this long first (its replicas "
    "then get SIGTERM, as on a preempted VM).",
)
@click.option(
    "--token",
    metavar="TOKEN|auto",
    help="Serve only paths under /TOKEN (auto: a random one), against other users of this machine; the "
    "endpoint printed, http://127.0.0.1:PORT/TOKEN, is what every client then uses.",
)
@click.option(
    "--projects",
    metavar="ID[,ID...]",
    help="Only these projects exist; calls naming another answer 403, as Vertex answers them "
    "(default: every project exists).",
)
@click.option(
    "--quota",
    "quota_specs",
    multiple=True,
    metavar="METRIC[@REGION]=N",
    help="A Cloud Quotas limit preflight reads, e.g. nvidia_t4_gpus@us-central1=4 or cpus=16 (short for "
    "aiplatform.googleapis.com/custom_model_training_...; every training metric is 1000 otherwise). Repeatable.",
)
@click.option("--quiet", "-q", is_flag=True, help="Do not print one line per request.")
def emulator(
    port: int,
    run_jobs: bool,
    runner_spec: str | None,
    run_seconds: float,
    pending_seconds: float,
    queued_seconds: float,
    fail_next: int,
    fail_mode: str,
    fail_code: str,
    fail_jobs: str | None,
    fail_after: float | None,
    token: str | None,
    projects: str | None,
    quota_specs: tuple[str, ...],
    quiet: bool,
) -> None:
    """Serve a local Vertex AI CustomJob and HyperparameterTuningJob API on 127.0.0.1 for the real client.

    Point a JobServiceClient at it with api_endpoint http://127.0.0.1:PORT, the REST
    transport and anonymous credentials (VertexBackend.from_endpoint does this). Project
    `denied-project` answers 403 PERMISSION_DENIED; creates in `quota-project` answer 429.
    Requests a web page could make (an Origin header, a non-loopback Host, a non-JSON body) are refused.
    """
    from vtrain.emulator import LOCAL_RUNNER, Emulator, load_runner, print_access_log, sleep_runner
    from vtrain.emulator.jobfaults import parse_job_fault, with_job_faults
    from vtrain.errors import BackendError

    job_fault = parse_job_fault(fail_jobs) if fail_jobs else None  # a bad value: exit 2 before listening
    from vtrain.emulator.quotas import parse_quota

    try:
        limits = [parse_quota(spec) for spec in quota_specs]
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--quota") from None
    if token is not None:
        from vtrain.emulator.guard import TOKEN_ALPHABET, new_token

        token = new_token() if token == "auto" else token
        if not TOKEN_ALPHABET.match(token):
            raise click.BadParameter("must be auto or 16 to 128 letters, digits, '_' or '-'", param_hint="--token")

    runner = tuning_runner = None
    if run_jobs:  # tuning jobs run through the local tuner, whatever runs CustomJobs
        from vtrain.emulator.tuning import LOCAL_TUNING_RUNNER

        tuning_runner = load_runner(LOCAL_TUNING_RUNNER)
    if runner_spec:
        runner = load_runner(runner_spec)
    elif run_jobs:
        try:
            runner = load_runner(LOCAL_RUNNER)
        except BackendError as err:
            raise BackendError(
                f"--run-jobs needs the local runner {LOCAL_RUNNER}, which this vtrain "
                f"does not provide yet ({err})"
            ) from None
    if job_fault is not None:
        runner = with_job_faults(runner or sleep_runner(run_seconds), job_fault, fail_after or 0.0)
    try:
        emu = Emulator(
            port=port,
            runner=runner,
            tuning_runner=tuning_runner,
            run_seconds=run_seconds,
            pending_seconds=pending_seconds,
            queued_seconds=queued_seconds,
            access_log=None if quiet else print_access_log,
            token=token,
            projects=None if projects is None else {p.strip() for p in projects.split(",") if p.strip()},
        )
    except OSError as err:
        raise BackendError(f"cannot listen on 127.0.0.1:{port}: {err.strerror or err}") from None
    if fail_next:
        emu.fail_next(fail_next, code=int(fail_code), mode=fail_mode)
    for metric, region, value in limits:
        emu.set_quota(metric, value, region)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    emu.start()
    try:
        click.echo(f"Vertex AI emulator listening on {emu.url} (Ctrl-C to stop)", err=True)
        click.echo(emu.url)
        while not stop.wait(0.5):
            pass
    finally:
        emu.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        click.echo("emulator stopped", err=True)
