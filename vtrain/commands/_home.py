"""What `vtrain local` does with a job someone else wrote, and with `--fault-matrix`: kept beside the command so its
own flow (a job file, the live view) reads as before."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from vtrain.cloud.target import Where
    from vtrain.home.source import Incoming
    from vtrain.local.job import LocalJob
    from vtrain.local.options import RunOptions


def incoming_job(job: str, where: Where, overrides: tuple[str, ...]) -> Incoming | None:
    """The CustomJob `job` names (a request file, a job on Vertex by name or ID); None for a job file."""
    from vtrain.errors import UsageError
    from vtrain.home.source import job_request

    found = job_request(job, where)
    if found is not None and overrides:
        raise UsageError(f"--set changes a job file; {job} is {found.origin.split(' in ')[0]}: edit the request, or "
                         "run a job file")
    return found


def replica_labels(config: Any, incoming: Incoming | None, max_replicas: int | None) -> list[str] | None:
    """The replicas this run will have (as --max-replicas shapes it); None when the plan refuses the job."""
    from vtrain.jobfile.artifacts import Artifacts
    from vtrain.local.env import plan
    from vtrain.request.custom_job import build_job_dict

    body = incoming.body if incoming is not None else build_job_dict(config, Artifacts.stand_ins())
    try:
        return [r.label for r in plan(body, max_replicas).replicas]
    except ValueError:
        return None  # a job the plan refuses is reported when it runs


def start(config: Any, incoming: Incoming | None, options: RunOptions, notices: Any, on_line: Any) -> LocalJob:
    """Start the job file's request, or the incoming CustomJob's, with `options`."""
    from vtrain.home.run import run_local

    if incoming is None:
        return run_local(config, options=options, out=None, notices=notices, on_line=on_line)
    from vtrain.local.bodies import run_request

    def notice(text: str) -> None:
        notices.write(f"[vtrain] {text}\n")
        notices.flush()

    notice(f"running {incoming.origin}")
    return run_request(incoming.body, options=options, name=incoming.name, notice=notice, on_line=on_line)


def fault_matrix(config: Any, incoming: Incoming | None, options: RunOptions, scenarios: str, output: str,
                 job: str) -> None:
    """`--fault-matrix`: each scenario's run, the table (or JSON, or GitHub annotations); JobFailed (exit 10) unless
    every scenario ended as Vertex would end it."""
    import sys

    from vtrain.errors import JobFailed, UsageError
    from vtrain.handle import FAILED, exit_code
    from vtrain.jobfile.artifacts import Artifacts
    from vtrain.local import matrix
    from vtrain.request.custom_job import build_job_dict

    if options.faults:
        raise UsageError("--fault-matrix injects its own faults: drop --fault (or run one scenario with --fault)")
    names = matrix.parse_names(scenarios)
    # its pools and scheduling (the artifacts' names do not matter here: each run plans its own)
    body = incoming.body if incoming is not None else build_job_dict(config, Artifacts.stand_ins())

    def notice(text: str) -> None:
        click.echo(f"[vtrain] {text}", err=True)

    rows = matrix.run_matrix(lambda opts: start(config, incoming, opts, _Quiet(), None), options, body, names,
                             notice=notice, timeout=options.timeout)  # fmt: skip
    if output == "json":
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        for line in matrix.table(rows):
            click.echo(line)
        if output == "github":
            for line in matrix.github(rows, None if incoming is not None else job):
                click.echo(line)
    failed = [r for r in rows if not r.passed]
    sys.stdout.flush()
    if failed:
        raise JobFailed(f"fault matrix: {len(failed)} of {len(rows)} scenario(s) did not end as Vertex would end them "
                        f"({', '.join(r.scenario for r in failed)})", state=FAILED, exit_code=exit_code(FAILED))
    click.echo(f"[vtrain] fault matrix: all {len(rows)} scenario(s) ended as Vertex would end them", err=True)


class MatrixOption(click.Command):
    """`vtrain local`'s parsing: `--fault-matrix` takes an optional list of scenarios, so in `vtrain local
    --fault-matrix JOB.yaml` click would take the job for that list. A value that is a file, or names a job (a
    path, a .yaml/.json name, a resource name or an ID), is the JOB: `--fault-matrix` then means every scenario."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        import os

        from vtrain.home.source import is_job_reference

        out = list(args)
        for i, arg in enumerate(out[:-1]):
            if arg == "--fault-matrix":
                value = out[i + 1]
                if os.path.exists(value) or "/" in value or value.endswith((".yaml", ".yml", ".json")) \
                        or is_job_reference(value):  # fmt: skip
                    out[i] = "--fault-matrix=all"
                break
        return super().parse_args(ctx, out)


class _Quiet:
    """A notice sink for the matrix's runs: their notices are in each run's job.log, not on the screen."""

    def write(self, text: str, /) -> int:
        return len(text)

    def flush(self) -> None:
        pass


__all__ = ["MatrixOption", "fault_matrix", "incoming_job", "replica_labels", "start"]
