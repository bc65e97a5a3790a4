"""JobConfig with `tuning:` → the `hyperparameterTuningJobs.create` REST body. Pure.

The body is written as ``json_format.MessageToDict(aiplatform_v1.HyperparameterTuningJob)``
writes it (camelCase, field-number order, int64 as strings, defaults omitted), so `render`
needs no Google library and the tests prove the two equal by a strict round trip. The
trial job spec is exactly the CustomJobSpec :func:`vtrain.request.custom_job.build_job_dict` builds: every
trial runs the job the file describes, with the trial's values appended to every pool's
args as `--NAME=VALUE` by Vertex AI (and by `vtrain local`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vtrain.jobfile.config import JobConfig
from vtrain.request.custom_job import build_job_dict
from vtrain.tuning.config import ALGORITHMS, GOALS, MEASUREMENTS, SCALES, STOPPING, ParameterConfig, TuningConfig

if TYPE_CHECKING:
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob

    from vtrain.request.custom_job import Planned

#: Where a tuning body keeps the CustomJobSpec every trial runs.
TRIAL_SPEC = "trialJobSpec"


def parameter_spec(p: ParameterConfig, children: Sequence[ParameterConfig] = (),
                   below: Mapping[str, Sequence[ParameterConfig]] | None = None) -> dict[str, Any]:
    """One ParameterSpec; `children` are the parameters conditional on it (`below`: everyone's, for theirs)."""
    out: dict[str, Any] = {"parameterId": p.name}
    if p.type == "double":
        out["doubleValueSpec"] = {"minValue": float(p.min or 0), "maxValue": float(p.max or 0)}
        if p.default is not None:
            out["doubleValueSpec"]["defaultValue"] = float(p.default)
    elif p.type == "integer":
        out["integerValueSpec"] = {"minValue": str(int(p.min or 0)), "maxValue": str(int(p.max or 0))}
        if p.default is not None:
            out["integerValueSpec"]["defaultValue"] = str(int(p.default))
    elif p.type == "categorical":
        out["categoricalValueSpec"] = {"values": [str(v) for v in p.values]}
        if p.default is not None:
            out["categoricalValueSpec"]["defaultValue"] = str(p.default)
    else:
        out["discreteValueSpec"] = {"values": [float(v) for v in p.values]}
        if p.default is not None:
            out["discreteValueSpec"]["defaultValue"] = float(p.default)
    if p.scale is not None and p.type != "categorical":
        out["scaleType"] = SCALES[p.scale]
    if children:
        out["conditionalParameterSpecs"] = [
            {"parameterSpec": parameter_spec(c, (below or {}).get(c.name, ()), below), **_condition(p, c)}
            for c in children
        ]
    return out


def _condition(parent: ParameterConfig, child: ParameterConfig) -> dict[str, Any]:
    """The parent values a child is tuned under, in the parent's value type."""
    if parent.type == "integer":
        return {"parentIntValues": {"values": [str(int(v)) for v in child.parent_values]}}
    if parent.type == "categorical":
        return {"parentCategoricalValues": {"values": [str(v) for v in child.parent_values]}}
    return {"parentDiscreteValues": {"values": [float(v) for v in child.parent_values]}}


def study_spec(tuning: TuningConfig) -> dict[str, Any]:
    below: dict[str, list[ParameterConfig]] = {}
    for p in tuning.parameters:
        if p.parent is not None:
            below.setdefault(p.parent, []).append(p)
    spec: dict[str, Any] = {
        "metrics": [{"metricId": m.name, "goal": GOALS[m.goal]} for m in tuning.metrics],
        "parameters": [parameter_spec(p, below.get(p.name, ()), below) for p in tuning.parameters
                       if p.parent is None],
    }
    if tuning.algorithm != "default":  # ALGORITHM_UNSPECIFIED: Vertex's Bayesian optimisation (Vizier)
        spec["algorithm"] = ALGORITHMS[tuning.algorithm]
    if tuning.early_stopping in ("decay_curve", "median"):  # fields 4 and 5; convex is 9, after 7
        spec[STOPPING[tuning.early_stopping]] = {}
    spec["measurementSelectionType"] = MEASUREMENTS[tuning.measurement_selection]
    if tuning.early_stopping == "convex":
        spec[STOPPING["convex"]] = {}
    return spec


def build_tuning_dict(config: JobConfig, artifacts: Planned = None) -> dict[str, Any]:
    """The `hyperparameterTuningJobs.create` body, as MessageToDict(HyperparameterTuningJob) writes it."""
    if config.tuning is None:
        raise ValueError("this job file has no tuning: block; build a CustomJob with "
                         "vtrain.request.custom_job.build_job_dict")
    custom = build_job_dict(config, artifacts)
    tuning = config.tuning
    body: dict[str, Any] = {
        "displayName": custom["displayName"],
        "studySpec": study_spec(tuning),
        "maxTrialCount": tuning.max_trials,
    }
    if tuning.parallel_trials:
        body["parallelTrialCount"] = tuning.parallel_trials
    if tuning.max_failed_trials:
        body["maxFailedTrialCount"] = tuning.max_failed_trials
    body[TRIAL_SPEC] = custom["jobSpec"]
    for key in ("labels", "encryptionSpec"):
        if key in custom:
            body[key] = custom[key]
    return body


def trial_custom_job(body: Mapping[str, Any], trial_id: str, args: Sequence[str]) -> dict[str, Any]:
    """The CustomJob one trial runs: the trial spec with `args` appended to every pool's args,
    as Vertex AI passes a trial's parameter values."""
    import copy

    spec = copy.deepcopy(dict(body[TRIAL_SPEC]))
    for pool in spec.get("workerPoolSpecs", []):
        for key in ("pythonPackageSpec", "containerSpec"):
            if key in pool and "/reductionserver" not in pool[key].get("imageUri", ""):
                pool[key]["args"] = [*pool[key].get("args", []), *args]
    return {"displayName": f"{body.get('displayName', 'job')} trial {trial_id}", "jobSpec": spec}


def to_tuning_proto(body: Mapping[str, Any]) -> HyperparameterTuningJob:
    """Parse a REST body into the real `aiplatform_v1.HyperparameterTuningJob` (strict)."""
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob
    from google.protobuf import json_format

    job = HyperparameterTuningJob()
    json_format.ParseDict(dict(body), job._pb)
    return job


__all__ = [
    "TRIAL_SPEC",
    "build_tuning_dict",
    "parameter_spec",
    "study_spec",
    "to_tuning_proto",
    "trial_custom_job",
]
