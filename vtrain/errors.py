"""The one exception tree vtrain raises for user-facing failures, and only here.

Everything a user can cause (a bad job file, a missing package directory, a refused API call,
a failed job) is a :class:`VtrainError`. Each error knows its exit code and prints itself
(:meth:`VtrainError.show`, after click's ``ClickException.show``): the CLI catches only the base
and calls ``show``, never branching on the type. Any other exception is a bug and keeps its
traceback. Every line an error prints goes through :func:`vtrain.foreign.printable`: an error
carries what others wrote (a Vertex or registry message, a trainer's last lines, a file name), and
none of it may drive the terminal. This module imports nothing of vtrain but :mod:`vtrain.foreign`:
both ship to replicas with the runtime.

    VtrainError                  exit 1 unless noted
    ├── ConfigError              the job file or its overrides are invalid (exit 2; every problem)
    ├── UsageError               a command-line value vtrain cannot use (exit 2)
    │   ├── EstimateError        an input to `vtrain estimate` is unusable
    │   └── FaultSpecError       a --fault / emulator fault spec cannot be parsed or names no replica
    ├── InitError                `vtrain init` cannot write the trainer
    ├── PackagingError           the trainer cannot be built or staged
    ├── BackendError             Vertex AI / the local runner refused or failed a call
    │   └── PreflightFailed      a cloud-side check before submitting failed (bucket, IAM, API)
    ├── PlotError                matplotlib is missing or the figure cannot be written
    ├── Interrupted              Ctrl-C or SIGTERM stopped a command that builds or uploads (130, 143)
    ├── RuntimeMismatch          inside a replica: the strategy asked for does not fit the machine
    └── JobFailed                the job ended FAILED, CANCELLED, EXPIRED (exit 10, 11, 13)
        └── WaitTimeout          waiting ran out while the job is still live (exit 12)
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import TextIO

from vtrain.foreign import printable


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a job file, located as precisely as we can."""

    path: str
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    severity: str = "error"

    def location(self) -> str:
        parts = [printable(self.file) if self.file else "<config>"]  # a file name is anyone's
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        tag = "" if self.severity == "error" else f"{self.severity}: "
        where = f"{self.path}: " if self.path else ""
        return "\n".join(_lines(f"{self.location()}: {tag}{where}{self.message}"))

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def github(self) -> str:
        """This problem as a GitHub Actions workflow command (`::error file=F,line=L,col=C::…`), so
        the run's summary and the pull request's diff show it on its line. A location that is no
        file (`--set …`, `<config>`) is left out rather than pointing at a file that does not exist."""
        props = []
        if self.file and not self.file.startswith(("--set ", "<")):
            props.append(f"file={_escape_property(self.file)}")
            if self.line is not None:
                props.append(f"line={self.line}")
                if self.column is not None:
                    props.append(f"col={self.column}")
        props.append(f"title={_escape_property('vtrain: ' + (self.path or 'job file'))}")
        where = f"{self.path}: " if self.path else ""
        if self.file and self.file.startswith("--set "):
            where = f"{self.file}: {where}"
        command = "error" if self.severity == "error" else "warning"
        return f"::{command} {','.join(props)}::{_escape_data(where + self.message)}"


def _escape_data(text: str) -> str:
    """GitHub's escaping of a workflow command's message: %, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """GitHub's escaping of a workflow command's property value: the message's, plus : and ,."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _lines(text: str) -> list[str]:
    """`text` as printable lines, split at newlines only: a carriage return or a Unicode line separator
    in a message is shown escaped, so it cannot start a line that passes for vtrain's own."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [printable(line) for line in lines]


class VtrainError(Exception):
    """Base of every error a user can cause; the CLI prints it without a traceback."""

    exit_code = 1

    def show(self, file: TextIO | None = None) -> None:
        """Print the error for a person: each line as `error: ...` on stderr."""
        out = file or sys.stderr
        for line in _lines(str(self)) or [type(self).__name__]:
            print(f"error: {line}", file=out)


class ConfigError(VtrainError):
    """The job file is invalid; carries every problem found, not just the first."""

    exit_code = 2

    def __init__(self, problems: list[Problem]) -> None:
        ordered = sorted(problems, key=lambda p: (p.file or "", p.line or 0, p.column or 0))
        self.problems = [p for p in ordered if p.severity == "error"]
        self.warnings = [p for p in ordered if p.severity != "error"]
        n = len(self.problems)
        super().__init__(f"{n} problem{'s' if n != 1 else ''} in the job file")

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    def show(self, file: TextIO | None = None) -> None:
        """Every problem and warning at its file:line:col, then how many."""
        out = file or sys.stderr
        for problem in self.problems + self.warnings:
            print(str(problem), file=out)  # printable already
        print(f"error: {self.args[0]}", file=out)


class UsageError(VtrainError):
    """A command-line value vtrain cannot use; exit 2 as click's usage errors."""

    exit_code = 2


class EstimateError(UsageError):
    """An input to the estimate is unusable (bad number, no workers, unknown machine, bad price file)."""


class FaultSpecError(UsageError):
    """A fault to inject (`--fault REPLICA:KIND@WHEN`, a `vtrain-fault` label) is malformed or names no replica."""


class InitError(VtrainError):
    """`vtrain init` cannot write the trainer (an unknown template or a file in the way)."""


class PlotError(VtrainError):
    """matplotlib is missing or the figure cannot be written."""


class RuntimeMismatch(VtrainError):
    """Inside a replica: the strategy asked for does not fit the environment this replica really has."""


class HorovodUnsupported(VtrainError, NotImplementedError):
    """Inside a replica: a Horovod call vtrain.horovod does not implement (hvd.join, process sets, ...);
    the message says why and what to do instead."""


class Interrupted(VtrainError):
    """Ctrl-C or SIGTERM stopped a command; exit 128 + the signal's number, as a shell reports it."""

    def __init__(self, signal_name: str, signal_number: int) -> None:
        super().__init__(f"interrupted by {signal_name}: stopped every process it started and removed its "
                         "temporary files")
        self.exit_code = 128 + signal_number


class DilocoError(VtrainError):
    """Inside a DiLoCo job: the syncer or a learner cannot go on (rejected, a deadline passed, models differ)."""


class PackagingError(VtrainError):
    """The trainer package cannot be built or staged."""


class BackendError(VtrainError):
    """A backend (Vertex AI or the local runner) refused or failed a call."""


class CreateOutcomeUnknown(BackendError):
    """A create may have reached Vertex AI but its answer was lost: the job may exist. Carries the
    submit id (the vtrain-submit-id label) and the command that finds the job."""

    def __init__(self, message: str, *, submit_id: str, find_command: str) -> None:
        super().__init__(message)
        self.submit_id = submit_id
        self.find_command = find_command


class PreflightFailed(BackendError):
    """One or more preflight checks failed: nothing was uploaded or created. One line per failure."""

    def __init__(self, failures: list[str], total: int) -> None:
        self.failures = failures
        lines = [f"preflight: {failure}" for failure in failures]
        if len(failures) > 1:
            lines.append(f"preflight: {len(failures)} of {total} checks failed; nothing was uploaded or created")
        super().__init__("\n".join(lines))


class JobFailed(VtrainError):
    """The job reached a terminal state other than SUCCEEDED."""

    def __init__(self, message: str, state: str = "JOB_STATE_FAILED", exit_code: int = 1) -> None:
        super().__init__(message)
        self.state = state
        self.exit_code = exit_code


#: The exit code of a wait that ran out while the job is live (docs/reference/errors.md).
WAIT_TIMEOUT_EXIT_CODE = 12


class WaitTimeout(JobFailed):
    """`wait(timeout=...)` ran out while the job was still live; the job keeps running."""

    def __init__(self, name: str, state: str, timeout: float) -> None:
        super().__init__(
            f"job {name} is still {state} after waiting {timeout:g} s (it keeps running; "
            f"cancel it with `vtrain cancel {name}`)",
            state=state,
            exit_code=WAIT_TIMEOUT_EXIT_CODE,
        )
