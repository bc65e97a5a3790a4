"""What the syncer knows of each stream and each learner: who may write, who is alive, who is due.

Apart from :mod:`.syncer` so its rules (liveness by heartbeats, a learner's pace) read on their own.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass, field
from typing import Any

from vtrain.diloco import wire

WORK_SMOOTHING = 0.5  # weight of the newest answer-to-delta time in a learner's pace


@dataclass(eq=False)
class Conn:
    """One stream. Only its response generator writes to it (one writer per connection)."""

    out: queue.Queue[Any] = field(default_factory=queue.Queue)
    learner: str | None = None
    closed: bool = False

    def send(self, head: Any, payload: bytes = b"") -> None:
        if not self.closed:
            for frame in wire.frames(head, payload):
                self.out.put(frame)

    def close(self) -> None:
        self.closed = True
        self.out.put(None)


@dataclass
class Learner:
    name: str
    conn: Conn | None
    last_heard: float
    base: list[int]
    done: bool = False
    left_at: float | None = None
    deltas: int = 0
    weight: float = 0.0  # the weight of its last fresh delta: its share of a full round
    answered_at: float | None = None  # when we last unblocked it (welcome, merge, catch-up)
    joined: float = 0.0  # when it (re)registered
    just_joined: bool = False  # no delta since then
    work: float | None = None  # its usual time from an answer to its next delta (moving average)

    def heard_delta(self, now: float) -> None:
        if self.answered_at is not None:
            sample = now - self.answered_at
            self.work = sample if self.work is None else WORK_SMOOTHING * sample + (1 - WORK_SMOOTHING) * self.work
            self.answered_at = None  # it waits on us now

    def due_by(self, deadline: float) -> bool:
        """Whether its next delta may come by `deadline` (unknown pace: assume it may)."""
        return self.answered_at is None or self.work is None or self.answered_at + self.work <= deadline

    def alive(self, now: float, timeout: float) -> bool:
        return self.conn is not None and not self.conn.closed and not self.done and now - self.last_heard < timeout
