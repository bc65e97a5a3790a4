"""`vtrain submit --wait --recover N`: resubmit a job that failed for the cloud's reasons, not the trainer's.

A job that ends FAILED with a retryable cause (:func:`vtrain.cloud.failures.classify_failure`: a
stock-out, a Spot preemption, an internal error) is submitted again, up to N more times, after a
backoff (30 s, doubling, at most 10 min). Every attempt is the same job file with the same
``base_output_dir``, so AIP_CHECKPOINT_DIR is the same and the trainer resumes from its checkpoints
(BackupAndRestore, ``runtime.StepCheckpoints``). Attempt k > 1 uses ``scheduling.fallback[k-2]``
when the job file lists alternatives (a region and/or the chief's machine), cycling back to the
primary after the last. Attempts are labelled ``vtrain-attempt`` (1, 2, ...) and, from the second,
``vtrain-previous-attempt`` (the previous job's ID), so `vtrain status` links each to the one it
replaced and ``vtrain list --filter 'labels.vtrain-previous-attempt="ID"'`` finds the next.
A non-retryable failure, a cancel or an expiry is not resubmitted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from vtrain.cloud.failures import Verdict, classify_failure
from vtrain.cloud.submit import ATTEMPT_LABEL, PREVIOUS_LABEL, SubmitResult, submit_job
from vtrain.cloud.target import Where
from vtrain.handle import FAILED
from vtrain.jobfile.load import fallback_overrides, load_config

BACKOFF = 30.0
MAX_BACKOFF = 600.0


@dataclass(frozen=True)
class Attempt:
    """One submission and how it ended."""

    number: int
    result: SubmitResult
    state: str
    error: str | None
    verdict: Verdict | None  # for a failure: retryable or not, and why
    variant: str  # "primary" or "scheduling.fallback[i]: region=..., machine_type=..."

    @property
    def job(self) -> Any:
        return self.result.job


def backoff(attempt: int, base: float = BACKOFF) -> float:
    """Seconds to wait before attempt `attempt` (2, 3, ...): base, 2·base, ... capped at MAX_BACKOFF."""
    factor: int = 2 ** max(0, attempt - 2)
    return min(base * factor, MAX_BACKOFF)


def variant_for(attempt: int, fallback: tuple[Any, ...]) -> tuple[str, list[str]]:
    """(description, --set overrides) for attempt `attempt`: the primary, then each fallback in turn."""
    choices: list[tuple[str, list[str]]] = [("primary", [])] + [
        (f"scheduling.fallback[{i}]: " + ", ".join(f"{k}={v}" for k, v in entry.items()), fallback_overrides(entry))
        for i, entry in enumerate(fallback)
    ]
    return choices[(attempt - 1) % len(choices)]


def submit_with_recovery(
    job_file: str | os.PathLike[str],
    *,
    recover: int,
    overrides: Iterable[str] = (),
    where: Where | None = None,
    wait: Callable[[SubmitResult, int], str],
    on_retry: Callable[[Attempt, float, str], None] = lambda attempt, delay, variant: None,
    base_backoff: float = BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
    **submit_kwargs: Any,
) -> list[Attempt]:
    """Submit, `wait(result, attempt)` for the end (returns the final state), resubmit a retryable
    failure up to `recover` times. Returns every attempt; the last one is the job's outcome.
    Every variant is validated (ConfigError) before the first submission."""
    overrides = list(overrides)
    where = where or Where()
    config = load_config(job_file, overrides)  # the fallbacks are validated with it
    attempts: list[Attempt] = []
    previous: str | None = None
    for number in range(1, recover + 2):
        variant, extra = variant_for(number, config.scheduling.fallback)
        labels = {ATTEMPT_LABEL: str(number), **({PREVIOUS_LABEL: previous} if previous else {})}
        region = next((o.split("=", 1)[1] for o in extra if o.startswith("region=")), None)
        target = replace(where, region=region) if region else where
        result = submit_job(job_file, overrides=[*overrides, *extra], where=target, labels=labels, **submit_kwargs)
        state = wait(result, number)
        job = result.job
        code = int(job.proto.error.code) if "error" in job.proto else None
        verdict = classify_failure(code, job.error) if state == FAILED else None
        attempts.append(Attempt(number, result, state, job.error, verdict, variant))
        if verdict is None or not verdict.retryable or number > recover:
            break
        delay = backoff(number + 1, base_backoff)
        on_retry(attempts[-1], delay, variant_for(number + 1, config.scheduling.fallback)[0])
        sleep(delay)
        previous = job.job_id
    return attempts


__all__ = ["ATTEMPT_LABEL", "PREVIOUS_LABEL", "Attempt", "backoff", "submit_with_recovery", "variant_for"]
