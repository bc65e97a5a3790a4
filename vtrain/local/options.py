"""How a local run behaves, as one value: :class:`RunOptions`.

The same options reach every layer of a local run: `vtrain local` builds one from its flags,
:func:`vtrain.run_local` and :func:`vtrain.run_local_tuning` take one (``options=``), the runner
hands it to :func:`vtrain.local.runner.run_job` and the supervisor (:class:`vtrain.local.job.LocalJob`),
a study gives each trial its own copy, and the emulator's ``--run-jobs`` runners hold one.

    job = vtrain.run_local(config, options=RunOptions(restart_policy="never", timeout=600))

The keywords the SDK took before (``run_local(config, timeout=600, keep=False)``) still work:
:func:`run_options` turns them into a RunOptions, in this one place, for every entry point.
Where output goes (``out``, ``notices``, ``on_line``) is not an option of the run but a
parameter of each call, as before.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from vtrain.local.faults import DEFAULT_PREEMPT_GRACE, FaultSpec

CONTAINER_MODES = ("auto", "always", "never")
RUNTIME_MODES = ("auto", "stack", "image", "host")  # vtrain.local.runtimes.RUNTIMES


@dataclass(frozen=True)
class RunOptions:
    """The options of one local run (a job, or each trial of a study); every time is in seconds.

    The defaults are those `run_local` has always had. For a study, `output_dir` is the study's
    (trial N writes under OUTPUT/N/), `timeout` limits each trial, and the trials' working dirs
    are removed whatever `keep` says (the study's output dir is always kept); `faults` apply to
    single jobs only.
    """

    output_dir: str | os.PathLike[str] | None = None  # None: the job's local base_output_dir, else a temporary dir
    max_replicas: int | None = None  # shrink the cluster to at most this many processes, keeping every role
    timeout: float | None = None  # the whole job; None: the job's scheduling.timeout, if any
    keep: bool = True  # keep a temporary output dir (after success) and the replicas' working dirs
    cache_dir: str | os.PathLike[str] | None = None  # the environment cache; None: VTRAIN_CACHE_DIR, ~/.cache/vtrain
    allow_credentials: bool = False  # package files that look like credentials
    startup_timeout: float = 120.0  # a cluster member's server up, once a peer's is
    worker_grace: float = 30.0  # workers may outlive a successful chief this long
    kill_grace: float = 5.0  # SIGTERM → SIGKILL when the launcher stops a replica
    restart_policy: str = "vertex"  # "vertex": restart as Vertex AI does; "never": the first failure fails
    faults: Sequence[FaultSpec] = ()  # signals to inject (vtrain.local.faults)
    preempt_grace: float = DEFAULT_PREEMPT_GRACE  # SIGTERM → SIGKILL of a `preempt` fault without its own
    # An image job's replicas: "auto" in containers where this machine can run them (else on this machine's
    # Python, said once), "always" in containers or not at all, "never" on this machine's Python
    containers: str = "auto"
    # A Python package job's replicas: "auto" (the image's stack for a prebuilt image, else this machine's;
    # VTRAIN_RUNTIME may say otherwise), "stack", "image" (Vertex's own image, in a container) or "host"
    # (this machine's Python and TensorFlow): vtrain.local.runtimes
    runtime: str = "auto"
    #: After the chief succeeded: the output dir → a problem that fails the run (`model:`'s SavedModel check).
    check_output: Callable[[Path], str | None] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "faults", tuple(self.faults))  # a list given stays the caller's
        if self.containers not in CONTAINER_MODES:
            raise ValueError(f"containers={self.containers!r}: one of {', '.join(CONTAINER_MODES)}")
        if self.runtime not in RUNTIME_MODES:
            raise ValueError(f"runtime={self.runtime!r}: one of {', '.join(RUNTIME_MODES)}")

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with `changes` (the field names of RunOptions)."""
        return dataclasses.replace(self, **changes)


FIELDS = tuple(f.name for f in dataclasses.fields(RunOptions))


class RunKeywords(TypedDict, total=False):
    """RunOptions' fields as the keyword arguments `run_local`, `run_local_tuning` and `run_job` take
    (``**keywords: Unpack[RunKeywords]``): a type checker reads each by name and type, so a misspelt option is an
    error there, not only at run time. The same names and types as :class:`RunOptions` (a test holds them equal)."""

    output_dir: str | os.PathLike[str] | None
    max_replicas: int | None
    timeout: float | None
    keep: bool
    cache_dir: str | os.PathLike[str] | None
    allow_credentials: bool
    startup_timeout: float
    worker_grace: float
    kill_grace: float
    restart_policy: str
    faults: Sequence[FaultSpec]
    preempt_grace: float
    containers: str
    runtime: str
    check_output: Callable[[Path], str | None] | None


def run_options(options: RunOptions | None, keywords: RunKeywords | Mapping[str, Any], where: str,
                base: RunOptions | None = None) -> RunOptions:
    """The run's options: `options` (else `base`, else the defaults) with the keyword arguments of
    the older SDK calls applied over it. A keyword that is no option is the TypeError Python gives."""
    unknown = sorted(set(keywords) - set(FIELDS))
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r} "
                        f"(run options: {', '.join(FIELDS)})")  # fmt: skip
    chosen = options if options is not None else base if base is not None else RunOptions()
    return dataclasses.replace(chosen, **keywords) if keywords else chosen


__all__ = ["FIELDS", "RunOptions", "run_options"]
