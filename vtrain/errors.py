"""The one exception tree vtrain raises for user-facing failures.

Everything a user can cause (a bad job file, a missing package directory, a
refused API call, a failed job) is a :class:`VtrainError`. The CLI catches
only this base and prints it as readable lines; any other exception is a bug
and keeps its traceback.

    VtrainError
    ├── ConfigError      the job file or its overrides are invalid (exit 2)
    ├── PackagingError   the trainer cannot be built or staged
    ├── BackendError     Vertex AI / the local runner refused or failed a call
    └── JobFailed        the job ran and ended FAILED, CANCELLED or timed out
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


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
        parts = [self.file or "<config>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        tag = "" if self.severity == "error" else f"{self.severity}: "
        where = f"{self.path}: " if self.path else ""
        return f"{self.location()}: {tag}{where}{self.message}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class VtrainError(Exception):
    """Base of every error a user can cause; the CLI prints it without a traceback."""

    exit_code = 1


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


class PackagingError(VtrainError):
    """The trainer package cannot be built or staged."""


class BackendError(VtrainError):
    """A backend (Vertex AI or the local runner) refused or failed a call."""


class JobFailed(VtrainError):
    """The job reached a terminal state other than SUCCEEDED."""

    def __init__(self, message: str, state: str = "JOB_STATE_FAILED", exit_code: int = 1) -> None:
        super().__init__(message)
        self.state = state
        self.exit_code = exit_code
