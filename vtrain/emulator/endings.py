"""How Vertex AI words a job's failure (`CustomJob.error`: a google.rpc.Status), the emulator's own table.

Each cause with its code and message, and where the wording comes from:

- replica: code 3 INVALID_ARGUMENT, ``The replica workerpool1-1 exited with a non-zero status of 1.
  Termination reason: Error.`` then the replica's last lines (a real job's error quoted in
  GoogleCloudPlatform/vertex-ai-samples#1504: "code: 3 / message: The replica workerpool1-1 exited
  with a non-zero status of 1. Termination reason: Error. \\nTraceback ...").
- stockout: code 8 RESOURCE_EXHAUSTED, ``Resources are insufficient in region: REGION. ...`` (the text
  quoted in openreview/openreview-expertise#401; the code is not confirmed).
- quota: code 8 RESOURCE_EXHAUSTED, ``The following quota metrics exceed quota limits: METRIC``
  (GoogleCloudPlatform/vertex-ai-samples#3479: "code=RESOURCE_EXHAUSTED, message=The following
  quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_cpus").
- internal: code 13 INTERNAL, ``Internal error occurred for the current attempt.`` (not confirmed).
- preempted: code 8, a Spot preemption; Vertex's exact wording is not documented (not confirmed).

`vtrain.cloud.failures.classify_failure` is tested against these (tests/emulator/test_failures.py).
A job past `scheduling.timeout` and JOB_STATE_EXPIRED are not emulated (see docs/guides/emulator.md).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8
INTERNAL = 13


@dataclass(frozen=True)
class Ending:
    code: int
    message: str  # may name {region} and {task}
    retryable: bool  # what Vertex's documentation implies: the cloud's fault, not the trainer's


FAILURES: dict[str, Ending] = {
    "stockout": Ending(RESOURCE_EXHAUSTED, "Resources are insufficient in region: {region}. Please try a different "
                       "region. If you use K80, please consider using P100 or V100 instead.", True),
    "preempted": Ending(RESOURCE_EXHAUSTED, "STOCKOUT: the job's Spot VMs were preempted.", True),
    "internal": Ending(INTERNAL, "Internal error occurred for the current attempt.", True),
    "replica": Ending(INVALID_ARGUMENT, "The replica {task} exited with a non-zero status of 1. Termination reason: "
                      "Error.", False),
    "quota": Ending(RESOURCE_EXHAUSTED, "The following quota metrics exceed quota limits: "
                    "aiplatform.googleapis.com/custom_model_training_cpus", False),
}

_POOLS = {"chief": 0, "worker": 1, "ps": 2, "reducer": 2, "evaluator": 3}
#: How `vtrain local` heads a failed job's error: "worker-1 exited with code 3" / "... was killed by SIGKILL".
_LOCAL_EXIT = re.compile(r"^(chief|worker|ps|reducer|evaluator)-(\d+) (?:exited with code (-?\d+)|was killed by "
                         r"(?:(SIG[A-Z0-9]+)|signal (\d+)))")


def replica_message(task: str, status: int, tail: list[str]) -> str:
    head = f"The replica {task} exited with a non-zero status of {status}. Termination reason: Error."
    return head + (" \n" + "\n".join(tail) if tail else "")


def replica_failure(error: str) -> tuple[int, str] | None:
    """`vtrain local`'s error for a failed replica → (code, message) as Vertex reports it; None if it is not one."""
    lines = error.splitlines()
    match = _LOCAL_EXIT.match(lines[0]) if lines else None
    if match is None:
        return None
    role, index, code, name, number = match.groups()
    if code is not None:
        status = int(code)
    else:  # a killed process: the shell's 128 + signal, as a container's exit status reads
        try:
            status = 128 + (int(signal.Signals[name]) if name else int(number))
        except (KeyError, ValueError):
            status = 137
    tail = [line.strip().removeprefix("|").strip() for line in lines[1:] if line.lstrip().startswith("|")]
    return INVALID_ARGUMENT, replica_message(f"workerpool{_POOLS[role]}-{index}", status, tail)


__all__ = ["FAILURES", "Ending", "replica_failure", "replica_message"]
