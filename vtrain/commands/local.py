"""`vtrain local`: run the job on this machine as Vertex AI would start it, one process per replica."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from vtrain.commands._faultopts import fault_option, restart_policy_option
from vtrain.commands._home import MatrixOption
from vtrain.commands._options import (
    UserPath,
    duration_callback,
    max_replicas_option,
    output_option,
    set_option,
    startup_timeout_option,
    where_options,
)


@click.command(cls=MatrixOption)
@click.argument("job_file", metavar="JOB", type=UserPath(dir_okay=False))
@click.option("--output-dir", type=UserPath(file_okay=False, utf8=True),
              help="Base output dir (AIP_MODEL_DIR = DIR/model/, ...; this run's logs in "
              "DIR/vtrain-local/JOB_ID/). Default: the job's base_output_dir when it is local, else a "
              "temporary dir removed on success unless --keep.")
@max_replicas_option
@click.option("--timeout", callback=duration_callback, metavar="DURATION",
              help="Fail the job after this long (e.g. 10m). Default: the job's scheduling.timeout.")
@startup_timeout_option
@click.option("--keep", is_flag=True, help="Keep the temporary output dir and the replicas' working dirs.")
@click.option("--allow-credentials", is_flag=True, help="Package files that look like credentials.")
@click.option("--max-parallel", type=click.IntRange(min=1), help="Tuning: run at most N trials at a time "
              "(default: tuning.parallel_trials; never more than this machine's CPU cores fit).")
@click.option("--seed", type=int, default=0, show_default=True, help="Tuning: seed of random search and of the "
              "TPE approximation of `default`; the same seed gives the same trials.")
@click.option("--plain", is_flag=True, help="Plain lines instead of the live view on a terminal (as when not a "
              "terminal or in CI): the replicas' Python lines prefixed [chief-0] and a progress line now and then.")
@click.option("--follow", "follow", multiple=True, metavar="REPLICA", help="Stream every line of this replica "
              "(e.g. chief-0; repeatable), TensorFlow's C++ logging too. They are always in the run folder.")
@click.option("--verbose", "-v", is_flag=True, help="Stream every line of every replica, as --follow for all.")
@click.option("--progress-every", callback=duration_callback, default="30s", show_default=True, metavar="DURATION",
              help="Plain output: at most one progress line this often, when something changed.")
@click.option("--stream-logs", is_flag=True, help="Tuning: also print every replica's lines, prefixed "
              "[trial-N chief-0] (they are always in each trial's log files).")
@restart_policy_option
@fault_option
@click.option("--preempt-grace", callback=duration_callback, default="30s", show_default=True, metavar="DURATION",
              help="A preempt fault's SIGTERM → SIGKILL time, unless the fault gives its own (preempt:10s).")
@click.option("--containers", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="An image job (trainer.build, trainer.container): run each replica in a container (runc or crun "
              "on the unpacked image; docker or podman for trainer.container). auto: where this machine can, else "
              "on this machine's Python with one notice; always: fail instead; never: this machine's Python.")
@click.option("--runtime", type=click.Choice(["auto", "stack", "image", "host"]), default="auto", show_default=True,
              help="A Python package job's replicas: stack (the default for a prebuilt image: its TensorFlow and "
              "Python, built once here), image (Vertex's own image, pulled and run with runc/crun), host (this "
              "machine's Python and TensorFlow). auto reads VTRAIN_RUNTIME, else stack for a prebuilt image. "
              "`vtrain doctor JOB.yaml` says which and why.")
@click.option("--fault-matrix", "scenarios", is_flag=False, flag_value="all", default=None, metavar="[SCENARIOS]",
              help="Run the job under the faults users meet, one run each after a fault-free one, and print a table "
              "(scenario, outcome, recovery, steps redone, pass/fail): kill (a worker killed mid-run), preempt (the "
              "chief preempted), late (a worker started late), stop (a replica frozen), retry (a whole-job retry); "
              "all, or a list: --fault-matrix kill,late. Exit 0 only if each ended as Vertex would end it. "
              "-o github adds an annotation per scenario.")
@where_options
@set_option
@output_option("text", "json", "github")
def local(job_file: str, output_dir: str | None, max_replicas: int | None, timeout: float | None,
          startup_timeout: float, keep: bool, allow_credentials: bool, max_parallel: int | None, seed: int,
          plain: bool, follow: tuple[str, ...], verbose: bool, progress_every: float | None,
          stream_logs: bool, restart_policy: str, faults: tuple[Any, ...], preempt_grace: float | None,
          containers: str, runtime: str, scenarios: str | None, where: Any, overrides: tuple[str, ...],
          output: str) -> None:
    """Run JOB on this machine: the CustomJob `submit` would send, one process per replica.

    JOB is a job file (JOB.yaml), or any CustomJob: a request file (what `render -o json`, `gcloud ai custom-jobs
    describe --format=json` or the API give; a gcloud --config file) or a job on Vertex AI by resource name or ID
    (read with --project/--region/--api-endpoint), whose packageUris are fetched from Cloud Storage.

    Each replica gets the environment Vertex AI gives it (CLUSTER_SPEC, TF_CONFIG on
    127.0.0.1 ports, AIP_* dirs, CLOUD_ML_JOB_ID) and runs the packaged trainer from an
    isolated environment. On a terminal a live view shows each replica's state, step, steps/s and
    restarts (the replicas' output is in the run folder; --follow chief-0 or --verbose streams it);
    elsewhere, or with --plain, their Python lines stream prefixed [chief-0], [worker-1] (TensorFlow's
    C++ logging stays in the files). Each run draws its timeline.html (and timeline.png with
    matplotlib) in the run folder; `vtrain timeline` draws it again. A failed replica is
    restarted in place as Vertex AI restarts it (--restart-policy never: the job fails fast);
    the job succeeds when the chief does. --fault injects kills, preemptions and freezes.
    Exit code: 0 SUCCEEDED, 10 FAILED, 11 CANCELLED (Ctrl-C or SIGTERM, also while the
    environment is being prepared), 2 a bad job file or option.

    With a `tuning:` block, the study runs here: each trial a local job with its values as
    --NAME=VALUE flags, several at a time, a live table of trials and the best one at the end;
    trial N writes under OUTPUT/N/.
    """
    from vtrain.commands import _home
    from vtrain.errors import JobFailed, UsageError
    from vtrain.handle import CANCELLED, SUCCEEDED, exit_code
    from vtrain.jobfile.load import load_config
    from vtrain.local.options import RunOptions

    if output == "github" and scenarios is None:
        raise UsageError("-o github annotates a --fault-matrix run; a single run prints text or json")
    incoming = _home.incoming_job(job_file, where, overrides)  # any CustomJob; None for a job file
    config = load_config(job_file, overrides, target="local") if incoming is None else None
    for warning in config.warnings if config is not None else ():
        click.echo(str(warning), err=True)
    from vtrain.request.build import TUNING_JOB, kind_of

    if config is not None and kind_of(config) == TUNING_JOB:
        from vtrain.commands.tuning import run_study
        from vtrain.errors import UsageError

        if faults or scenarios is not None:
            what = "--fault" if faults else "--fault-matrix"
            raise UsageError(f"{what} applies to a single job: a job file with `tuning:` runs a study of many "
                             f"trials (remove {what}, or the tuning block with --set tuning=null)")
        if follow or verbose:
            raise UsageError(f"{'--follow' if follow else '--verbose'} applies to a single job: a study's trials "
                             "print their lines with --stream-logs (they are always in each trial's log files)")
        run_study(config, output_dir=output_dir, max_parallel=max_parallel, seed=seed, max_replicas=max_replicas,
                  timeout=timeout, startup_timeout=startup_timeout or 120.0, allow_credentials=allow_credentials,
                  output=output, stream_logs=stream_logs, restart_policy=restart_policy, runtime=runtime)
        return
    from vtrain.view.live import Watch, live_possible

    name = incoming.name if incoming is not None else config.name  # type: ignore[union-attr]
    options = RunOptions(output_dir=output_dir, max_replicas=max_replicas, timeout=timeout,
                         startup_timeout=startup_timeout or 120.0, keep=keep, allow_credentials=allow_credentials,
                         restart_policy=restart_policy, faults=faults,
                         preempt_grace=30.0 if preempt_grace is None else preempt_grace, containers=containers,
                         runtime=runtime)
    if scenarios is not None:
        _home.fault_matrix(config, incoming, options, scenarios, output, job_file)
        return
    logs = sys.stderr if output == "json" else sys.stdout
    view = Watch(live=not plain and live_possible(sys.stderr), logs=logs, follow=follow, verbose=verbose,
                 progress_every=30.0 if progress_every is None else progress_every)  # fmt: skip
    job = None
    try:
        if follow:
            check_follow(_home.replica_labels(config, incoming, max_replicas), follow)
        job = _home.start(config, incoming, options, view.notices, view.on_line)
        state = view.watch(job, job.wait)
    except KeyboardInterrupt as err:
        if job is None:  # packaging or installing: nothing ran yet, and nothing half-built is kept
            raise JobFailed(f"job {name} ended {CANCELLED} before its replicas started", state=CANCELLED,
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
    result = job.summary
    tell_where(job, view, [q for q in result["replicas"]])
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


def check_follow(labels: list[str] | None, follow: tuple[str, ...]) -> None:
    """--follow names replicas of this job (as --max-replicas shapes it), before anything is built."""
    from vtrain.errors import UsageError

    if labels is None:
        return  # a job the plan refuses is reported by run_local
    for label in follow:
        if label not in labels:
            raise UsageError(f"--follow {label}: this job has no replica {label}; it has {', '.join(labels)}")


def tell_where(job: Any, view: Any, labels: list[str]) -> None:
    """Draw the run's timeline and say where its full logs are (the lines the view did not show)."""
    from vtrain.view.timeline import draw_run

    if not job.run_dir.is_dir():  # a temporary output dir, removed on success
        return
    try:
        drawn = draw_run(job.run_dir, job.summary)
    except Exception as err:  # noqa: BLE001 - a picture that fails must not change the run's outcome
        drawn = []
        from vtrain.foreign import printable

        click.echo(f"[vtrain] could not draw the timeline: {printable(str(err))}", err=True)  # may quote result.json
    hidden = ""
    if view.hidden:
        native = f", {view.native} of them TensorFlow C++ logging" if view.native else ""
        hidden = f"; {view.hidden} line(s) not shown here{native} (--verbose streams them)"
    logs = ", ".join(f"{label}.log" for label in labels)
    pictures = f"; timeline: {', '.join(p.name for p in drawn)}" if drawn else ""
    click.echo(f"[vtrain] full logs in {job.run_dir}: {logs}, job.log{hidden}{pictures}", err=True)
