"""Why a Vertex AI job ended FAILED, and whether submitting it again can help: pure, no I/O.

`vtrain submit --wait --recover N` resubmits a job that failed for a cause that is about the
cloud, not the trainer: a stock-out (no capacity for the machine in the region, reported as
``Resources are insufficient in region: REGION`` with code 8 RESOURCE_EXHAUSTED), a Spot VM
preemption, an internal error that outlived Vertex's own retries (code 13, ``Internal error
occurred for the current attempt``), or the service being unavailable (code 14). A replica that
exited non-zero, a quota, a permission, a bad argument or a timeout fails the same way again: not
retried. `CustomJob.error` carries a google.rpc.Status (code + message): both are read, the
message first, because code 8 also reports quotas.

:data:`CAUSES` are those errors worded as Vertex words them; the emulator keeps its own table
(``vtrain.emulator.endings``, what ``vtrain emulator --fail-jobs`` ends jobs with), and the tests hold
the two tables and this classifier against each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# google.rpc.Code values Vertex puts in CustomJob.error.code
CANCELLED_CODE = 1
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
INTERNAL = 13
UNAVAILABLE = 14


@dataclass(frozen=True)
class Verdict:
    """Whether a failed job is worth submitting again, and why."""

    retryable: bool
    reason: str


#: Message patterns, checked in order; the first that matches decides.
_NOT_RETRYABLE = (
    (r"exited with a non-zero status|ran out of memory|non-zero exit", "a replica failed (the trainer's own error)"),
    (r"quota", "a quota is exhausted (request more quota; resubmitting hits the same limit)"),
    (r"permission|denied|unauthori[sz]ed", "permission denied"),
    (r"invalid|not supported|malformed", "the request is invalid"),
    (r"timed out|timeout|deadline", "the job ran past scheduling.timeout"),
)
_RETRYABLE = (
    (r"resources are insufficient|stock-?out|zone_resource_pool_exhausted|not enough resources|"
     r"insufficient capacity|out of capacity", "a stock-out: no capacity for this machine in the region"),
    (r"preempt", "a Spot VM was preempted"),
    (r"internal error", "an internal error of Vertex AI"),
    (r"unavailable|try again", "Vertex AI was unavailable"),
)  # fmt: skip


def classify_failure(code: int | None, message: str | None) -> Verdict:
    """Retryable (a stock-out, a preemption, an internal error) or not, from CustomJob.error."""
    text = (message or "").lower()
    for pattern, reason in _NOT_RETRYABLE:
        if re.search(pattern, text):
            return Verdict(False, reason)
    for pattern, reason in _RETRYABLE:
        if re.search(pattern, text):
            return Verdict(True, reason)
    if code in (RESOURCE_EXHAUSTED, UNAVAILABLE):
        name = "RESOURCE_EXHAUSTED" if code == RESOURCE_EXHAUSTED else "UNAVAILABLE"
        return Verdict(True, f"error code {code} ({name})")
    return Verdict(False, f"error code {code}" if code else "no error detail")


@dataclass(frozen=True)
class Cause:
    """A way for the emulator to end a job FAILED, as Vertex reports it."""

    code: int
    message: str  # may contain {region}
    retryable: bool


CAUSES: dict[str, Cause] = {
    "stockout": Cause(
        RESOURCE_EXHAUSTED,
        "Resources are insufficient in region: {region}. Please try a different region. If you use K80, "
        "please consider using P100 or V100 instead.",
        True,
    ),
    "preempted": Cause(RESOURCE_EXHAUSTED, "STOCKOUT: the job's Spot VMs were preempted.", True),
    "internal": Cause(INTERNAL, "Internal error occurred for the current attempt.", True),
    "replica": Cause(INVALID_ARGUMENT, "The replica workerpool0-0 exited with a non-zero status of 1. Termination "
                     "reason: Error.", False),  # code 3, as GoogleCloudPlatform/vertex-ai-samples#1504 quotes it
    "quota": Cause(
        RESOURCE_EXHAUSTED,
        "The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_cpus",
        False,
    ),
}

__all__ = ["CAUSES", "Cause", "Verdict", "classify_failure"]
