"""`vtrain emulator`: serve the local Vertex AI JobService emulator until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click


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
    type=click.FloatRange(0),
    help="Without --run-jobs: how long each job stays RUNNING before it SUCCEEDS.",
)
@click.option(
    "--pending-seconds",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0),
    help="How long each new job stays PENDING.",
)
@click.option(
    "--fail-next",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Answer the next N requests with 503 UNAVAILABLE (to exercise retries).",
)
@click.option("--quiet", "-q", is_flag=True, help="Do not print one line per request.")
def emulator(
    port: int,
    run_jobs: bool,
    runner_spec: str | None,
    run_seconds: float,
    pending_seconds: float,
    fail_next: int,
    quiet: bool,
) -> None:
    """Serve a local Vertex AI CustomJob and HyperparameterTuningJob API on 127.0.0.1 for the real client.

    Point a JobServiceClient at it with api_endpoint http://127.0.0.1:PORT, the REST
    transport and anonymous credentials (VertexBackend.from_endpoint does this). Project
    `denied-project` answers 403 PERMISSION_DENIED; creates in `quota-project` answer 429.
    """
    from vtrain.emulator import LOCAL_RUNNER, Emulator, load_runner, print_access_log
    from vtrain.errors import BackendError

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
    try:
        emu = Emulator(
            port=port,
            runner=runner,
            tuning_runner=tuning_runner,
            run_seconds=run_seconds,
            pending_seconds=pending_seconds,
            access_log=None if quiet else print_access_log,
        )
    except OSError as err:
        raise BackendError(f"cannot listen on 127.0.0.1:{port}: {err.strerror or err}") from None
    if fail_next:
        emu.fail_next(fail_next)
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
