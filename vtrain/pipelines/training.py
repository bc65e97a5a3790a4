"""`training_op`: a job file as a task of Google's `CustomTrainingJobOp`, with vtrain's render as its spec.

The op's inputs are filled from the REST body `vtrain render` prints (never re-derived): the worker pools
as they are, scheduling, service account, network, labels, base output directory, TensorBoard, CMEK. The
op has no input for some CustomJobSpec fields vtrain sets (the Experiments contexts, dashboard access,
`disableRetries`, a protected artifact location, `vertex.job_spec` passthrough); a job file that uses one
gets a copy of the op (:func:`_op_with`) whose payload carries them as constants, built by Google's own
``build_serverless_customjob_container_spec``: same launcher image, same inputs and ``gcp_resources``.

Artifacts are planned, not made: the trainer sdist's URI (or the built image's tag) is the one
`vtrain render` shows, named by a hash of the sources, and `vtrain package JOB.yaml` builds and stages
exactly that before the pipeline runs (docs/guides/pipelines.md).
"""

# No `from __future__ import annotations`: KFP reads the component inputs' annotations as real types.
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vtrain.pipelines.step import Step, load_step, refuse_step_secrets

#: CustomJobSpec fields (REST names) that CustomTrainingJobOp takes as inputs, and the input each goes to.
OP_INPUTS: dict[str, str] = {
    "workerPoolSpecs": "worker_pool_specs",
    "serviceAccount": "service_account",
    "network": "network",
    "reservedIpRanges": "reserved_ip_ranges",
    "tensorboard": "tensorboard",
    "enableWebAccess": "enable_web_access",
    "persistentResourceId": "persistent_resource_id",
    "pscInterfaceConfig": "psc_interface_config",
}
#: CustomJobSpec.scheduling fields the op takes as inputs.
SCHEDULING_INPUTS: dict[str, str] = {
    "timeout": "timeout",
    "restartJobOnWorkerRestart": "restart_job_on_worker_restart",
    "strategy": "strategy",
    "maxWaitDuration": "max_wait_duration",
}


def is_parameter(value: Any) -> bool:
    """A KFP pipeline parameter (a channel: a pipeline input or another task's output)."""
    from kfp.dsl import pipeline_channel

    return isinstance(value, pipeline_channel.PipelineChannel)


def op_inputs(step: Step) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(the op's inputs, jobSpec fields it has no input for, scheduling fields it has no input for)."""
    body = step.body
    spec: Mapping[str, Any] = body["jobSpec"]
    inputs: dict[str, Any] = {"display_name": body["displayName"], "location": step.config.region}
    if step.config.project:
        inputs["project"] = step.config.project
    extra: dict[str, Any] = {}
    extra_scheduling: dict[str, Any] = {}
    for key, value in spec.items():
        if key in OP_INPUTS:
            inputs[OP_INPUTS[key]] = value
        elif key == "baseOutputDirectory":
            inputs["base_output_directory"] = value["outputUriPrefix"]
        elif key == "scheduling":
            for field, item in value.items():
                if field in SCHEDULING_INPUTS:
                    inputs[SCHEDULING_INPUTS[field]] = item
                else:
                    extra_scheduling[field] = item
        else:
            extra[key] = value
    if body.get("labels"):
        inputs["labels"] = dict(body["labels"])
    kms = (body.get("encryptionSpec") or {}).get("kmsKeyName")
    if kms:
        inputs["encryption_spec_key_name"] = kms
    return inputs, extra, extra_scheduling


def training_op(job_file: str | os.PathLike[str], args: Sequence[Any] | None = None, *,
                project: str | None = None, region: str | None = None, allow_credentials: bool = False) -> Any:
    """Inside a ``@dsl.pipeline``: the job file as a ``CustomTrainingJobOp`` task whose spec is exactly
    `vtrain render`'s jobSpec, with `args` (strings and pipeline parameters) appended to every trainer
    pool's args. The job file is checked now, at compile time: a mistake raises vtrain's ``ConfigError``
    or ``UsageError`` (one line per problem). `project`/`region` as `vtrain render --project/--region`.
    The compiled pipeline holds the spec in clear: a job with secret-looking env or args (what `vtrain render`
    shows as ``<redacted>``) is refused unless `allow_credentials` (docs/reference/secrets.md)."""
    step = load_step(job_file, args, is_parameter=is_parameter, project=project, region=region)
    if not allow_credentials:
        refuse_step_secrets(step, "training_op", "the compiled pipeline")
    inputs, extra, extra_scheduling = op_inputs(step)
    return component_for(extra, extra_scheduling)(**inputs)


def component_yaml(job_file: str | os.PathLike[str], *, overrides: Sequence[str] = (), project: str | None = None,
                   region: str | None = None) -> str:
    """`vtrain render -o kfp`: the job as a reusable component (a one-step pipeline, which KFP loads with
    ``components.load_component_from_file`` and calls inside another pipeline), compiled to YAML."""
    import re
    import tempfile
    from pathlib import Path

    from kfp import compiler, dsl

    step = load_step(job_file, overrides=overrides, project=project, region=region)
    inputs, extra, extra_scheduling = op_inputs(step)
    name = re.sub(r"[^a-z0-9-]+", "-", step.config.name.lower()).strip("-")[:100] or "vtrain-job"

    @dsl.pipeline(name=name, description=f"vtrain job {step.config.name} as a Vertex AI CustomJob "
                  "(google-cloud-pipeline-components' CustomTrainingJobOp)")  # type: ignore[untyped-decorator]
    def job() -> None:
        component_for(extra, extra_scheduling)(**inputs)

    with tempfile.TemporaryDirectory(prefix="vtrain-kfp-") as tmp:
        out = Path(tmp) / "component.yaml"
        compiler.Compiler().compile(job, str(out))
        return out.read_text(encoding="utf-8")


def component_for(extra: Mapping[str, Any], extra_scheduling: Mapping[str, Any]) -> Callable[..., Any]:
    """Google's CustomTrainingJobOp, or, for fields it has no input for, its copy that carries them."""
    from google_cloud_pipeline_components.v1.custom_job import CustomTrainingJobOp

    if not extra and not extra_scheduling:
        op: Callable[..., Any] = CustomTrainingJobOp
        return op
    return _op_with(dict(extra), dict(extra_scheduling))


def _op_with(extra: dict[str, Any], extra_scheduling: dict[str, Any]) -> Callable[..., Any]:
    """CustomTrainingJobOp's own definition (its inputs, defaults and payload, in Google's words), with the
    jobSpec and scheduling fields it lacks added to the payload as constants."""
    from typing import Dict, List, Union  # noqa: UP035 -- KFP reads these annotations of a component's inputs

    from google_cloud_pipeline_components import _placeholders, utils
    from kfp import dsl

    location_default = _placeholders.LOCATION_PLACEHOLDER
    project_default = _placeholders.PROJECT_ID_PLACEHOLDER
    resource_default = _placeholders.PERSISTENT_RESOURCE_ID_PLACEHOLDER

    @dsl.container_component  # type: ignore[untyped-decorator]
    def custom_training_job(
        display_name: str,
        gcp_resources: dsl.OutputPath(str),  # type: ignore[valid-type]
        location: str = location_default,
        worker_pool_specs: List[Dict[str, str]] = [],  # noqa: B006, UP006
        timeout: str = "604800s",
        restart_job_on_worker_restart: bool = False,
        service_account: str = "",
        tensorboard: str = "",
        enable_web_access: bool = False,
        network: str = "",
        reserved_ip_ranges: List[str] = [],  # noqa: B006, UP006
        base_output_directory: str = "",
        labels: Dict[str, str] = {},  # noqa: B006, UP006
        encryption_spec_key_name: str = "",
        persistent_resource_id: str = resource_default,
        project: str = project_default,
        strategy: str = "STANDARD",
        max_wait_duration: str = "86400s",
        psc_interface_config: Dict[str, Union[str, List[Dict[str, str]]]] = {},  # noqa: B006, UP006, UP007
    ) -> dsl.ContainerSpec:
        scheduling = {"timeout": timeout, "restart_job_on_worker_restart": restart_job_on_worker_restart,
                      "strategy": strategy, "max_wait_duration": max_wait_duration, **extra_scheduling}
        return utils.build_serverless_customjob_container_spec(
            project=project,
            location=location,
            custom_job_payload={
                "display_name": display_name,
                "job_spec": {
                    "worker_pool_specs": worker_pool_specs,
                    "scheduling": scheduling,
                    "service_account": service_account,
                    "tensorboard": tensorboard,
                    "enable_web_access": enable_web_access,
                    "network": network,
                    "reserved_ip_ranges": reserved_ip_ranges,
                    "base_output_directory": {"output_uri_prefix": base_output_directory},
                    "persistent_resource_id": persistent_resource_id,
                    "psc_interface_config": psc_interface_config,
                    **extra,
                },
                "labels": labels,
                "encryption_spec": {"kms_key_name": encryption_spec_key_name},
            },
            gcp_resources=gcp_resources,
        )

    return custom_training_job  # type: ignore[no-any-return]


__all__ = ["OP_INPUTS", "SCHEDULING_INPUTS", "component_for", "component_yaml", "is_parameter", "op_inputs",
           "training_op"]
