"""Read a compiled pipeline back: the CustomJob each CustomTrainingJobOp task sends, as Google's launcher would.

The launcher (google_cloud_pipeline_components.container.v1.custom_job) receives `--payload`, a JSON template
whose `{{$.inputs.parameters['NAME']}}` the KFP backend fills from the task's inputs (quoted: a string; bare: a
list, map or bool as JSON). This does the same with the task's constants, the component's defaults and the
values given for the pipeline's parameters, then parses the payload strictly into aiplatform_v1.CustomJob and
writes it back as REST JSON, the form `vtrain render` prints.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

LAUNCHER = "google_cloud_pipeline_components.container.v1.custom_job.launcher"
_INPUT = re.compile(r"(\"?)\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}(\"?)")
_PIPELINE = re.compile(r"\{\{\$\.pipeline_[a-z_]+\}\}")  # project, location, persistent resource: set at run time


def compile_to_spec(pipeline: Any, tmp_path: Path) -> dict[str, Any]:
    from kfp import compiler

    out = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(pipeline, str(out))
    spec: dict[str, Any] = yaml.safe_load(out.read_text(encoding="utf-8"))
    return spec


def _fill(value: Any, params: dict[str, Any]) -> Any:
    """A task's constant with its pipeline channels (pipelinechannel--NAME) replaced by the parameters' values."""
    if isinstance(value, dict):
        return {k: _fill(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, params) for v in value]
    if isinstance(value, str):
        return _INPUT.sub(lambda m: m[1] + str(params[m[2].removeprefix("pipelinechannel--")]) + m[3], value)
    return value


def task_inputs(spec: dict[str, Any], task: str, params: dict[str, Any]) -> dict[str, Any]:
    """The task's input values: the component's defaults, then the task's constants and parameters."""
    node = spec["root"]["dag"]["tasks"][task]
    component = spec["components"][node["componentRef"]["name"]]
    values = {name: d["defaultValue"] for name, d in component["inputDefinitions"]["parameters"].items()
              if "defaultValue" in d}
    for name, given in node["inputs"]["parameters"].items():
        if "runtimeValue" in given:
            values[name] = _fill(given["runtimeValue"]["constant"], params)
        elif "componentInputParameter" in given:
            values[name] = params[given["componentInputParameter"]]
    return values


def custom_jobs(spec: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Task name → the CustomJob its launcher creates (REST JSON), for every CustomTrainingJobOp task."""
    from google.cloud.aiplatform_v1 import CustomJob
    from google.protobuf import json_format

    params = params or {}
    jobs = {}
    for task, node in spec["root"]["dag"]["tasks"].items():
        executor = spec["components"][node["componentRef"]["name"]]["executorLabel"]
        container = spec["deploymentSpec"]["executors"][executor]["container"]
        if LAUNCHER not in container["command"]:
            continue
        args = container["args"]
        template = args[args.index("--payload") + 1]
        values = task_inputs(spec, task, params)

        def put(m: re.Match[str], values: dict[str, Any] = values) -> str:
            value = values[m[2]]
            if m[1] and m[3]:
                return json.dumps(str(value))
            return json.dumps(value)

        text = _PIPELINE.sub("", _INPUT.sub(put, template))
        job = CustomJob()
        json_format.ParseDict(json.loads(text), job._pb)  # strict: a field Vertex does not know fails
        jobs[task] = _pruned(json_format.MessageToDict(job._pb))
        jobs[task]["_location"] = values.get("location")
        jobs[task]["_project"] = values.get("project")
    return jobs


def _pruned(body: dict[str, Any]) -> dict[str, Any]:
    """Without the empty messages the op always sends (encryptionSpec {}, pscInterfaceConfig {},
    baseOutputDirectory with no prefix): Vertex reads an empty message as one left unset. An empty pool in the
    list of pools stays: it is how pool 2 is skipped."""
    out = {}
    for key, value in body.items():
        if isinstance(value, dict):
            value = _pruned(value)
            if not value:
                continue
        out[key] = value
    return out


#: What CustomTrainingJobOp always sends, where a vtrain render leaves Vertex's default unsaid.
OP_SCHEDULING_DEFAULTS = {"timeout": "604800s", "strategy": "STANDARD", "maxWaitDuration": "86400s"}


def with_op_defaults(job_spec: dict[str, Any]) -> dict[str, Any]:
    """Render's jobSpec with the op's explicit scheduling defaults (Vertex's own: 7 days, STANDARD, 24 h)."""
    out = dict(job_spec)
    out["scheduling"] = {**OP_SCHEDULING_DEFAULTS, **job_spec.get("scheduling", {})}
    return out
