"""One job handle for local and Vertex jobs, and the one table from final state to exit code.

States are Vertex's `JobState` names (strings, so the local runner never imports
google-cloud-aiplatform). Exit codes, used by `vtrain submit --wait`, `vtrain local` and
`vtrain status`, are distinct per outcome so CI can tell them apart:

    JOB_STATE_SUCCEEDED   0     JOB_STATE_CANCELLED   11
    JOB_STATE_FAILED      10    wait timed out        12  (the job is still live)
    JOB_STATE_EXPIRED     13    any other end state   14
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

from vtrain.errors import WAIT_TIMEOUT_EXIT_CODE, JobFailed, WaitTimeout

QUEUED = "JOB_STATE_QUEUED"
PENDING = "JOB_STATE_PENDING"
RUNNING = "JOB_STATE_RUNNING"
SUCCEEDED = "JOB_STATE_SUCCEEDED"
FAILED = "JOB_STATE_FAILED"
CANCELLING = "JOB_STATE_CANCELLING"
CANCELLED = "JOB_STATE_CANCELLED"
PAUSED = "JOB_STATE_PAUSED"
EXPIRED = "JOB_STATE_EXPIRED"
UPDATING = "JOB_STATE_UPDATING"
PARTIALLY_SUCCEEDED = "JOB_STATE_PARTIALLY_SUCCEEDED"

TERMINAL_STATES = frozenset({SUCCEEDED, FAILED, CANCELLED, EXPIRED, PARTIALLY_SUCCEEDED})

EXIT_CODES: dict[str, int] = {
    SUCCEEDED: 0,
    FAILED: 10,
    CANCELLED: 11,
    EXPIRED: 13,
    PARTIALLY_SUCCEEDED: 14,
}
OTHER_EXIT_CODE = 14


def exit_code(state: str) -> int:
    """Exit code for a final state; a live state (only seen after a wait timeout) is 12."""
    if state not in TERMINAL_STATES:
        return WAIT_TIMEOUT_EXIT_CODE
    return EXIT_CODES.get(state, OTHER_EXIT_CODE)


def raise_for_state(name: str, state: str, error: str | None = None) -> None:
    """JobFailed (with the table's exit code) unless the job SUCCEEDED."""
    if state == SUCCEEDED:
        return
    if state not in TERMINAL_STATES:
        raise JobFailed(f"job {name} is still {state}", state=state, exit_code=WAIT_TIMEOUT_EXIT_CODE)
    detail = f": {error}" if error else ""
    raise JobFailed(f"job {name} ended {state}{detail}", state=state, exit_code=exit_code(state))


StateHook = Callable[[str, float], None]
LogHook = Callable[[str], None]


class Waiting:
    """One wait in progress: reports each state seen and says how long to sleep before the next
    poll, raising WaitTimeout once the timeout has passed. Shared by every way of waiting, so
    `--wait`, `--stream-logs` and `--wait-timeout` behave alike on every backend."""

    def __init__(self, handle: JobHandle, timeout: float | None, poll: float, on_state: StateHook | None) -> None:
        self.handle = handle
        self.timeout = timeout
        self.poll = poll
        self.on_state = on_state
        self.start = handle._clock()

    def elapsed(self) -> float:
        return self.handle._clock() - self.start

    def check(self, state: str) -> float:
        """Report `state`; the seconds to sleep before the next poll (raises when none are left)."""
        if self.on_state is not None:
            self.on_state(state, self.elapsed())
        if self.timeout is None or state in TERMINAL_STATES:
            return self.poll
        left = self.timeout - self.elapsed()
        if left <= 0:
            raise WaitTimeout(self.handle.name, state, self.timeout)
        return min(self.poll, left)


class JobHandle(ABC):
    """A submitted job, wherever it runs. Subclasses implement `refresh`, `cancel`, `logs`.

    `wait` polls `refresh`; a backend that can block natively (the local runner waiting on
    its processes) may override it, keeping the same contract.
    """

    #: seconds between polls when `wait` is given no `poll`
    default_poll: float = 10.0

    def __init__(self, name: str) -> None:
        self._name = name
        self._state = PENDING
        self._error: str | None = None
        self._clock: Callable[[], float] = time.monotonic
        self._sleep: Callable[[float], None] = time.sleep

    @property
    def name(self) -> str:
        """Stable identifier: the full resource name for Vertex, the run name locally."""
        return self._name

    @property
    def state(self) -> str:
        """The state as of the last `refresh` (no I/O); call `refresh()` for a fresh one."""
        return self._state

    @property
    def error(self) -> str | None:
        """The job's error message once it FAILED (None otherwise)."""
        return self._error

    @property
    def done(self) -> bool:
        return self._state in TERMINAL_STATES

    @property
    def exit_code(self) -> int:
        return exit_code(self._state)

    @abstractmethod
    def refresh(self) -> str:
        """Fetch the current state, store it (and the error), and return it."""

    @abstractmethod
    def cancel(self) -> None:
        """Ask the job to stop; it goes CANCELLING, then CANCELLED. A finished job is left alone."""

    @abstractmethod
    def logs(self, *, follow: bool = False) -> Iterator[str]:
        """Log lines, oldest first; with `follow`, keep yielding until the job ends."""

    def wait(
        self,
        timeout: float | None = None,
        poll: float | None = None,
        *,
        on_state: StateHook | None = None,
        on_log: LogHook | None = None,
    ) -> str:
        """Block until a final state and return it; WaitTimeout if `timeout` seconds pass first.

        `on_state(state, elapsed)` is called after every poll (a live status line); with `on_log`,
        the job's log lines are followed meanwhile and each is passed to it. Never raises for a
        FAILED or CANCELLED job: call `raise_for_state` (or check `exit_code`) when failure
        should be an error.
        """
        waiting = Waiting(self, timeout, self.default_poll if poll is None else poll, on_state)
        if on_log is not None:
            for line in self._follow(waiting):
                on_log(line)
            waiting.check(self.state)
            return self.state
        while True:
            state = self.refresh()
            pause = waiting.check(state)
            if state in TERMINAL_STATES:
                return state
            self._sleep(pause)

    def _follow(self, waiting: Waiting) -> Iterator[str]:
        """Log lines until the job ends, calling `waiting.check(state)` at each poll of the state
        and sleeping what it returns. Backends that can follow their log override this; the
        default polls the state, then prints the whole log once the job ended."""
        while True:
            state = self.refresh()
            pause = waiting.check(state)
            if state in TERMINAL_STATES:
                yield from self.logs()
                return
            self._sleep(pause)

    def result(self, timeout: float | None = None, poll: float | None = None) -> str:
        """`wait`, then JobFailed unless the job SUCCEEDED."""
        state = self.wait(timeout=timeout, poll=poll)
        raise_for_state(self._name, state, self._error)
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r}, state={self._state})"
