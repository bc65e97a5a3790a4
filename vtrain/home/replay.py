"""`vtrain replay JOB`: a job's ending on Vertex AI, rehearsed here, and one verdict line.

    verdict = vtrain.replay("1234567890", max_replicas=3)
    verdict.reproduced, verdict.line  # True, "replay: reproduced: chief-0 raised RuntimeError: … at step 7, …"

1. Read the job with ``customJobs.get`` (its request, state and error) and its Cloud Logging entries
   (:func:`vtrain.home.outcome.cloud_outcome`): the replica that failed first, its exit status, its last reported
   step, its exception and last error lines; or that the job runs, succeeded, or was ended from outside.
2. Plan the same request here (:func:`plan_replay`): outputs in a folder of its own (never the job's own
   ``baseOutputDirectory``), into which the job's checkpoints (``BASE/checkpoints/``, AIP_CHECKPOINT_DIR) are copied
   first when there are any, so the replicas resume where the job was; for a failure from outside the trainer (a
   preemption, a kill, a stock-out, an internal error) the same fault at the same step
   (:func:`~vtrain.home.outcome.fault_for`); ``--max-replicas`` caps the cluster.
3. Run it (:func:`vtrain.local.bodies.run_request`, as `vtrain local` runs any request) and compare
   (:func:`~vtrain.home.outcome.compare`): the :class:`~vtrain.home.outcome.Verdict`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vtrain.home.outcome import Outcome, Verdict, cloud_outcome, compare, fault_for, local_outcome

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

    from vtrain.cloud.target import Where
    from vtrain.local.env import Replica
    from vtrain.local.job import LocalJob
    from vtrain.local.options import RunKeywords, RunOptions

#: Cloud Logging entries read for one replay: a replica's last lines are what count (each keeps its last 400).
MAX_ENTRIES = 200_000
TAIL_BYTES = 65536


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay runs: the job's `body`, the run's `options` (output dir, faults), what Vertex said
    (`cloud`), and the notes on how it was prepared."""

    job_name: str
    display_name: str
    body: dict[str, Any]
    options: RunOptions
    cloud: Outcome
    faults: tuple[str, ...] = ()
    resumed_from: str | None = None
    notes: tuple[str, ...] = ()


def log_entries(job: Any, limit: int = MAX_ENTRIES) -> Iterator[dict[str, Any]]:
    """The job's Cloud Logging entries, oldest first, at most `limit` (the reader keeps what it needs of them)."""
    backend = job._backend
    entries = backend._logs(job, follow=False, poll=1.0, task=None, format=lambda entry: entry)
    for n, entry in enumerate(entries):
        if n >= limit:
            return
        yield entry


def restore_checkpoints(body: dict[str, Any], output_dir: Path) -> tuple[str | None, int]:
    """The job's checkpoints (BASE/checkpoints/) copied into `output_dir`/checkpoints; (where from, files), or
    (None, 0) when the job has no base output dir or nothing is there."""
    from vtrain.local.downloads import fetch_tree
    from vtrain.trainer.staging import uri_to_path

    base = str((body.get("jobSpec", {}).get("baseOutputDirectory") or {}).get("outputUriPrefix") or "")
    if not base:
        return None, 0
    source = base.rstrip("/") + "/checkpoints"
    dest = output_dir / "checkpoints"
    if source.startswith("gs://"):
        written = fetch_tree(source, dest)
        return (source, len(written)) if written else (None, 0)
    path = uri_to_path(source) if "://" in source else Path(source)
    if path is None or not path.is_dir() or not any(path.iterdir()):
        return None, 0
    shutil.copytree(path, dest, symlinks=True, dirs_exist_ok=True)
    return source, sum(1 for p in dest.rglob("*") if p.is_file())


def plan_replay(job: str, where: Where | None = None, options: RunOptions | None = None, *,
                notice: Callable[[str], None] = lambda text: None) -> ReplayPlan:
    """Read `job` (ID or resource name) and its log from Vertex; prepare the local run (see the module)."""
    from vtrain.home.source import fetch_vertex_job
    from vtrain.local.env import plan
    from vtrain.local.faults import parse_fault
    from vtrain.local.options import RunOptions

    incoming, found = fetch_vertex_job(job, where)
    cloud = cloud_outcome(incoming.body, log_entries(found))
    notice(f"on Vertex: {cloud.state.removeprefix('JOB_STATE_')}" + (f": {cloud.said()}" if cloud.failed else ""))
    opts = options or RunOptions()
    output_dir = Path(opts.output_dir) if opts.output_dir is not None else \
        Path(tempfile.mkdtemp(prefix="vtrain-replay-"))  # fmt: skip
    output_dir.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    resumed_from, files = restore_checkpoints(incoming.body, output_dir)
    if resumed_from is not None:
        notes.append(f"resuming from the job's checkpoints: {files} file(s) of {resumed_from}")
        notice(notes[-1])
    try:
        labels = [r.label for r in plan(incoming.body, opts.max_replicas).replicas]
    except ValueError:
        labels = []
    fault, why = fault_for(cloud, labels)
    faults = (fault,) if fault is not None else ()
    if why:
        notes.append(why)
        notice(why)
    if fault is not None:
        notice(f"injecting what ended it on Vertex ({cloud.cause}): --fault {fault}")
    opts = opts.replace(output_dir=output_dir, keep=True,
                        faults=(*opts.faults, *(parse_fault(f) for f in faults)))  # fmt: skip
    return ReplayPlan(incoming.job_name or job, incoming.name, incoming.body, opts, cloud, faults, resumed_from,
                      tuple(notes))


def start_replay(the_plan: ReplayPlan, *, out: IO[str] | None = None, notice: Callable[[str], None] = lambda t: None,
                 on_line: Callable[[Replica, str, str], None] | None = None) -> LocalJob:
    """Start the planned run here (the job's request, as `vtrain local` runs any request)."""
    from vtrain.local.bodies import run_request

    return run_request(the_plan.body, options=the_plan.options, name=f"replay of {the_plan.display_name}", out=out,
                       notice=notice, on_line=on_line)


def judge(the_plan: ReplayPlan, local: LocalJob) -> Verdict:
    """The ended local run against Vertex's ending."""
    from vtrain.foreign import printable_lines

    tails: dict[str, list[str]] = {}
    for label in local.summary.get("replicas", {}):
        path = local.replica_log(label)
        try:
            with open(path, "rb") as f:
                f.seek(max(0, f.seek(0, 2) - TAIL_BYTES))
                tails[label] = printable_lines(f.read())[-400:]
        except OSError:
            tails[label] = []
    mine = local_outcome(local.summary, tails)
    return compare(the_plan.cloud, mine, faults=the_plan.faults, resumed_from=the_plan.resumed_from,
                   run_dir=str(local.run_dir), notes=the_plan.notes)


def replay(job: str, *, where: Where | None = None, options: RunOptions | None = None, out: IO[str] | None = None,
           notices: IO[str] | None = None, **keywords: Unpack[RunKeywords]) -> Verdict:
    """Replay `job` (a CustomJob's ID or resource name on Vertex AI, or the emulator: `where`) here and return the
    verdict (:class:`~vtrain.home.outcome.Verdict`: `reproduced`, `line`, both endings, what differs).

    `options` (or their fields as keywords: ``max_replicas=3``, ``timeout=600``: the run fails past it) as for
    :func:`vtrain.run_local`; the output dir is a new temporary folder unless given. Replica lines go to `out`, the
    replay's notices to `notices`."""
    from vtrain.local.options import run_options

    def notice(text: str) -> None:
        if notices is not None:
            notices.write(f"[vtrain] {text}\n")
            notices.flush()

    the_plan = plan_replay(job, where, run_options(options, keywords, "replay"), notice=notice)
    local = start_replay(the_plan, out=out, notice=notice)
    try:
        local.wait()
    finally:
        if not local.done:
            local.cancel(force=True)
            local.wait()
    return judge(the_plan, local)


__all__ = ["MAX_ENTRIES", "ReplayPlan", "judge", "log_entries", "plan_replay", "replay", "restore_checkpoints",
           "start_replay"]
