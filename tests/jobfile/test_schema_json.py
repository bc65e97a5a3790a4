"""The job file's JSON Schema, checked with the real `jsonschema` library against the files vtrain
itself accepts and rejects: configs/, the templates' job files and the bad-input corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import REPO
from vtrain.cli import cli
from vtrain.commands.trainer import TEMPLATES, scaffold
from vtrain.jobfile import schema
from vtrain.jobfile.json_schema import MODELINE, SCHEMA_FILE, job_schema, key_paths
from vtrain.jobfile.yamlpos import load_yaml

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))
BAD = sorted((REPO / "tests" / "data" / "bad").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    body = job_schema()
    jsonschema.Draft202012Validator.check_schema(body)
    return jsonschema.Draft202012Validator(body)


def errors(validator: Any, data: Any) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]


def test_schema_command_prints_the_generated_schema() -> None:
    result = CliRunner().invoke(cli, ["schema"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body == job_schema()
    assert body["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert body["additionalProperties"] is False
    assert body["required"] == ["name", "trainer", "cluster"]


def test_every_key_has_a_description() -> None:
    """Docs live on the nodes (`doc=`), so there is no table whose entries could name a key that is gone."""
    body = job_schema()
    for path in key_paths():
        node: dict[str, Any] = body
        for part in path:
            node = node["properties"][part]
        assert node.get("description"), f"{'.'.join(map(str, path))} has no description: give its node a doc="


def test_objects_are_closed_and_enums_listed() -> None:
    body = job_schema()
    assert body["properties"]["cluster"]["additionalProperties"] is False
    chief = body["properties"]["cluster"]["properties"]["chief"]
    assert chief["additionalProperties"] is False and chief["properties"]["boot_disk"]["additionalProperties"] is False
    strategy = body["properties"]["distribution_strategy"]
    assert strategy["anyOf"][0]["enum"] == list(schema.STRATEGIES) and strategy["default"] == "auto"
    scheduling = body["properties"]["scheduling"]["properties"]["strategy"]
    assert scheduling["anyOf"][0]["enum"] == ["standard", "spot", "flex_start"]
    assert "NVIDIA_TESLA_T4" in chief["properties"]["accelerator"]["examples"]
    assert "a2-highgpu-8g" in chief["properties"]["machine_type"]["examples"]
    assert body["properties"]["scheduling"]["properties"]["timeout"]["default"] == "7d"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_example_config_validates(validator: Any, path: Path) -> None:
    assert errors(validator, yaml.safe_load(path.read_text())) == []


@pytest.mark.parametrize("template", TEMPLATES)
def test_init_writes_a_modeline_and_a_schema_its_job_file_passes(validator: Any, tmp_path: Path, template: str) -> None:
    scaffold(tmp_path, template)
    text = (tmp_path / "vtrain.yaml").read_text()
    assert text.splitlines()[0] == MODELINE == f"# yaml-language-server: $schema={SCHEMA_FILE}"
    assert json.loads((tmp_path / SCHEMA_FILE).read_text()) == job_schema()
    assert errors(validator, yaml.safe_load(text)) == []


def _shape_problems(path: Path) -> tuple[Any, list[Any]] | None:
    """(data, problems of the shape check), or None for files whose YAML itself is broken."""
    data, positions, problems = load_yaml(path.read_text(), str(path))
    if problems or not isinstance(data, dict):
        return None
    return data, schema.check_job(data, positions)[1]


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_corpus_shape_errors_are_rejected_and_rule_errors_left_to_validate(validator: Any, path: Path) -> None:
    found = _shape_problems(path)
    if found is None:
        pytest.skip("broken YAML (duplicate key, tabs, empty, not a mapping): no document to check")
    data, problems = found
    if problems:
        assert errors(validator, data), f"JSON Schema accepts what vtrain rejects: {problems}"
    else:  # cross-key rules: the JSON Schema must not reject what only `vtrain validate` can judge
        assert errors(validator, data) == []


@pytest.mark.parametrize(
    ("patch", "ok"),
    [
        ({"scheduling": {"strategy": "SPOT"}}, True),
        ({"distribution_strategy": "multi-worker-mirrored"}, True),
        ({"distribution_strategy": "mirroredd"}, False),
        ({"scheduling": {"timeout": "1h30m"}}, True),
        ({"scheduling": {"timeout": 3600}}, True),
        ({"scheduling": {"timeout": "soon"}}, False),
        ({"cluster": {"chief": {"machine_type": "n1-standard-4"}, "ps": {"replicas": 2}}}, True),
        ({"cluster": {"chief": {}, "ps": {}, "parameter_servers": {}}}, False),
        ({"cluster": {"chief": {}, "reduction_server": {"replicas": "auto"}}}, True),
        ({"cluster": {"chief": {}, "workers": {"replicas": "auto"}}}, False),
        ({"trainer": {"module": "t.task", "package": ".", "args": "--one"}}, True),
        ({"trainer": {"module": "t.task", "package": ".", "env": {"N": 3}}}, True),
        ({"trainer": {"module": "t.task", "package": ".", "env": {"N": True}}}, False),
        ({"labels": {"team": 3}}, False),
        ({"enable_web_access": "yes"}, False),
    ],
)
def test_schema_agrees_with_the_checker(validator: Any, patch: dict[str, Any], ok: bool) -> None:
    data = {"name": "x", "trainer": {"module": "t.task", "package": "."}, "cluster": {"chief": {}}, **patch}
    assert (errors(validator, data) == []) is ok, errors(validator, data)
    if "parameter_servers" not in str(patch):  # both spellings at once: only the JSON Schema says so today
        from vtrain.jobfile.yamlpos import Positions

        assert (schema.check_job(data, Positions())[1] == []) is ok
