"""Issue 46, class 3: job values that became tracebacks. A whole number of more than 4,300 digits anywhere in
a job file or a `--set` raised Python's ValueError (int/str conversion limit) from every command, and so did one
written in hex or base 60 once a message printed it; `load_config` of a mapping with enum values or 10**5000
raised PyYAML's RepresenterError or the same ValueError. Every scalar now passes one conversion
(`vtrain.jobfile.yamlpos.job_value`), which answers with vtrain's ConfigError at file:line:key and raises
nothing else, whatever the value: huge numbers, inf and nan, tags PyYAML cannot construct, dates, enum members,
subclasses of plain types, deep nesting, objects that are not data."""

from __future__ import annotations

import datetime
import decimal
import enum
import fractions
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vtrain.cli import cli
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.load import load_config
from vtrain.jobfile.yamlpos import MAX_INT_DIGITS, job_value, load_yaml

JOB = """\
name: values
region: us-central1
trainer:
  package_uris: [gs://b-1/t.tar.gz]
  module: t.task
  image: tf-cpu.2-17
  args: [--seed=1]
  env: {SEED: "1"}
cluster:
  chief: {machine_type: n1-standard-4}
  workers: {replicas: 1}
labels: {team: ml}
"""
HUGE = "9" * 5000
LIMIT = f"a job value has at most {MAX_INT_DIGITS:,} (Vertex takes 64-bit integers)"


def _problems(source: Any, overrides: tuple[str, ...] = ()) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        load_config(source, list(overrides))
    return info.value.problems


class Color(str, enum.Enum):
    RED = "red"


class Count(enum.IntEnum):
    TWO = 2


class Plain(enum.Enum):
    A = "a"


class Text(str):
    pass


class Real(float):  # numpy's float64 is a float subclass too
    pass


# --------------------------------------------------------------------------- in a job file


@pytest.mark.parametrize(("line", "replaced", "key"), [
    ("  workers: {replicas: 1}", f"  workers: {{replicas: {HUGE}}}", "cluster.workers.replicas"),
    ("labels: {team: ml}", f"labels: {{team: {HUGE}}}", "labels.team"),
    ("  args: [--seed=1]", f"  args: [{HUGE}]", "trainer.args[0]"),
    ('  env: {SEED: "1"}', f"  env: {{SEED: -{HUGE}}}", "trainer.env.SEED"),
    ("labels: {team: ml}", f"labels: {{team: ml}}\nvertex: {{jobSpec: {{x: {HUGE}}}}}", "vertex.jobSpec.x"),
    ("  workers: {replicas: 1}", f"  workers: {{replicas: 0x{'f' * 5000}}}", "cluster.workers.replicas"),
    ("  workers: {replicas: 1}", f"  workers: {{replicas: 1{':59' * 3000}}}", "cluster.workers.replicas"),
    ("  workers: {replicas: 1}", f"  workers: {{replicas: +1_{'0' * 5000}}}", "cluster.workers.replicas"),
])
def test_a_whole_number_past_the_conversion_limit_is_one_problem_at_its_key(tmp_path: Path, line: str,
                                                                              replaced: str, key: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(JOB.replace(line, replaced), encoding="utf-8")
    [problem] = [p for p in _problems(path) if "digits" in p.message]
    assert problem.path == key and problem.file == str(path) and problem.line is not None
    assert LIMIT in problem.message and problem.message.endswith("quote it if it is text")


def test_a_whole_number_as_a_key_is_one_problem_too(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(JOB.replace("labels: {team: ml}", f"labels:\n  ? {HUGE}\n  : ml"), encoding="utf-8")
    [problem] = _problems(path)
    assert (problem.path, problem.line, problem.column) == ("labels", 13, 5) and LIMIT in problem.message


def test_the_limit_is_the_limit_and_not_one_digit_less() -> None:
    data, _, problems = load_yaml(f"a: {'9' * MAX_INT_DIGITS}\nb: {'9' * (MAX_INT_DIGITS + 3)}\n", "f.yaml")
    assert data == {"a": int("9" * MAX_INT_DIGITS), "b": None}
    assert [(p.path, p.line) for p in problems] == [("b", 2)]
    assert f"a whole number of {MAX_INT_DIGITS + 3:,} digits" in problems[0].message


@pytest.mark.parametrize("override", [f"cluster.workers.replicas={HUGE}", f"labels.x=-{HUGE}",
                                      f"trainer.args=[{HUGE}]", f"cluster.workers.replicas=0b{'1' * 20000}"])
def test_a_set_value_past_the_limit_blames_the_flag(override: str) -> None:
    [problem] = _problems(JOB, (override,))
    assert problem.file is not None and problem.file.startswith("--set ") and LIMIT in problem.message
    assert len(str(problem)) < 600  # the flag is shown shortened, not 5,000 digits


@pytest.mark.parametrize(("value", "said"), [
    ("!!bool maybe", "'maybe' is not a valid !!bool value"),
    ("!!int x", "'x' is not a valid !!int value"),
    ("!!int ''", "'' is not a valid !!int value"),
    ("!!float ''", "'' is not a valid !!float value"),
    ("!!float 1.2.3", "'1.2.3' is not a valid !!float value"),
    ("!!binary AAAA", "'bytes' is not job-file data"),
    ("!!binary 'é'", "failed to convert base64 data into ascii"),  # PyYAML's own YAMLError, also one line
])
def test_a_scalar_yaml_cannot_construct_is_one_problem(value: str, said: str) -> None:
    problems = _problems(JOB.replace("name: values", f"name: {value}"))
    assert any(said in p.message for p in problems), problems
    assert all(p.file == "<string>" for p in problems)


def test_a_date_is_the_text_as_written_wherever_text_is_taken() -> None:
    config = load_config(JOB.replace("labels: {team: ml}", "labels: {team: ml, since: 2024-01-31}")
                         .replace('SEED: "1"', "SEED: 2024-13-45"))  # month 13: PyYAML raised ValueError
    assert config.labels["since"] == "2024-01-31" and config.trainer.env["SEED"] == "2024-13-45"
    [problem] = _problems(JOB, ("cluster.workers.replicas=2024-01-31 10:00:00",))
    assert problem.message == "expected a whole number, got the text '2024-01-31 10:00:00'"


@pytest.mark.parametrize("override", ["cluster.workers.replicas=.inf", "cluster.workers.replicas=.nan",
                                      "cluster.workers.replicas=1e400", "labels.x=.nan", "labels.x=-.inf"])
def test_inf_and_nan_are_problems_where_they_do_not_belong(override: str) -> None:
    [problem] = _problems(JOB, (override,))
    assert problem.file == f"--set {override}"


def test_every_command_that_loads_a_job_says_one_line(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(JOB.replace("labels: {team: ml}", f"labels: {{team: {HUGE}}}"), encoding="utf-8")
    for command in (["validate"], ["render"], ["submit", "--dry-run"], ["local"], ["doctor"]):
        done = CliRunner().invoke(cli, [*command, str(path)])
        assert done.exit_code == 2 and done.exception is None or isinstance(done.exception, SystemExit), \
            (command, done.output)
        assert f"{path}:12:" in done.output and "labels.team: a whole number of 5,000 digits" in done.output, \
            (command, done.output)


# --------------------------------------------------------------------------- a mapping


def test_enum_members_and_subclasses_of_plain_types_are_their_plain_values() -> None:
    job = yaml.safe_load(JOB)
    job["labels"] = {"team": Color.RED, Text("owner"): Text("me"), "n": Count.TWO}
    job["cluster"]["workers"]["replicas"] = Count.TWO
    job["trainer"]["args"] = [Text("--lr"), Real(0.5)]
    with pytest.raises(ConfigError) as info:  # a label value is text: the IntEnum is a number, as json.dumps says
        load_config(job)
    assert sorted((p.path, p.message) for p in info.value.problems) == [
        ("labels.n", "expected text, got a number; quote it: '2'"),
        ("trainer.args[1]", "expected text, got a number; quote it: '0.5'")]
    job["labels"]["n"] = "2"
    job["trainer"]["args"] = [Text("--lr")]
    config = load_config(job)
    assert config.labels["team"] == "red" and type(config.labels["owner"]) is str
    assert config.workers is not None and config.workers.replicas == 2 and type(config.workers.replicas) is int


@pytest.mark.parametrize(("value", "said"), [
    (Plain.A, "'Plain' is not job-file data (an enum member: give its .value)"),
    (10**5000, f"a whole number of more than {MAX_INT_DIGITS:,} digits; {LIMIT}"),
    (-(10**5000), f"a whole number of more than {MAX_INT_DIGITS:,} digits; {LIMIT}"),
    (decimal.Decimal("1.5"), "'Decimal' is not job-file data"),
    (fractions.Fraction(1, 3), "'Fraction' is not job-file data"),
    (datetime.date(2024, 1, 1), "'date' is not job-file data"),
    (b"bytes", "'bytes' is not job-file data"),
    ({1, 2}, "'set' is not job-file data"),
    (1j, "'complex' is not job-file data"),
], ids=lambda v: type(v).__name__ if not isinstance(v, str) else v[:20])
def test_a_mapping_value_that_is_not_plain_data_is_one_problem_at_its_key(value: Any, said: str) -> None:
    job = yaml.safe_load(JOB)
    job["labels"]["team"] = value
    [problem] = _problems(job)
    assert (problem.file, problem.path) == ("<mapping>", "labels.team") and problem.message.startswith(said)


@pytest.mark.parametrize("key", [10**5000, Plain.A, (1, 2), None, b"k"], ids=lambda v: type(v).__name__)
def test_a_mapping_key_that_is_not_plain_is_one_problem(key: Any) -> None:
    job = yaml.safe_load(JOB)
    job["labels"] = {key: "x"}
    [problem] = _problems(job)
    assert (problem.path, problem.message) == ("labels", f"mapping keys must be text, got {type(key).__name__!r}")


def test_job_value_never_raises_and_keeps_plain_values_plain() -> None:
    assert job_value(True) == (True, None) and job_value(None) == (None, None)
    assert job_value(Count.TWO) == (2, None) and type(job_value(Count.TWO)[0]) is int
    assert job_value(Color.RED) == ("red", None) and type(job_value(Color.RED)[0]) is str
    assert job_value(10**4299) == (10**4299, None)
    assert job_value(10**4300)[1] is not None and job_value(object())[1] is not None


# --------------------------------------------------------------------------- any value at all

_huge = st.builds(lambda e, s: s * 10**e, st.integers(0, 6000), st.sampled_from([1, -1]))
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), _huge, st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40), st.binary(max_size=8), st.sampled_from([Color.RED, Count.TWO, Plain.A, Text("t"),
                                                                   Real(1.5), decimal.Decimal("nan"),
                                                                   datetime.datetime(2024, 1, 1), 1j]),
)
_keys = st.one_of(st.text(max_size=12), st.integers(), _huge, st.booleans(), st.none(), st.sampled_from([Plain.A]))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(_keys, inner, max_size=4)), max_leaves=20)
_places = st.sampled_from([("labels",), ("trainer", "env"), ("trainer", "args"), ("vertex",), ("name",),
                           ("cluster", "workers", "replicas"), ("tuning",), ("scheduling", "timeout"), ("model",)])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_places, _values)
def test_any_python_value_anywhere_in_a_mapping_is_a_job_or_a_config_error(place: tuple[str, ...], value: Any) -> None:
    job: dict[str, Any] = yaml.safe_load(JOB)
    node = job
    for key in place[:-1]:
        node = node.setdefault(key, {})
    node[place[-1]] = value
    try:
        load_config(job)
    except ConfigError as err:
        assert all(isinstance(p, Problem) for p in err.problems)
        str(err)  # it prints


_yaml_scalars = st.one_of(
    st.builds(lambda n, d: d * n, st.integers(1, 9000), st.sampled_from(["9", "1_", "0", "f"])),
    st.builds(lambda p, n: p + "1" * n, st.sampled_from(["0x", "0b", "-0x", "+", "-", "0o", "0"]),
              st.integers(1, 20000)),
    st.builds(lambda n: "1" + ":59" * n, st.integers(1, 5000)),
    st.builds(lambda t, v: f"{t} {v}", st.sampled_from(["!!int", "!!float", "!!bool", "!!timestamp", "!!binary",
                                                        "!!str", "!!null", "!!set", "!!omap", "!!python/int"]),
              st.sampled_from(["", "''", "x", "1", "1e999", "2024-99-99", "AAAA", "%", "{a: 1}", "[1]", "maybe"])),
    st.sampled_from([".inf", "-.inf", ".nan", "1e400", "-1e400", "2024-13-45", "2001-12-14t21:59:43.10-99:00",
                     "0x", "0b", "1:", "~", "null", "yes", "0o7", "1__0", "190:20:30.15"]),
    st.text(max_size=30),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["name", "labels.team", "trainer.args", "trainer.env.SEED", "cluster.workers.replicas",
                        "scheduling.timeout", "vertex.jobSpec.x", "cluster.chief.accelerator_count"]), _yaml_scalars)
def test_any_set_value_is_a_job_or_a_config_error(key: str, value: str) -> None:
    try:
        load_config(JOB, [f"{key}={value}"])
    except ConfigError as err:
        str(err)
