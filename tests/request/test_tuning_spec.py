"""Tuning configs render to their golden HyperparameterTuningJob bodies, parsed strictly by aiplatform_v1.

Regenerate with `UPDATE_GOLDEN=1 make test`; package hashes are normalized as in test_examples.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from google.cloud.aiplatform_v1 import HyperparameterTuningJob
from google.protobuf import json_format

from tests.conftest import REPO
from tests.helpers import planned, write_job
from vtrain.cli import cli
from vtrain.jobfile.load import load_config
from vtrain.request.build import build_request
from vtrain.request.custom_job import build_job_dict
from vtrain.request.render import REDACTED, render
from vtrain.request.tuning_job import build_tuning_dict, to_tuning_proto, trial_custom_job

CONFIGS = sorted((REPO / "configs" / "tuning").glob("*.yaml"))
GOLDEN = REPO / "tests" / "golden" / "tuning"
_HASH = re.compile(r"-[0-9a-f]{12,64}\.tar\.gz")


def test_three_tuning_examples() -> None:
    assert {c.stem for c in CONFIGS} >= {"grid-keras", "random-log-scale", "bayesian-multi-worker"}


@pytest.mark.parametrize("path", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_tuning_example_matches_golden_and_real_proto(path: Path) -> None:
    config = load_config(path)
    body = build_tuning_dict(*planned(config))
    pb = HyperparameterTuningJob()._pb
    json_format.ParseDict(body, pb)  # strict: an unknown field raises
    back = json_format.MessageToDict(pb)
    assert back.pop("labels", None) == body.get("labels")
    assert json.dumps(back, indent=2) == json.dumps({k: v for k, v in body.items() if k != "labels"}, indent=2)
    # every trial runs the job the file describes
    assert body["trialJobSpec"] == build_job_dict(*planned(config))["jobSpec"]
    text = _HASH.sub("-<hash>.tar.gz", json.dumps(body, indent=2) + "\n")
    golden = GOLDEN / f"{path.stem}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_gcloud_config_is_a_whole_tuning_job_and_the_command_submits_it() -> None:
    path = REPO / "configs" / "tuning" / "random-log-scale.yaml"
    result = CliRunner().invoke(cli, ["render", str(path), "-o", "gcloud", "--project", "my-proj"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    command = [line[4:] for line in text.splitlines() if line.startswith("#   ")]
    argv = shlex.split(" ".join(command))
    assert argv[:4] == ["gcloud", "ai", "hp-tuning-jobs", "create"]
    assert "--display-name=tune-random" in argv and "--labels=team=ml" in argv and "--config=job.yaml" in argv
    config = yaml.safe_load(text)
    assert "labels" not in config  # a flag there
    job = HyperparameterTuningJob.from_json(json.dumps(config))  # strict
    assert job.max_trial_count == 20 and job.study_spec.algorithm.name == "RANDOM_SEARCH"
    assert job.study_spec.median_automated_stopping_spec is not None
    assert "medianAutomatedStoppingSpec" in config["studySpec"]


def test_render_json_and_yaml_are_the_body_with_secrets_redacted(tmp_path: Path) -> None:
    path = write_job(tmp_path, """
        name: t
        trainer: {container: {image_uri: us-docker.pkg.dev/p/r/t:1}}
        cluster: {chief: {machine_type: n1-standard-4}}
        labels: {team: ml}
        tuning:
          metric: {name: acc, goal: maximize}
          parameters: {units: {type: integer, min: 8, max: 64, scale: log}}
          max_trials: 3
        """)
    result = CliRunner().invoke(cli, ["render", str(path), "--set", "trainer.env={API_TOKEN: s3cr3t}"])
    body = json.loads(result.stdout)
    assert body["trialJobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"][0] == {
        "name": "API_TOKEN", "value": REDACTED}
    assert body["studySpec"]["parameters"] == [{"parameterId": "units", "integerValueSpec": {
        "minValue": "8", "maxValue": "64"}, "scaleType": "UNIT_LOG_SCALE"}]
    assert "algorithm" not in body["studySpec"]  # default: Vertex's Bayesian optimisation
    as_yaml = CliRunner().invoke(cli, ["render", str(path), "-o", "yaml"]).stdout
    assert yaml.safe_load(as_yaml) == json.loads(render(build_request(*planned(load_config(path))).body, "json"))
    to_tuning_proto(body)


def test_validate_summarises_the_study() -> None:
    result = CliRunner().invoke(cli, ["validate", str(REPO / "configs" / "tuning" / "grid-keras.yaml")])
    assert result.exit_code == 0
    assert ("tuning loss (minimize) by grid search over learning-rate, batch-size: 4 trials, 2 at a time"
            in result.stdout)


def test_a_trial_gets_its_values_appended_to_every_pool_but_the_reducers() -> None:
    config = load_config(REPO / "configs" / "reduction-server.yaml", overrides=[
        "tuning={metric: {name: loss, goal: minimize}, parameters: {lr: {type: double, min: 0.1, max: 1}}, "
        "max_trials: 2}"])
    body = build_tuning_dict(*planned(config))
    trial = trial_custom_job(body, "7", ["--lr=0.5"])
    pools = trial["jobSpec"]["workerPoolSpecs"]
    assert pools[0]["pythonPackageSpec"]["args"][-1] == "--lr=0.5"
    assert pools[1]["pythonPackageSpec"]["args"][-1] == "--lr=0.5"
    assert "args" not in pools[2]["containerSpec"]  # the Reduction Server image takes no trainer flags
    assert trial["displayName"].endswith("trial 7")


def test_a_dtensor_trial_gets_the_mesh_in_every_pool() -> None:
    config = load_config(REPO / "configs" / "model-parallel.yaml", overrides=[
        "tuning={metric: {name: loss, goal: minimize}, parameters: {learning-rate: {type: double, min: 0.01, "
        "max: 0.1}}, max_trials: 2}"])
    trial = trial_custom_job(build_tuning_dict(*planned(config)), "3", ["--learning-rate=0.05"])
    for pool in trial["jobSpec"]["workerPoolSpecs"]:
        env = {e["name"]: e["value"] for e in pool["pythonPackageSpec"]["env"]}
        assert env["VTRAIN_DISTRIBUTION_STRATEGY"] == "dtensor" and env["VTRAIN_DTENSOR_MESH"] == "batch=2,model=4"


def test_grid_bigger_than_max_trials_warns_with_the_count(tmp_path: Path) -> None:
    path = write_job(tmp_path, """
        name: t
        trainer: {container: {image_uri: us-docker.pkg.dev/p/r/t:1}}
        cluster: {chief: {machine_type: n1-standard-4}}
        tuning:
          metric: {name: acc, goal: maximize}
          parameters: {units: {type: integer, min: 1, max: 3}, opt: {type: categorical, values: [a, b]}}
          algorithm: grid
          max_trials: 10
        """)
    (warning,) = load_config(path).warnings
    assert warning.path == "tuning.max_trials" and "the grid has only 6 points" in warning.message


def test_estimate_multiplies_a_trial_by_trials_and_waves() -> None:
    path = str(REPO / "configs" / "tuning" / "bayesian-multi-worker.yaml")
    args = ["estimate", path, "--params", "10M", "--step-compute", "0.2s"]
    data = json.loads(CliRunner().invoke(cli, [*args, "-o", "json"]).stdout)
    study, ring = data["tuning"], data["ring"]
    assert (study["trials"], study["parallel"], study["waves"]) == (12, 3, 4)
    assert study["worker_hours_per_1000_steps"] == pytest.approx(12 * ring["worker_hours"])
    assert study["wall_seconds_per_1000_steps"] == pytest.approx(4 * 1000 / ring["steps_per_sec"])
    text = CliRunner().invoke(cli, args).stdout
    assert "tuning: 12 trials, 3 at a time (4 waves), ring; per 1,000 steps of every trial:" in text
    plain = json.loads(CliRunner().invoke(cli, ["estimate", str(REPO / "configs" / "multi-worker-gpu.yaml"),
                                                "--params", "10M", "-o", "json"]).stdout)
    assert plain["tuning"] is None
