"""A job file as one step of a pipeline: its extra `args` appended to every pool that runs the trainer, checked
as the job file is, and the request vtrain would send for it.

The extra args are given to :func:`load_step` as ``--set`` overrides of the job file's own `args` keys
(`trainer.args`, and each pool's `args` where the pool has its own), so they pass the job file's own rules
(types, DiLoCo's syncer takes none, ...) and a mistake is the same one line `vtrain validate` prints.
A pipeline parameter is not known until the pipeline runs: at compile time it stands in as a
placeholder string (:data:`PARAMETER`), so what is known is still checked, and the placeholder is swapped
back for the parameter in the built request. The launcher component makes the same overrides at run time
with the values then known (:func:`args_overrides`). Pure: no KFP, no network.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtrain.errors import UsageError
from vtrain.jobfile.config import JobConfig

#: What stands in for the n-th pipeline parameter while the job file's rules check the args.
PARAMETER = "vtrain-pipeline-parameter-{}"
#: Pools whose replicas run no trainer, so take no trainer args.
_NO_TRAINER_ARGS = ("reduction_server",)


@dataclass(frozen=True)
class Step:
    """A job file checked with its extra args: the config, the REST body vtrain renders, and the extra
    args (strings, and pipeline parameters by their placeholder's index)."""

    config: JobConfig
    body: dict[str, Any]
    args: tuple[Any, ...]
    secrets: tuple[str, ...] = ()  # where the body holds secret-looking values (vtrain.request.secrets)


def args_overrides(config: JobConfig, extra: Sequence[str]) -> list[str]:
    """The `--set` overrides that append `extra` to every trainer pool's args: `trainer.args`, and the
    `args` of each pool that has its own (replacing the trainer's for that pool). Each reads back as exactly
    the list it was made of, whatever characters it holds (:func:`vtrain.jobfile.load.override`)."""
    from vtrain.jobfile.load import override

    if not extra:
        return []
    sets = [override("trainer.args", [*config.trainer.args, *extra])]
    for pool in config.pools():
        if pool.args is not None and pool.role not in _NO_TRAINER_ARGS:
            sets.append(override(f"cluster.{pool.role}.args", [*pool.args, *extra]))
    return sets


def arg_problem(arg: str) -> str | None:
    """Why a string cannot be an argument of a process (argv), or None: a NUL ends a C string, and a lone
    surrogate is no text (UTF-8 cannot hold it)."""
    if "\x00" in arg:
        return f"holds a NUL character at character {arg.index(chr(0)) + 1}, which no process argument can"
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError as err:
        return (f"holds a lone surrogate (\\u{ord(arg[err.start]):04x}) at character {err.start + 1}, which is not "
                "text: UTF-8 cannot hold it")
    return None


def _checked_args(args: Sequence[Any] | None, is_parameter: Callable[[Any], bool]) -> list[Any]:
    if args is None:
        return []
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise UsageError(f"args must be a list of strings and pipeline parameters, e.g. ['--lr', lr]; got "
                         f"{type(args).__name__}")
    for i, arg in enumerate(args):
        if not isinstance(arg, str) and not is_parameter(arg):
            raise UsageError(f"args[{i}] is a {type(arg).__name__}: give strings (str(...)) or pipeline parameters")
        problem = arg_problem(arg) if isinstance(arg, str) else None
        if problem is not None:
            raise UsageError(f"args[{i}] {problem}")
    return list(args)


def load_step(job_file: str | os.PathLike[str], args: Sequence[Any] | None = None, *,
              is_parameter: Callable[[Any], bool] = lambda _: False, project: str | None = None,
              region: str | None = None, overrides: Sequence[str] = ()) -> Step:
    """Load and check `job_file` (with `--set` `overrides`) with `args` appended; its request is vtrain's own
    (``build_request``, with the artifacts planned as render plans them). `is_parameter` says which items of
    `args` are pipeline parameters (KFP's channels)."""
    from vtrain.jobfile.artifacts import plan_artifacts
    from vtrain.jobfile.load import load_config
    from vtrain.request.build import TUNING_JOB, build_request
    from vtrain.request.secrets import secret_places

    extra = _checked_args(args, is_parameter)
    stand_in = [PARAMETER.format(i) if is_parameter(a) else a for i, a in enumerate(extra)]
    base = load_config(job_file, overrides)
    config = load_config(job_file, [*overrides, *args_overrides(base, stand_in)]) if stand_in else base
    request = build_request(config, plan_artifacts(config, region=region), project=project, region=region)
    if request.kind == TUNING_JOB:
        raise UsageError(f"{_shown(job_file)}: a job file with `tuning:` makes a HyperparameterTuningJob; a "
                         "pipeline step here runs one CustomJob (remove `tuning:`, or use Google's "
                         "HyperparameterTuningJobRunOp)")
    body = _with_parameters(request.body, extra, is_parameter)
    return Step(request.config, body, tuple(extra), secret_places(request.body))


def refuse_step_secrets(step: Step, op: str, carrier: str) -> None:
    """The one secret policy (:mod:`vtrain.request.secrets`) for a pipeline op that writes `step` into the
    compiled pipeline (or its image): refused unless the op was given ``allow_credentials=True``."""
    from vtrain.request.secrets import refuse_secrets

    refuse_secrets(step.secrets, source=_shown(step.config.source or "the job file"), carrier=carrier,
                   allow=f"pass {op}(..., allow_credentials=True) to write them")


def _with_parameters(body: dict[str, Any], extra: Sequence[Any], is_parameter: Callable[[Any], bool]) -> dict[str, Any]:
    """The body with each parameter's placeholder (an arg of its own) replaced by the parameter itself."""
    params = {PARAMETER.format(i): a for i, a in enumerate(extra) if is_parameter(a)}
    if not params:
        return body

    def swap(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return params.get(value, value) if isinstance(value, str) else value

    swapped: dict[str, Any] = swap(body)
    return swapped


def _shown(path: str | os.PathLike[str]) -> str:
    from vtrain.userpaths import shown

    return shown(str(Path(path)))


__all__ = ["PARAMETER", "Step", "arg_problem", "args_overrides", "load_step", "refuse_step_secrets"]
