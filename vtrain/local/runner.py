"""`vtrain local`: the CustomJob `submit` would send, run as one process per replica on 127.0.0.1.

    job = vtrain.run_local(vtrain.load_config("job.yaml", target="local"))
    job.wait(); job.state, job.exit_code

Preparation happens in :func:`run_local` (a packaging mistake raises before anything
starts). :func:`run_job` then starts the CustomJob body; the emulator's ``--run-jobs`` runner
(:mod:`vtrain.emulator.local_jobs`) calls it directly with the body it received. A supervisor
thread owns the processes and decides the job's state, with Vertex's semantics:
  * a chief/worker/ps exiting non-zero is restarted in place (same port and TF_CONFIG) up to 5
    times, then the whole job is retried up to 3 times, and a permanent error fails the job at
    once (``restart_policy="vertex"``, :mod:`vtrain.local.policy`); with
    ``restart_policy="never"`` the first failure fails the job. A failed job's replicas are
    stopped (whole process groups, SIGTERM then SIGKILL) and the summary names the replica,
    its exit code and its last log lines;
  * `faults` (``worker-1:kill@30s``, :mod:`vtrain.local.faults`) are injected as signals;
  * success follows the chief: when it exits 0, ps and evaluator replicas are stopped, and
    workers get a grace period (the coordination service may keep them ~20 s) before they are;
  * a cluster member that never starts its server, or stays frozen (SIGSTOP), while its peers
    wait for it at start-up (TF's initial health check has no timeout) fails the job after
    `startup_timeout`; dead or frozen peers after start-up are caught by the runtime's collective
    timeout and TF's heartbeats;
  * `timeout` fails the job, `cancel()` (or Ctrl-C in the CLI) cancels it; in every case
    no child process group outlives the job and every port is released.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from vtrain.constants import LOCAL_DEVICES_ENV
from vtrain.errors import BackendError, PackagingError
from vtrain.local import env as localenv
from vtrain.local import rundir
from vtrain.local.env import Plan, Replica
from vtrain.local.faults import FaultScheduler, check_replicas
from vtrain.local.job import LocalJob
from vtrain.local.options import RunKeywords, RunOptions, run_options
from vtrain.local.policy import policy_for_job
from vtrain.local.ports import free_ports
from vtrain.local.restarts import RESTART_ENV, Proc
from vtrain.local.runtimes import local_gpus
from vtrain.local.unrehearsable import unrehearsable

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

    from vtrain.jobfile.artifacts import Artifacts
    from vtrain.jobfile.config import JobConfig
    from vtrain.local.containers import ContainerHandle, ContainerImage
    from vtrain.local.envcache import TrainerEnv
    from vtrain.local.image import LocalImage
    from vtrain.local.prebuilt import PackageImage


class TextSink(Protocol):
    """Where run_local writes its notices: a text file, or anything with `write` and `flush`."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> None: ...


def _docker_ready(uris: list[str]) -> str:
    """The docker (or podman) binary that runs the pools of images `uris` here; BackendError naming them, else."""
    from vtrain.foreign import printable
    from vtrain.local.containers import docker_engine

    engine, why = docker_engine()
    if engine is None:
        raise BackendError(f"this job runs image {', '.join(printable(u, limit=200) for u in uris)} in a container, "
                           f"but docker cannot run it: {why}")
    return engine


def _host_tensorflow() -> str | None:
    from importlib import metadata

    for name in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _job_timeout(job: Mapping[str, Any]) -> float | None:
    raw = (job["jobSpec"].get("scheduling") or {}).get("timeout")
    return float(str(raw).rstrip("s")) if raw else None




def build_procs(plan: Plan, *, python: str | None, venv: str | None, output_dir: Path, run_dir: Path,
                job_id: str, host_env: Mapping[str, str], gpus: Mapping[Replica, str],
                images: Mapping[str, LocalImage | ContainerImage | PackageImage] | None = None,
                engine: str = "docker") -> list[Proc]:
    """argv, environment, working dir and log (in this run's folder) of every replica; ports chosen here.
    A container pool whose image is in `images` runs in an OCI runtime's container (a ContainerImage) or
    from its unpacked vtrain layers on this machine's Python (a LocalImage); any other under `engine`."""
    from vtrain.local.containers import ContainerImage, DockerContainer, container_name
    from vtrain.local.prebuilt import PackageImage

    ports = dict(zip(plan.replicas, free_ports(len(plan.replicas)), strict=True))
    devices = localenv.dtensor_devices(plan)
    procs = []
    for r in plan.replicas:
        pool = plan.pool_spec(r)
        vertex = localenv.vertex_env(plan, r, ports, str(output_dir), job_id)
        job_env = localenv.pool_env(pool)
        if devices is not None and r.pool in (0, 1):  # the job's own VTRAIN_LOCAL_DEVICES wins
            job_env.setdefault(LOCAL_DEVICES_ENV, str(devices))
        container: ContainerHandle | None = None
        uri = (pool.get("containerSpec") or {}).get("imageUri") or (pool.get("pythonPackageSpec") or {}).get(
            "executorImageUri", "")  # a Python package pool's image only under --runtime image
        image = (images or {}).get(str(uri))
        if image is not None or "containerSpec" not in pool:
            # Each replica's own TMPDIR in the run folder (TensorFlow's autograph files, a killed replica's
            # leftovers stay there, not in the user's /tmp); the job's env may still set its own.
            tmp = run_dir / "tmp" / r.label
            tmp.mkdir(parents=True, exist_ok=True)
            scratch = {name: str(tmp) for name in ("TMPDIR", "TMP", "TEMP")}
        workdir = run_dir / "work" / r.label
        if isinstance(image, (ContainerImage, PackageImage)):  # the image's Env, the pool's env, Vertex's
            made, env = image.replica(pool, name=container_name(job_id, r.label), workdir=workdir, tmp=tmp,
                                      bundle=run_dir / "containers" / r.label, output_dir=output_dir,
                                      job_env=job_env, vertex=vertex)
            argv, container = made.argv(), made
        elif image is not None:  # the image's PYTHONPATH first, the pool's env over it, as in the container
            argv = image.argv(pool, sys.executable)
            image.working_copy(workdir)
            env = localenv.compose_env({**host_env, **scratch}, vertex=vertex,
                                       job={**image.env(workdir), **job_env}, gpus=gpus.get(r, ""))
        elif "containerSpec" in pool:
            container = DockerContainer(engine, f"vtrain-{job_id}-{r.label}")
            names = [*job_env, *vertex, "PYTHONUNBUFFERED", *RESTART_ENV]
            argv = localenv.docker_argv(pool, container.name, names, [str(output_dir)], gpus.get(r, ""), engine)
            env = localenv.compose_env(host_env, vertex=vertex, job=job_env, gpus=gpus.get(r, ""))
        else:
            assert python is not None
            argv = localenv.python_argv(python, pool)
            env = localenv.compose_env({**host_env, **scratch}, vertex=vertex, job=job_env, venv=venv,
                                       gpus=gpus.get(r, ""))
        procs.append(Proc(r, argv, env, workdir, run_dir / f"{r.label}.log", container))
    return procs


def _cache(cache_dir: str | os.PathLike[str] | None) -> Path:
    from vtrain.local import envcache as localpkg

    cache = Path(cache_dir) if cache_dir is not None else localpkg.default_cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BackendError(f"cannot create the environment cache {cache}: {err.strerror or err}; set "
                           "VTRAIN_CACHE_DIR to a writable directory") from None
    return cache


def prepare_images(config: JobConfig, cache_dir: str | os.PathLike[str] | None, allow_credentials: bool,
                   notice: Callable[[str], None], containers: str = "auto",
                   artifacts: Artifacts | None = None) -> dict[str, LocalImage | ContainerImage]:
    """An image job's images, ready to run here; empty for a Python package trainer (and for a
    `trainer.container` job that docker runs). Nothing is pushed. `artifacts`: what the request names (from
    :func:`~vtrain.jobfile.artifacts.plan_artifacts`); an image is built from the files its name was hashed from.

    `containers`: "auto" runs each replica in a container (:func:`vtrain.local.image.container_images`)
    where this machine can, else says why in one notice and runs a `trainer.build` job's layers on this
    machine's Python (:func:`vtrain.local.image.build_local`); "always" makes that a BackendError;
    "never" goes straight to host mode (a `trainer.container` job then needs docker)."""
    if config.trainer.build is None and config.trainer.container is None:
        return {}
    cache = _cache(cache_dir)
    if containers != "never":
        from vtrain.local.image import container_images

        found, why = container_images(config, cache, allow_credentials=allow_credentials, notice=notice,
                                      artifacts=artifacts)
        if found is not None:
            return dict(found)
        if containers == "always" or config.trainer.build is None:
            raise BackendError(f"cannot run this job's image in a container here: {why}")
        notice(f"no container here ({why}): the image's layers run on this machine's Python instead")
    if config.trainer.build is None:
        return {}
    from vtrain.local.image import build_local

    return dict(build_local(config, cache, allow_credentials=allow_credentials, notice=notice, artifacts=artifacts))


def prepare_trainer(
    config: JobConfig,
    cache_dir: str | os.PathLike[str] | None,
    allow_credentials: bool,
    notice: Callable[[str], None],
    runtime: str = "auto",
) -> tuple[TrainerEnv | None, list[str] | None, dict[str, PackageImage]]:
    """The packaged trainer installed into its cached environment (None for a container trainer, or under
    --runtime image, whose prebuilt image comes third), and
    the packageUris to put in the request: None (the staged or prebuilt ones `submit` would send), or,
    for a local package with no staging location, the cache's file:// URIs. Shared by a single run
    and a tuning study, so both run exactly what `submit` would send. `runtime` as
    :func:`vtrain.local.runtimes.choose` takes it."""
    cache = _cache(cache_dir)
    if config.trainer.container is not None or config.trainer.build is not None:
        return None, None, {}
    from vtrain.jobfile.artifacts import Artifacts
    from vtrain.local.runtimes import choose_runtime, python_runtime
    from vtrain.request.custom_job import build_job_dict

    choice = choose_runtime(build_job_dict(config, Artifacts.stand_ins()), runtime)  # before anything is built
    sdists, package_uris = _packages(config, cache, allow_credentials)
    trainer_env, images = python_runtime(sdists, cache, choice, notice)
    local_only = config.trainer.package is not None and config.staging_bucket is None
    return trainer_env, package_uris if local_only else None, images


def run_local(
    config: JobConfig | str | os.PathLike[str] | Mapping[str, Any],
    *,
    options: RunOptions | None = None,
    out: IO[str] | None = None,
    notices: TextSink | None = None,
    on_line: Callable[[Replica, str, str], None] | None = None,
    **keywords: Unpack[RunKeywords],
) -> LocalJob:
    """Start a job on this machine and return its handle (RUNNING); `wait()` for the end.

    `config` is a JobConfig, or what :func:`~vtrain.load_config` takes (a job file's path, its YAML text,
    a mapping), loaded for the local target; `options` how the
    run behaves (:class:`~vtrain.local.options.RunOptions`; the keywords of earlier versions,
    ``timeout=600, keep=False, ...``, are its fields and still accepted). Replica logs go to
    `out` prefixed `[chief-0]` (None: only to files), launcher notices to `notices`; `on_line` as in
    :func:`run_job`.
    Outputs go to `output_dir`, else the job's base_output_dir when it is local, else a new
    temporary directory, which is removed when the job succeeds unless `keep`; this run's logs
    and result go to its own folder, ``OUTPUT/vtrain-local/JOB_ID`` (see
    :mod:`vtrain.local.rundir`), and another live run on the same output dir is refused.
    Raises PackagingError/BackendError before anything starts if the job cannot run here.
    `restart_policy`, `faults` and `preempt_grace` as in :func:`run_job`.

    On Linux the calling process becomes a child subreaper (:mod:`vtrain.proctree`), so that a
    replica's daemonized descendants are adopted and ended with the job; this stays set.
    """
    from vtrain.errors import UsageError
    from vtrain.jobfile.artifacts import Artifacts, plan_artifacts
    from vtrain.jobfile.config import JobConfig
    from vtrain.jobfile.load import load_config
    from vtrain.request.build import TUNING_JOB, build_request, kind_of
    from vtrain.request.custom_job import build_job_dict

    if not isinstance(config, JobConfig):
        config = load_config(config, target="local")
    if kind_of(config) == TUNING_JOB:  # its trials are jobs; the file itself is a study
        raise UsageError("this job file has a tuning: block: vtrain.run_local_tuning runs its study "
                         "(or drop the block: --set tuning=null)")

    def notice(text: str) -> None:
        if notices is not None:
            notices.write(f"[vtrain] {text}\n")
            notices.flush()

    opts = run_options(options, keywords, "run_local")
    if opts.faults:  # a fault for a replica this run lacks is a usage error before anything is built
        with contextlib.suppress(ValueError):  # a job the plan refuses is reported by run_job
            shape = build_job_dict(config, Artifacts.stand_ins())  # replica labels only: no file read
            labels = [r.label for r in localenv.plan(shape, opts.max_replicas).replicas]
            check_replicas(opts.faults, labels)
    trainer_env, package_uris, prebuilt = prepare_trainer(config, opts.cache_dir, opts.allow_credentials, notice,
                                                          opts.runtime)
    # One read of the trainer folder names the images and is what they are built from (issue 46, class 10).
    planned = plan_artifacts(config) if package_uris is None else package_uris
    images = {**prepare_images(config, opts.cache_dir, opts.allow_credentials, notice, opts.containers,
                               planned if isinstance(planned, Artifacts) else None), **prebuilt}
    job = build_request(config, planned).body
    if config.model is not None and opts.check_output is None:  # what Vertex's prediction container needs
        opts = opts.replace(check_output=saved_model_check(trainer_env))
    return run_job(job, trainer_env=trainer_env, options=opts, name=config.name, out=out, notice=notice,
                   on_line=on_line, images=images)


def saved_model_check(trainer_env: TrainerEnv | None) -> Callable[[Path], str | None]:
    """`model:`'s check of the export, with the trainer's Python (this one for a trainer with no venv)."""
    from vtrain.local.savedmodel import check_saved_model

    python = trainer_env.python if trainer_env is not None else sys.executable
    return lambda output_dir: check_saved_model(output_dir / "model", python)


def local_output_dir(job: Mapping[str, Any]) -> Path | None:
    """The job's baseOutputDirectory when it is on this machine (a path or file://), else None."""
    from vtrain.trainer.staging import uri_to_path

    prefix = str((job["jobSpec"].get("baseOutputDirectory") or {}).get("outputUriPrefix", ""))
    if not prefix or ("://" in prefix and not prefix.startswith("file://")):
        return None
    return uri_to_path(prefix) or Path(prefix)


def run_job(
    job: Mapping[str, Any],
    *,
    trainer_env: TrainerEnv | None,
    options: RunOptions | None = None,
    name: str | None = None,
    job_id: str | None = None,
    out: IO[str] | None = None,
    notice: Callable[[str], None] = lambda text: None,
    on_line: Callable[[Replica, str, str], None] | None = None,
    images: Mapping[str, LocalImage | ContainerImage | PackageImage] | None = None,
    **keywords: Unpack[RunKeywords],
) -> LocalJob:
    """Start a CustomJob REST body here (what `submit` sends, or what the emulator stored).

    Python package pools run in `trainer_env` (their packages already installed: see
    :func:`vtrain.local.envcache.prepare_env`), container pools under docker. `name` is the
    display name (default: the body's), `job_id` becomes CLOUD_ML_JOB_ID (default: a new
    ``local-…`` ID); `on_line(replica, text, stream)` gets every line a replica prints (stream: "stdout" or
    "stderr"). `options` (or
    the same as keywords) as in :func:`run_local` (`cache_dir` and `allow_credentials` do not
    apply: the environment is prepared); `notice` gets the launcher's notices.

    `restart_policy`: "vertex" (restart failed replicas as Vertex AI does) or "never" (the first
    failure fails the job). `faults`: signals to inject (FaultSpecError, before anything starts,
    when one names a replica this run does not have); `preempt_grace`: SIGTERM → SIGKILL for a
    `preempt` fault without its own grace.
    """
    opts = run_options(options, keywords, "run_job")
    faults, output_dir = opts.faults, opts.output_dir
    name = name or str(job.get("displayName") or "job")
    try:
        the_plan = localenv.plan(job, opts.max_replicas)
    except ValueError as err:
        raise BackendError(str(err)) from None
    labels = [r.label for r in the_plan.replicas]
    check_replicas(faults, labels)
    policy = policy_for_job(the_plan.job, labels, opts.restart_policy)
    scheduler = FaultScheduler(faults, opts.preempt_grace)
    specs = [the_plan.pool_spec(r) for r in the_plan.replicas]
    built = images or {}
    engine = "docker"
    for_docker = sorted({str(s["containerSpec"].get("imageUri")) for s in specs
                         if "containerSpec" in s and s["containerSpec"].get("imageUri") not in built})
    if for_docker:
        engine = _docker_ready(for_docker)
    if trainer_env is None and any("pythonPackageSpec" in s and s["pythonPackageSpec"].get("executorImageUri")
                                   not in built for s in specs):
        raise BackendError("this job runs Python packages, but no environment with them was prepared")
    for text in the_plan.notices:
        notice(text)
    for text in unrehearsable(the_plan.job):  # a reservation, a TPU topology, ...: said, never silently dropped
        notice(text)
    if trainer_env is not None:
        tf_notice = localenv.image_tf_notice(the_plan, trainer_env.tensorflow or _host_tensorflow())
        if tf_notice:
            notice(tf_notice)
    host_env = dict(os.environ)
    requests = {r: localenv.gpus_requested(the_plan.pool_spec(r)) for r in the_plan.replicas}
    gpus, gpu_notices = localenv.assign_gpus(local_gpus(host_env), requests)
    for text in gpu_notices:
        notice(text)
    from vtrain.local.containers import ContainerImage
    from vtrain.local.prebuilt import PackageImage

    boxed = {uri for uri, image in built.items() if isinstance(image, (ContainerImage, PackageImage))}  # runc/crun
    if any(gpus.get(r) for r in the_plan.replicas
           if str((the_plan.pool_spec(r).get("containerSpec") or {}).get("imageUri", "")
                  or (the_plan.pool_spec(r).get("pythonPackageSpec") or {}).get("executorImageUri", "")) in boxed):
        notice("GPUs are not passed into runc/crun containers (NVIDIA's container hooks are not set up): those "
               "replicas run on CPU")
    if any(p.get("machineSpec", {}).get("acceleratorType", "").startswith("TPU") for p in the_plan.pools if p):
        notice("this machine has no TPU: the replica runs on CPU (strategy `tpu` will fail)")

    job_id = job_id or f"local-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}"
    temporary = False
    if output_dir is None:
        output_dir = local_output_dir(job)
    if output_dir is None:
        # The display name is free text ("a/b", spaces): only a slug of it may name a directory.
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:40].strip("-.") or "job"
        output_dir, temporary = tempfile.mkdtemp(prefix=f"vtrain-local-{slug}-"), True
    out_path = Path(output_dir).expanduser().absolute()
    claim = rundir.claim(out_path, job_id)  # refused while another live run writes this output dir
    leases = [trainer_env.lease] if trainer_env is not None and trainer_env.lease is not None else []
    leases += list({id(lease): lease for image in built.values()
                    if (lease := getattr(image, "lease", None)) is not None}.values())

    def release() -> None:
        claim.release()
        for lease in leases:  # the environment's and the image folders' (vtrain cache clear keeps them meanwhile)
            lease.release()

    try:
        run_dir = rundir.new_run_dir(out_path, job_id)
        try:
            (run_dir / "job.json").write_text(json.dumps(the_plan.job, indent=2) + "\n", encoding="utf-8")
        except OSError as err:
            raise BackendError(f"cannot write the output directory {out_path}: {err.strerror or err}") from None
        procs = build_procs(the_plan, python=trainer_env.python if trainer_env else None,
                            venv=str(trainer_env.venv) if trainer_env else None, output_dir=out_path,
                            run_dir=run_dir, job_id=job_id, host_env=host_env, gpus=gpus, images=built,
                            engine=engine)
        job_opts = opts.replace(output_dir=out_path, timeout=opts.timeout if opts.timeout is not None
                                else _job_timeout(job))  # fmt: skip
        handle = LocalJob(job_id, name, the_plan, procs, out_path, run_dir, temporary, job_opts, out, notice,
                          on_line=on_line, release=release, policy=policy, scheduler=scheduler)
    except BaseException:
        release()
        raise
    notice(f"job {name} ({job_id}): {', '.join(p.label for p in procs)}; outputs in {out_path}, "
           f"logs in {run_dir}")
    handle._start()
    return handle


def _packages(config: Any, cache: Path, allow_credentials: bool) -> tuple[list[Path], list[str]]:
    """The sdists `submit` would stage (built into the cache) and their file:// URIs."""
    from vtrain.local import envcache as localpkg
    from vtrain.trainer import packaging
    from vtrain.trainer.staging import uri_to_path
    from vtrain.userpaths import cache_folder

    if config.trainer.package is None:
        from vtrain.local.downloads import fetch_packages

        paths = fetch_packages(config.trainer.package_uris, cache)
        return paths, [p.as_uri() for p in paths]
    localpkg.cache_dir_ready(cache, "sdists")
    staging = cache_folder("sdists", cache)
    staged = packaging.build_and_stage(config.trainer.package, str(staging), config.trainer.module,
                                       allow_credentials=allow_credentials, progress=False,
                                       skip=config.job_files(), builds=staging)
    found = [uri_to_path(s.uri) for s in staged]
    if any(p is None for p in found):  # pragma: no cover - a local target gives file:// URIs
        raise PackagingError("staging into the local cache did not give local files")
    return [p for p in found if p is not None], [s.uri for s in staged]


__all__ = ["LocalJob", "RunOptions", "build_procs", "local_gpus", "local_output_dir", "run_job", "run_local"]
