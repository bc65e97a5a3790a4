"""`vertex: {job_spec, worker_pool}`: raw camelCase fields, checked against the installed aiplatform_v1 protos.
An unknown name is refused with its path and the nearest name; a known one reaches the request as
MessageToDict writes it; a field one of vtrain's keys sets is refused, naming the key."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import google.cloud.aiplatform_v1  # noqa: F401 - its import (seconds) is paid at collection, not by a test
import pytest
from click.testing import CliRunner

from tests.helpers import assert_equals_real_proto, planned, write_job
from tests.jobfile.declared import dotted as dotted_key
from tests.jobfile.declared import node_at
from vtrain.cli import cli
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.json_schema import key_paths
from vtrain.jobfile.load import parse_config
from vtrain.jobfile.rules.passthrough import JOB_SPEC_KEYS, WORKER_POOL_KEYS, descriptor
from vtrain.request.build import build_request
from vtrain.request.custom_job import PLAIN_FIELDS
from vtrain.request.tuning_job import to_tuning_proto

HEAD = """\
name: pass
trainer: {package_uris: [gs://my-bucket/t-0.1.tar.gz], module: trainer.task}
cluster: {chief: {machine_type: n1-standard-4}, workers: {replicas: 1}}
"""
MODEL = "projects/p/locations/us-central1/models/m@2"


def problems(vertex: str, extra: str = "") -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        parse_config(HEAD + extra + "vertex:\n" + textwrap.indent(textwrap.dedent(vertex), "  "), "job.yaml")
    return info.value.problems


@pytest.mark.parametrize(("vertex", "path", "words"), [
    ("job_spec: {modles: [a]}", "vertex.job_spec.modles", "has no field 'modles' in the installed "
     "google-cloud-aiplatform; did you mean 'models'?"),
    ("job_spec: {scheduling: {timeOut: 5s}}", "vertex.job_spec.scheduling.timeOut", "did you mean 'timeout'?"),
    ("job_spec: {service_account: x}", "vertex.job_spec.service_account", "camelCase name 'serviceAccount'"),
    ("job_spec: {serviceAccount: x}", "vertex.job_spec.serviceAccount", "set by vtrain from `service_account`"),
    ("job_spec: {scheduling: {timeout: 60s}}", "vertex.job_spec.scheduling.timeout",
     "set by vtrain from `scheduling.timeout`"),
    ("worker_pool: {machineSpec: {gpuPartitonSize: 1g.5gb}}", "vertex.worker_pool.machineSpec.gpuPartitonSize",
     "did you mean 'gpuPartitionSize'?"),
    ("worker_pool: {machineSpec: {machineType: n1-standard-8}}", "vertex.worker_pool.machineSpec.machineType",
     "`cluster.<pool>.machine_type`"),
    ("job_spec: {pscInterfaceConfig: {dnsPeeringConfigs: [{domian: a.}]}}", "vertex.job_spec.pscInterfaceConfig",
     "set by vtrain from `psc_interface`"),
    ("job_spec: {models: 3}", "vertex.job_spec.models", "CustomJobSpec.models cannot hold this value"),
    ("job_spec: [models]", "vertex.job_spec", "expected a mapping of camelCase Vertex AI fields"),
])
def test_a_wrong_field_is_refused_with_its_path(vertex: str, path: str, words: str) -> None:
    found = [p for p in problems(vertex) if p.severity == "error"]
    assert [p.path for p in found] == [path], found
    assert words in found[0].message and found[0].line is not None


def test_a_known_field_reaches_the_request_in_the_protos_order() -> None:
    config = parse_config(HEAD + f"vertex:\n  job_spec: {{models: ['{MODEL}']}}\n", "job.yaml")
    body = build_request(*planned(config)).body
    assert body["jobSpec"]["models"] == [MODEL]
    assert_equals_real_proto(body)  # key order included: models (20) comes after workerPoolSpecs (1)


def test_a_tuning_jobs_trials_get_it_too() -> None:
    tuning = ("tuning: {metric: {name: acc, goal: maximize}, max_trials: 2, "
              "parameters: {lr: {type: double, min: 0.001, max: 0.1}}}\n")
    config = parse_config(HEAD + tuning + f"vertex:\n  job_spec: {{models: ['{MODEL}']}}\n", "job.yaml")
    body = build_request(*planned(config)).body
    assert body["trialJobSpec"]["models"] == [MODEL]
    to_tuning_proto(body)


def test_every_field_a_vtrain_key_sets_is_in_the_owned_table() -> None:
    plain = {path.removeprefix("jobSpec.").split(".")[0] for _, path in PLAIN_FIELDS if path.startswith("jobSpec.")}
    assert plain <= set(JOB_SPEC_KEYS)
    for table, message in ((JOB_SPEC_KEYS, "CustomJobSpec"), (WORKER_POOL_KEYS, "WorkerPoolSpec")):
        for dotted in table:  # each owned name is a real field of the installed proto
            desc = descriptor(message)
            for part in dotted.split("."):
                field = {f.json_name: f for f in desc.fields}[part]
                desc = field.message_type
    pool = {f.json_name for f in descriptor("WorkerPoolSpec").fields}
    assert pool <= {k.split(".")[0] for k in WORKER_POOL_KEYS}  # today vtrain sets every WorkerPoolSpec field


def test_each_plain_fields_declared_path_and_number_are_the_protos() -> None:
    """A plain field is declared once, on its node (`rest=`, `rest_number=`): the path names real fields of
    CustomJob and the number is the proto's, which orders the body as MessageToDict does."""
    from google.cloud.aiplatform_v1 import CustomJob

    assert PLAIN_FIELDS, "no node declares rest="
    for key, path in PLAIN_FIELDS:
        node = node_at((key,))
        desc, numbers = CustomJob.pb().DESCRIPTOR, []
        for part in path.split("."):
            fields = {f.json_name: f for f in desc.fields}
            assert part in fields, f"{key}: rest={path!r} names no field '{part}' of {desc.name}"
            numbers.append(fields[part].number)
            desc = fields[part].message_type
        expected = numbers[1] if path.startswith("jobSpec.") else numbers[0]
        assert node.rest_number == expected, f"{key}: rest_number={node.rest_number}, the proto says {expected}"
    nested = [dotted_key(p) for p in key_paths() if len(p) > 1 and node_at(p).rest]
    assert not nested, f"rest= is read on top-level keys only: {nested}"


def test_validate_exits_2_naming_the_field(tmp_path: Path) -> None:
    path = write_job(tmp_path, HEAD + "vertex:\n  job_spec: {modles: [a]}\n")
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "vertex.job_spec.modles" in result.output and "did you mean 'models'?" in result.output
    assert "Traceback" not in result.output


def test_render_sends_it_as_written(tmp_path: Path) -> None:
    path = write_job(tmp_path, HEAD + f"vertex:\n  job_spec: {{models: ['{MODEL}']}}\n")
    result = CliRunner().invoke(cli, ["render", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output[result.output.index("{"):result.output.rindex("}") + 1])["jobSpec"]["models"] \
        == [MODEL]


def test_submit_dry_run_refuses_it_before_anything_is_built(tmp_path: Path) -> None:
    path = write_job(tmp_path, HEAD + "vertex:\n  worker_pool: {machineSpec: {machineType: n1-standard-8}}\n")
    result = CliRunner().invoke(cli, ["submit", str(path), "--dry-run", "--project", "my-project"])
    assert result.exit_code == 2, result.output
    assert "vertex.worker_pool.machineSpec.machineType" in result.output
    assert "cluster.<pool>.machine_type" in result.output and "Traceback" not in result.output
