"""Issue 24's tuning keys: per-parameter defaults, conditional parameters (parent + parent_values),
decay-curve and convex early stopping, and measurement_selection (always sent, so Vertex and `vtrain local`
rank trials alike). Mistakes are refused at their key; the emulator accepts what vtrain builds."""

from __future__ import annotations

import json
import textwrap

import google.cloud.aiplatform_v1  # noqa: F401 - its import (seconds) is paid at collection, not by a test
import pytest

from tests.conftest import REPO
from tests.helpers import planned
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.load import load_config, parse_config
from vtrain.local.studies import Trial, tuning_from_body
from vtrain.request.build import build_request
from vtrain.request.tuning_job import to_tuning_proto

HEAD = """\
name: tune
trainer: {package_uris: [gs://my-bucket/t-0.1.tar.gz], module: trainer.task}
cluster: {chief: {machine_type: n1-standard-4}}
tuning:
  metric: {name: acc, goal: maximize}
  max_trials: 4
"""


def config(tuning: str, **kwargs: object):  # noqa: ANN201 - a JobConfig
    return parse_config(HEAD + textwrap.indent(textwrap.dedent(tuning), "  "), "job.yaml", **kwargs)


def errors(tuning: str) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        config(tuning)
    return [p for p in info.value.problems if p.severity == "error"]


def test_the_golden_study_parses_strictly_and_the_emulator_accepts_it() -> None:
    from vtrain.emulator.tuning import check_tuning_job, parse_tuning_job

    body = build_request(*planned(load_config(REPO / "configs" / "tuning" / "conditional.yaml"))).body
    to_tuning_proto(body)
    check_tuning_job(parse_tuning_job(json.dumps(body).encode()))
    optimizer = body["studySpec"]["parameters"][0]
    assert [c["parameterSpec"]["parameterId"] for c in optimizer["conditionalParameterSpecs"]] == ["momentum",
                                                                                                   "beta-1"]
    assert [p["parameterId"] for p in body["studySpec"]["parameters"]] == ["optimizer", "batch-size"]


def test_an_integer_parent_sends_int64_values_and_nesting_goes_deep() -> None:
    body = build_request(*planned(config("""\
        parameters:
          layers: {type: integer, min: 1, max: 4}
          width: {type: discrete, values: [64, 128], parent: layers, parent_values: [3, 4]}
          dropout: {type: double, min: 0.0, max: 0.5, parent: width, parent_values: [128]}
        """))).body
    layers = body["studySpec"]["parameters"][0]
    width = layers["conditionalParameterSpecs"][0]
    assert width["parentIntValues"] == {"values": ["3", "4"]}
    assert width["parameterSpec"]["conditionalParameterSpecs"][0]["parentDiscreteValues"] == {"values": [128.0]}
    to_tuning_proto(body)


@pytest.mark.parametrize(("word", "key"), [("median", "medianAutomatedStoppingSpec"),
                                           ("decay_curve", "decayCurveStoppingSpec"),
                                           ("convex", "convexAutomatedStoppingSpec")])
def test_each_early_stopping_rule_is_its_spec_and_reads_back(word: str, key: str) -> None:
    body = build_request(*planned(config(f"parameters: {{lr: {{type: double, min: 0.1, max: 1}}}}\n"
                                         f"early_stopping: {word}\nmeasurement_selection: best\n"))).body
    assert body["studySpec"][key] == {} and body["studySpec"]["measurementSelectionType"] == "BEST_MEASUREMENT"
    to_tuning_proto(body)  # key order is the proto's: the round trip in test_tuning_spec compares it
    back = tuning_from_body(body)
    assert (back.early_stopping, back.measurement_selection) == (word, "best")


def test_measurement_selection_is_always_sent_and_last_by_default() -> None:
    body = build_request(*planned(config("parameters: {lr: {type: double, min: 0.1, max: 1}}\n"))).body
    assert body["studySpec"]["measurementSelectionType"] == "LAST_MEASUREMENT"


def test_a_trials_final_value_is_the_last_or_the_best_report(tmp_path) -> None:  # noqa: ANN001
    reports = [(1, 0.5), (2, 0.9), (3, 0.7)]
    assert Trial("1", {}, [], tmp_path, reports=reports).final == 0.7
    assert Trial("1", {}, [], tmp_path, reports=reports, pick="best").final_report == (2, 0.9)
    assert Trial("1", {}, [], tmp_path, reports=reports, pick="best", maximize=False).final == 0.5


@pytest.mark.parametrize(("tuning", "path", "words"), [
    ("parameters: {lr: {type: double, min: 0.1, max: 1, default: 2}}", "tuning.parameters.lr.default",
     "a number from 0.1 to 1"),
    ("parameters: {n: {type: integer, min: 1, max: 8, default: 2.5}}", "tuning.parameters.n.default",
     "a whole number from 1 to 8"),
    ("parameters: {o: {type: categorical, values: [sgd, adam], default: adamw}}", "tuning.parameters.o.default",
     "one of sgd, adam"),
    ("parameters: {b: {type: discrete, values: [16, 32], default: 64}}", "tuning.parameters.b.default",
     "one of 16, 32"),
    ("parameters:\n  optimizer: {type: categorical, values: [sgd]}\n  m: {type: double, min: 0, max: 1, "
     "parent: optimiser, parent_values: [sgd]}", "tuning.parameters.m.parent", "did you mean 'optimizer'?"),
    ("parameters:\n  lr: {type: double, min: 0.1, max: 1}\n  m: {type: double, min: 0, max: 1, parent: lr, "
     "parent_values: [0.5]}", "tuning.parameters.m.parent", "a parent must be integer, discrete or categorical"),
    ("parameters:\n  o: {type: categorical, values: [sgd]}\n  m: {type: double, min: 0, max: 1, parent: o}",
     "tuning.parameters.m.parent_values", "needs parent_values"),
    ("parameters:\n  o: {type: categorical, values: [sgd]}\n  m: {type: double, min: 0, max: 1, parent: o, "
     "parent_values: [adam]}", "tuning.parameters.m.parent_values[0]", "not a value of o"),
    ("parameters: {m: {type: double, min: 0, max: 1, parent_values: [a]}}", "tuning.parameters.m.parent_values",
     "needs parent"),
    ("parameters:\n  a: {type: discrete, values: [1], parent: b, parent_values: [1]}\n"
     "  b: {type: discrete, values: [1], parent: a, parent_values: [1]}", "tuning.parameters.a.parent", "circle"),
    ("parameters: {lr: {type: double, min: 0.1, max: 1}}\nmeasurement_selection: first",
     "tuning.measurement_selection", "allowed: last, best"),
])
def test_each_tuning_mistake_is_refused_at_its_key(tuning: str, path: str, words: str) -> None:
    found = errors(tuning)
    assert found and found[0].path == path and words in found[0].message, found
    assert found[0].line is not None


def test_vtrain_local_says_what_it_does_not_apply() -> None:
    job = config("""\
        parameters: {lr: {type: double, min: 0.1, max: 1}}
        early_stopping: convex
        """, target="local")
    words = {w.path: w.message for w in job.warnings}
    assert "median early stopping only" in words["tuning.early_stopping"]


def test_local_studies_pass_a_conditional_parameter_only_under_its_parents_values() -> None:
    from vtrain.tuning import search

    body = build_request(*planned(load_config(REPO / "configs" / "tuning" / "conditional.yaml"))).body
    tuning = tuning_from_body(body)  # what `vtrain local` and the emulator read: the nesting, flattened
    momentum = tuning.parameter("momentum")
    assert (momentum.parent, momentum.parent_values) == ("optimizer", ("sgd",))
    random_search = search.make_searcher(tuning, seed=3)
    trials = [random_search.suggest() for _ in range(40)]
    assert all(("momentum" in t) == (t["optimizer"] == "sgd") for t in trials if t)
    assert all(("beta-1" in t) == (t["optimizer"] == "adam") for t in trials if t)
    assert {t["optimizer"] for t in trials if t} == {"sgd", "adam"}


def test_a_grid_runs_each_distinct_trial_once() -> None:
    from vtrain.tuning import search

    tuning = config("""\
        parameters:
          o: {type: categorical, values: [sgd, adam]}
          m: {type: discrete, values: [0.5, 0.9], parent: o, parent_values: [sgd]}
        algorithm: grid
        """).tuning  # max_trials 4 > 3 distinct points: validate warns with the right count (below)
    assert tuning is not None
    grid = search.make_searcher(tuning)
    points = list(iter(grid.suggest, None))
    assert points == [{"o": "sgd", "m": 0.5}, {"o": "sgd", "m": 0.9}, {"o": "adam"}]
    assert search.trial_args(tuning, points[2]) == ["--o=adam"]


def test_the_grids_size_counts_a_conditional_parameter_under_its_parents_values_only() -> None:
    job = config("""\
        parameters:
          o: {type: categorical, values: [sgd, adam]}
          m: {type: discrete, values: [0.5, 0.9], parent: o, parent_values: [sgd]}
        algorithm: grid
        """)
    assert any(w.path == "tuning.max_trials" and "only 3 points" in w.message for w in job.warnings)
