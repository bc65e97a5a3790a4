"""`vtrain local`: run the job on this machine as Vertex AI would start it, one process per replica."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from vtrain.commands._faultopts import fault_option, restart_policy_option
from vtrain.commands._options import UserPath, duration_callback, output_option, set_option


@click.command()
@click.argument("job_file", metavar="JOB.yaml", type=UserPath(dir_okay=False))
@click.option("--output-dir", type=UserPath(file_okay=False, utf8=True),
              help="Base output dir (AIP_MODEL_DIR = DIR/model/, ...; this run's logs in "
              "DIR/vtrain-local/JOB_ID/). Default: the job's base_output_dir when it is local, else a "
              "temporary dir removed on success unless --keep.")
@click.option("--max-replicas", type=click.IntRange(min=1), help="Shrink the cluster to at most N processes, "
              "keeping every role (chief, >= 1 worker, ps, evaluator).")
@click.option("--timeout", callback=duration_callback, metavar="DURATION",
              help="Fail the job after this long (e.g. 10m). Default: the job's scheduling.timeout.")
@click.option("--startup-timeout", callback=duration_callback, default="120s", show_default=True, metavar="DURATION",
              help="Fail when a replica's TensorFlow server is not up this long after a peer's.")
@click.option("--keep", is_flag=True, help="Keep the temporary output dir and the replicas' working dirs.")
@click.option("--allow-credentials", is_flag=True, help="Package files that look like credentials.")
@click.option("--max-parallel", type=click.IntRange(min=1), help="Tuning: run at most N trials at a time "
              "(default: tuning.parallel_trials; never more than this machine's CPU cores fit).")
@click.option("--seed", type=int, default=0, show_default=True, help="Tuning: seed of random search and of the "
              "TPE approximation of `default`; the same seed gives the same trials.")
@click.option("--stream-logs", is_flag=True, help="Tuning: also print every replica's lines, prefixed "
              "[trial-N chief-0] (they are always in each trial's log files).")
@restart_policy_option
@fault_option
@click.option("--preempt-grace", callback=duration_callback, default="30s", show_default=True, metavar="DURATION",
              help="A preempt fault's SIGTERM → SIGKILL time, unless the fault gives its own (preempt:10s).")
@set_option
@output_option("text", "json")
def local(job_file: str, output_dir: str | None, max_replicas: int | None, timeout: float | None,
          startup_timeout: float, keep: bool, allow_credentials: bool, max_parallel: int | None, seed: int,
          stream_logs: bool, restart_policy: str, faults: tuple[Any, ...], preempt_grace: float | None,
          overrides: tuple[str, ...], output: str) -> None:
    """Run JOB.yaml on this machine: the CustomJob `submit` would send, one process per replica.

    Each replica gets the environment Vertex AI gives it (CLUSTER_SPEC, TF_CONFIG on
    127.0.0.1 ports, AIP_* dirs, CLOUD_ML_JOB_ID) and runs the packaged trainer from an
    isolated environment. Logs stream prefixed [chief-0], [worker-1]. A failed replica is
    restarted in place as Vertex AI restarts it (--restart-policy never: the job fails fast);
    the job succeeds when the chief does. --fault injects kills, preemptions and freezes.
    Exit code: 0 SUCCEEDED, 10 FAILED, 11 CANCELLED (Ctrl-C or SIGTERM, also while the
    environment is being prepared), 2 a bad job file or option.

    With a `tuning:` block, the study runs here: each trial a local job with its values as
    --NAME=VALUE flags, several at a time, a live table of trials and the best one at the end;
    trial N writes under OUTPUT/N/.
    """
    from vtrain.errors import JobFailed
    from vtrain.handle import CANCELLED, SUCCEEDED, exit_code
    from vtrain.jobfile.load import load_config
    from vtrain.local.options import RunOptions
    from vtrain.local.runner import run_local

    config = load_config(job_file, overrides, target="local")
    for warning in config.warnings:
        click.echo(str(warning), err=True)
    from vtrain.request.build import TUNING_JOB, kind_of

    if kind_of(config) == TUNING_JOB:
        from vtrain.commands.tuning import run_study
        from vtrain.errors import UsageError

        if faults:
            raise UsageError("--fault applies to a single job: a job file with `tuning:` runs a study of many "
                             "trials (remove --fault, or the tuning block with --set tuning=null)")
        run_study(config, output_dir=output_dir, max_parallel=max_parallel, seed=seed, max_replicas=max_replicas,
                  timeout=timeout, startup_timeout=startup_timeout or 120.0, allow_credentials=allow_credentials,
                  output=output, stream_logs=stream_logs, restart_policy=restart_policy)
        return
    logs = sys.stderr if output == "json" else sys.stdout
    job = None
    try:
        options = RunOptions(output_dir=output_dir, max_replicas=max_replicas, timeout=timeout,
                             startup_timeout=startup_timeout or 120.0, keep=keep, allow_credentials=allow_credentials,
                             restart_policy=restart_policy, faults=faults,
                             preempt_grace=30.0 if preempt_grace is None else preempt_grace)
        job = run_local(config, options=options, out=logs, notices=sys.stderr)
        state = job.wait()
    except KeyboardInterrupt as err:
        if job is None:  # packaging or installing: nothing ran yet, and nothing half-built is kept
            raise JobFailed(f"job {config.name} ended {CANCELLED} before its replicas started", state=CANCELLED,
                            exit_code=exit_code(CANCELLED)) from None
        from vtrain.proctree import interruption

        said = interruption(err)[0]
        click.echo(f"[vtrain] interrupted ({said}): stopping every replica ({said} again to kill at once)", err=True)
        job.cancel()
        try:
            state = job.wait()
        except KeyboardInterrupt:
            job.cancel(force=True)
            state = job.wait()
    result = job.result
    if output == "json":
        click.echo(json.dumps(result, indent=2))
    if state == SUCCEEDED:
        where = result["output_dir"]
        kept = "" if not (job._temporary and not keep) else " (temporary: removed; --keep or --output-dir keeps it)"
        click.echo(f"[vtrain] {job.display_name} ({job.name}) {state} in {result['seconds']:.1f} s; "
                   f"outputs in {where}{kept}", err=True)
        return
    detail = f": {job.error}" if job.error and job.error != "cancelled" else ""
    raise JobFailed(f"job {job.display_name} ({job.name}) ended {state} after {result['seconds']:.1f} s{detail}\n"
                    f"logs: {job.run_dir}", state=state, exit_code=job.exit_code)
