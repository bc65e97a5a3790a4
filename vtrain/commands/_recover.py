"""`vtrain submit --wait --recover N`: the options and the loop's printing (the SDK is vtrain.cloud.recover)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from vtrain.commands._options import echo_json
from vtrain.foreign import printable


def _seconds(ctx: click.Context, param: click.Parameter, value: str) -> float:
    from vtrain.local.faults import parse_seconds

    seconds = parse_seconds(value)
    if seconds is None:
        raise click.BadParameter(f"expected a duration like 30s, 2m or 0.5s, got {value!r}")
    return seconds


def recover_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--recover N and --recover-backoff DURATION."""
    fn = click.option(
        "--recover-backoff",
        callback=_seconds,
        default="30s",
        show_default=True,
        metavar="DURATION",
        help="Wait this long before the first resubmission, doubling each time (at most 10m).",
    )(fn)
    return click.option(
        "--recover",
        type=click.IntRange(min=0),
        default=0,
        metavar="N",
        help="Implies --wait. When the job FAILS for a retryable cause (stock-out, Spot preemption, internal "
        "error), submit it again, up to N times, with the same base_output_dir so training resumes from its "
        "checkpoints; scheduling.fallback lists regions/machines to try in turn. Each attempt is labelled "
        "vtrain-attempt (and vtrain-previous-attempt). A trainer's own failure is never resubmitted.",
    )(fn)


def submit_recovering(job_file: str, *, recover: int, backoff: float, output: str, poll: float,
                      timeout: float | None, after_end: Callable[[Any, str], None] | None = None,
                      **kwargs: Any) -> None:
    """Submit and wait, resubmitting retryable failures; exit as the last attempt ended. `after_end`
    gets the last attempt's submit result and final state (the model upload after a success)."""
    from vtrain.cloud.jobs import job_dict, watch
    from vtrain.cloud.recover import submit_with_recovery
    from vtrain.handle import raise_for_state

    def wait(result: Any, number: int) -> str:
        job = result.job
        click.echo(f"attempt {number}: submitted {job.name} ({printable(job.display_name)})",
                   err=output == "json")
        seen: list[str] = []

        def on_state(state: str, elapsed: float) -> None:
            if not seen or seen[-1] != state:
                click.echo(f"{job.job_id}  {state.removeprefix('JOB_STATE_')}  {int(elapsed)}s", err=True)
                seen.append(state)

        try:
            return watch(job, timeout=timeout, poll=poll, on_state=on_state)
        except KeyboardInterrupt as err:
            from vtrain.proctree import interruption

            said, code = interruption(err)
            click.echo(f"interrupted ({said}): job {job.name} keeps running; stop it with `vtrain cancel "
                       f"{job.name}`", err=True)
            raise SystemExit(code) from None

    def on_retry(attempt: Any, delay: float, variant: str) -> None:
        reason = printable(attempt.verdict.reason)  # Vertex's words
        click.echo(f"attempt {attempt.number} ({attempt.job.job_id}) FAILED, retryable: {reason}; "
                   f"resubmitting in {delay:g}s ({variant})", err=True)

    attempts = submit_with_recovery(job_file, recover=recover, wait=wait, on_retry=on_retry,
                                    base_backoff=backoff, poll=poll, **kwargs)
    last = attempts[-1]
    if last.verdict is not None and not last.verdict.retryable:
        click.echo(f"attempt {last.number} FAILED, not retryable ({printable(last.verdict.reason)}): "
                   "not resubmitted", err=True)
    elif last.verdict is not None:
        click.echo(f"attempt {last.number} FAILED, retryable, but --recover {recover} is used up", err=True)
    if output == "json":
        echo_json(job_dict(last.job))
    else:
        click.echo(f"{last.job.name} ended {last.state} on attempt {last.number} of {recover + 1}")
    if after_end is not None:
        after_end(last.result, last.state)
    raise_for_state(last.job.name, last.state, last.error)
