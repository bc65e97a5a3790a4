"""`launcher_op`: a pipeline step that runs `vtrain submit --wait` on a job file, and what it runs (:func:`launch`).

The component is a Lightweight Python Component (so KFP's local mode, ``kfp.local.SubprocessRunner``, runs it:
that runner refuses container components). Its body only calls :func:`launch`, which runs
``python -m vtrain submit JOB --wait --stream-logs --plain -o json`` with the pipeline's args as ``--set``
overrides (:func:`vtrain.pipelines.step.args_overrides`): preflight, ``--recover`` and the job file's
fallbacks, TensorBoard and Experiment creation, model registration and the progress lines are vtrain's own,
and they are the step's log. The job file is checked at compile time (:func:`launcher_op`) and again when the
step runs (with the parameters' values); a mistake fails the step with vtrain's own lines and exit code.

Outputs: ``model_dir``, a ``system.Artifact`` whose URI is the job's model directory (AIP_MODEL_DIR:
``base_output_dir/model/``), and, for a job file with a ``model:`` block, ``model``, a ``google.VertexModel``
naming the registered Model version, as Google's ModelDeployOp or a batch-prediction step takes it.
"""

# No `from __future__ import annotations`: KFP reads the component functions' annotations as real types.
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google_cloud_pipeline_components.types.artifact_types import VertexModel
from kfp import dsl

from vtrain.pipelines.step import load_step

#: The image the component runs in when no `image` is given: fit only for kfp.local, whose runner ignores it. On
#: Vertex AI Pipelines give the image :func:`vtrain.pipelines.launcher_image` (`vtrain package JOB --launcher
#: REPOSITORY`) built and pushed: vtrain[pipelines] and the job's folder at its path (docs/guides/pipelines.md).
DEFAULT_IMAGE = "python:3.11"
#: The most of `submit -o json`'s answer (the job, as REST JSON) that is read.
_ANSWER_LIMIT = 16 << 20
_MODEL_LINE = re.compile(r"^model: (projects/[^/\s]+/locations/([^/\s]+)/models/[^@\s]+@[^\s]+) \(")


def vtrain_launcher(job_file: str, args: list, recover: int, model_dir: dsl.Output[dsl.Artifact]):  # type: ignore[no-untyped-def,type-arg]
    """Run `vtrain submit --wait` on the job file (vtrain.pipelines.launcher.launch)."""
    from vtrain.pipelines.launcher import launch

    launch(job_file, args, recover, model_dir, None)


def vtrain_launcher_with_model(job_file: str, args: list, recover: int,  # type: ignore[no-untyped-def,type-arg]
                               model_dir: dsl.Output[dsl.Artifact], model: dsl.Output[VertexModel]):
    """Run `vtrain submit --wait` on the job file and name the model it registers (vtrain.pipelines.launcher)."""
    from vtrain.pipelines.launcher import launch

    launch(job_file, args, recover, model_dir, model)


def launcher_op(job_file: str | os.PathLike[str], args: Sequence[Any] | None = None, *, recover: int = 0,
                image: str | None = None, repository: str | None = None, base: str | None = None,
                python_version: str | None = None, platform: str | None = None,
                allow_credentials: bool = False) -> Any:
    """Inside a ``@dsl.pipeline``: a task that runs `vtrain submit --wait` on `job_file` with `args` (strings
    and pipeline parameters) appended to every trainer pool's args. Checked now, at compile time (vtrain's
    ``ConfigError``/``UsageError``). `recover`: submit's ``--recover N``. `image`: where the step runs on
    Vertex AI Pipelines, an image with vtrain[pipelines] and the job file at the same path: what
    :func:`vtrain.pipelines.launcher_image` (or `vtrain package JOB --launcher REPOSITORY`) pushed, its
    ``Pushed.image`` (``REPOSITORY:TAG@DIGEST``). Or `repository` (and `base`, `python_version`, `platform`, as
    the launcher image's): the image is planned now, offline, as `vtrain package JOB --launcher REPOSITORY
    [--launcher-base BASE]` will push it (:func:`vtrain.pipelines.planned_launcher_image`; run that before the
    pipeline). The compiled pipeline holds `args`, and the image the job file: a job with secret-looking env or
    args (what `vtrain render` shows as ``<redacted>``) is refused unless `allow_credentials`."""
    from vtrain.errors import UsageError
    from vtrain.pipelines.step import refuse_step_secrets
    from vtrain.pipelines.training import is_parameter

    if isinstance(recover, bool) or not isinstance(recover, int) or recover < 0:
        raise UsageError(f"recover must be a whole number of resubmissions (0 or more), got {recover!r}")
    step = load_step(job_file, args, is_parameter=is_parameter)
    if not allow_credentials:
        refuse_step_secrets(step, "launcher_op", "the compiled pipeline and the launcher image")
    if repository is not None:
        from vtrain.pipelines.image import planned_launcher_image
        from vtrain.trainer.image.launcher import DEFAULT_BASE

        if image is not None:
            raise UsageError("give launcher_op either image (one you pushed) or repository (where `vtrain package "
                             "JOB --launcher REPOSITORY` pushes it), not both")
        image = planned_launcher_image(job_file, repository, base or DEFAULT_BASE, python_version=python_version,
                                       platform=platform, allow_credentials=allow_credentials)
    elif base is not None or python_version is not None or platform is not None:
        raise UsageError("launcher_op's base, python_version and platform are the launcher image's, planned in "
                         "repository: give repository too")
    component = _component(with_model=step.config.model is not None, image=image or DEFAULT_IMAGE)
    return component(job_file=str(Path(job_file).absolute()), args=list(step.args), recover=recover)


def _component(*, with_model: bool, image: str) -> Any:
    """The component for a job file with or without a `model:` block; KFP copies the function's source into
    the step (with the imports of `dsl` and VertexModel), whose body imports vtrain from the image."""
    func = vtrain_launcher_with_model if with_model else vtrain_launcher
    return dsl.component(func, base_image=image, install_kfp_package=False)


def launch(job_file: str, args: Sequence[str], recover: int, model_dir: Any, model: Any) -> None:
    """The step: `vtrain submit --wait` as a child process (its stderr is the step's log), then the outputs.
    Exits as vtrain does (2 for a job file mistake, 10 FAILED, ...) with its last error line."""
    from vtrain.errors import UsageError, VtrainError
    from vtrain.foreign import printable
    from vtrain.jobfile.load import load_config
    from vtrain.pipelines.step import arg_problem, args_overrides

    try:
        if not all(isinstance(a, str) for a in args):
            raise UsageError("args must be strings")
        for i, arg in enumerate(args):
            problem = arg_problem(arg)
            if problem is not None:
                raise UsageError(f"args[{i}] {problem}")
        sets = args_overrides(load_config(job_file), list(args))
    except VtrainError as err:  # the file changed since compiling, or a parameter's value is refused
        err.show()
        _fail(err.exit_code, str(err).splitlines()[0] if str(err) else type(err).__name__)
    argv = [sys.executable, "-m", "vtrain", "submit", job_file, "--wait", "--stream-logs", "--plain", "-o", "json"]
    if recover:
        argv += ["--recover", str(recover)]
    for item in sets:
        argv += ["--set", item]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    registered: tuple[str, str] | None = None
    errors: list[str] = []
    with tempfile.TemporaryFile() as answer:
        with subprocess.Popen(argv, stdout=answer, stderr=subprocess.PIPE, env=env, text=True, errors="replace") as p:
            assert p.stderr is not None
            for line in p.stderr:
                sys.stderr.write(line)
                sys.stderr.flush()
                found = _MODEL_LINE.match(line)
                if found:
                    registered = (found[1], found[2])
                elif line.startswith("error: ") or _is_problem(line, job_file):
                    errors.append(line.rstrip("\n"))
        code = p.returncode
        answer.seek(0)
        text = answer.read(_ANSWER_LIMIT).decode("utf-8", "replace")
    if code != 0:
        _fail(code, errors[0] if errors else f"vtrain submit exited {code}")
    job = _job(text)
    model_dir.uri = job_model_dir(job)
    model_dir.metadata["job"] = str(job.get("name", ""))
    said = f"vtrain launcher: {printable(str(job.get('name', '')))} SUCCEEDED; model directory {model_dir.uri or '-'}"
    if model is not None and registered is not None:
        name, region = registered
        model.uri = f"https://{region}-aiplatform.googleapis.com/v1/{name}"
        model.metadata["resourceName"] = name
        said += f"; model {name}"
    print(said, file=sys.stderr, flush=True)


def _fail(code: int, said: str) -> None:
    """End the step as vtrain ended: its exit code, its first error line last in the step's log."""
    print(f"vtrain launcher: the step failed: {said}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def _is_problem(line: str, job_file: str) -> bool:
    """A ConfigError's line: the job file's FILE:LINE[:COL]: ..., or a `--set` override's."""
    return line.startswith((f"{job_file}:", "--set "))


def _job(text: str) -> dict[str, Any]:
    """The job `submit -o json` printed last (a JSON object); {} when none can be read."""
    try:
        job = json.loads(text)
    except ValueError:
        return {}
    return job if isinstance(job, dict) else {}


def job_model_dir(job: dict[str, Any]) -> str:
    """The job's AIP_MODEL_DIR: base_output_dir/model/ ('' when the job has no base output directory)."""
    from vtrain.request.model_upload import model_dir

    spec = job.get("jobSpec")
    base = spec.get("baseOutputDirectory") if isinstance(spec, dict) else None
    prefix = base.get("outputUriPrefix") if isinstance(base, dict) else None
    return model_dir(prefix) if isinstance(prefix, str) and prefix else ""


__all__ = ["DEFAULT_IMAGE", "job_model_dir", "launch", "launcher_op"]
