"""The job file's shape: types, unknown keys, required keys, aliases, normalized output."""

from __future__ import annotations

from typing import Any

import pytest

from vtrain.jobfile.schema import JOB_SCHEMA, check_job, did_you_mean, parse_duration
from vtrain.jobfile.yamlpos import load_yaml

HEAD = """\
name: demo
trainer:
  container: {image_uri: us-docker.pkg.dev/p/r/t:1}
"""


def check(text: str) -> tuple[dict[str, Any] | None, list[tuple[str, int | None, str]]]:
    data, positions, problems = load_yaml(text, "job.yaml")
    assert problems == []
    out, found = check_job(data, positions)
    return out, [(p.path, p.line, p.message) for p in found]


def only_problem(text: str) -> tuple[str, int | None, str]:
    out, problems = check(text)
    assert out is None
    (problem,) = problems
    return problem


@pytest.mark.parametrize(
    ("word", "choices", "expected"),
    [
        ("regoin", ("name", "region"), " did you mean 'region'?"),
        ("SPOTT", ("standard", "spot"), " did you mean 'spot'?"),
        ("wrokers", ("chief", "workers"), " did you mean 'workers'?"),
        ("zzz", ("chief", "workers"), ""),
        (7, ("3x", "4"), ""),
    ],
)
def test_did_you_mean(word: Any, choices: tuple[str, ...], expected: str) -> None:
    assert did_you_mean(word, choices) == expected


@pytest.mark.parametrize(("value", "seconds"), [(0, 0), (1.9, 1), ("0s", 0), ("2d3h4m5s", 183845), ("  1H ", 3600)])
def test_parse_duration_edges(value: Any, seconds: int) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", [True, False, None, -1, [1], {"h": 1}, "1hh", "1.h", "s", float("inf"),
                                   float("nan")])
def test_parse_duration_rejects(value: Any) -> None:
    assert parse_duration(value) is None


def test_minimal_job_normalized() -> None:
    out, problems = check(HEAD + "cluster:\n  chief: {machine_type: n1-standard-4}\n")
    assert problems == []
    assert out == {
        "name": "demo",
        "trainer": {"container": {"image_uri": "us-docker.pkg.dev/p/r/t:1"}},
        "cluster": {"chief": {"machine_type": "n1-standard-4"}},
    }


def test_values_come_out_normalized() -> None:
    out, problems = check(HEAD + """\
  args: --verbose
  env: {EPOCHS: 3, RATE: 0.5, NAME: x}
distribution_strategy: Multi-Worker-Mirrored
reserved_ip_ranges: range-a
cluster:
  chief: {machine_type: n1-standard-4}
  worker: {replica_count: 2}
  ps: {replicas: 1}
scheduling: {strategy: FLEX-START, timeout: 1h30m, max_wait: 600}
reservation: {affinity: ANY}
""")
    assert problems == []
    assert out is not None
    assert out["trainer"]["args"] == ["--verbose"]
    assert out["trainer"]["env"] == {"EPOCHS": "3", "RATE": "0.5", "NAME": "x"}
    assert out["distribution_strategy"] == "multi_worker_mirrored"
    assert out["reserved_ip_ranges"] == ["range-a"]
    assert out["cluster"]["workers"] == {"replicas": 2}
    assert out["cluster"]["parameter_servers"] == {"replicas": 1}
    assert out["scheduling"] == {"strategy": "flex_start", "timeout": 5400, "max_wait": 600}
    assert out["reservation"] == {"affinity": "any"}


def test_aliases_keep_positions_under_the_canonical_path() -> None:
    data, positions, _ = load_yaml(HEAD + "cluster:\n  chief: {machine_type: n1-standard-4}\n  ps:\n    replicas: 2\n",
                                   "job.yaml")
    check_job(data, positions)
    assert positions.of(("cluster", "parameter_servers", "replicas")).line == 7
    assert positions.of(("cluster", "parameter_servers"), key=True).line == 6


def test_problems_name_the_written_alias() -> None:
    assert only_problem(HEAD + "cluster:\n  chief: {machine_type: n1-standard-4}\n  ps: {replicas: -1}\n") == (
        "cluster.ps.replicas", 6, "must be at least 0, got -1")


def test_durations_fit_a_protobuf_duration() -> None:
    text = HEAD + "cluster:\n  chief: {machine_type: n1-standard-4}\nscheduling: {timeout: 9999999999d}\n"
    assert only_problem(text) == (
        "scheduling.timeout", 6, "must be at most 315576000000s (10,000 years, the longest a protobuf Duration holds)")


def test_replicas_fit_the_int64_replica_count() -> None:
    text = HEAD + "cluster:\n  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 99999999999999999999}\n"
    assert only_problem(text) == (
        "cluster.workers.replicas", 6, "must be at most 9223372036854775807, got 99999999999999999999")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("name: [a]\n", ("name", 1, "expected text, got a list")),
        ("name: 12\n", ("name", 1, "expected text, got a number; quote it: '12'")),
        ("name: ~\n", ("name", 1, "expected text, got nothing (null)")),
        ("name: on\n", ("name", 1, "expected text, got a boolean; YAML reads yes/no/on/off/true/false as booleans, "
                                   "quote the text: 'on'")),
        ("distribution_strategy: 3\n", ("distribution_strategy", 1, "expected text (one of: auto, one_device, "
                                        "mirrored, multi_worker_mirrored, parameter_server, tpu, diloco, dtensor, "
                                        "horovod), got a number")),
        ("enable_web_access: 'yes'\n", ("enable_web_access", 1, "expected true or false, got the text 'yes'")),
        ("labels: [a, b]\n", ("labels", 1, "expected a mapping of names to values, got a list")),
        ("labels: {team: 3}\n", ("labels.team", 1, "expected text, got a number; quote it: '3'")),
        ("reserved_ip_ranges: [a, 1]\n", ("reserved_ip_ranges[1]", 1, "expected text, got a number; quote it: '1'")),
        ("reserved_ip_ranges: {a: 1}\n", ("reserved_ip_ranges", 1, "expected a list, got a mapping")),
        ("version: 0\n", ("version", 1, "must be at least 1, got 0")),
        ("version: 1.0\n", ("version", 1, "expected a whole number, got a number")),
        ("scheduling: {timeout: true}\n", ("scheduling.timeout", 1,
                                           "expected a duration like 90s, 30m, 24h or 7d, got a boolean")),
        ("scheduling: {strategy: preemptible}\n",
         ("scheduling.strategy", 1, "'preemptible' is not allowed; allowed: standard, spot, flex_start")),
        ("reservation: {affinity: specfic}\n", ("reservation.affinity", 1, "'specfic' is not allowed; allowed: none, "
                                                "any, specific; did you mean 'specific'?")),
        ("trainer: {env: {A: [1]}}\n", ("trainer.env.A", 1, "expected text or a number, got a list; an "
                                                 "environment value is one string")),
        ("trainer: {env: {A: no}}\n", ("trainer.env.A", 1, "expected text, got a boolean; quote it: 'no'")),
        ("trainer: {env: {A: }}\n", ("trainer.env.A", 1, "expected text, got nothing (null); quote it: ''")),
    ],
)  # fmt: skip
def test_type_problems(body: str, expected: tuple[str, int, str]) -> None:
    text = body + ("" if body.startswith("name") else "name: demo\n")
    text += "" if body.startswith("trainer") else "trainer: {container: {image_uri: x}}\n"
    out, problems = check(text + "cluster:\n  chief: {machine_type: n1-standard-4}\n")
    assert out is None
    assert expected in problems, problems
    assert len(problems) == 1, problems


def test_boot_disk_type_is_checked() -> None:
    path, line, message = only_problem(HEAD + "cluster:\n  chief:\n    machine_type: n1-standard-4\n"
                                              "    boot_disk: {type: pd-ssdd, size_gb: 200}\n")
    assert (path, line) == ("cluster.chief.boot_disk.type", 7)
    assert message == ("'pd-ssdd' is not allowed; allowed: pd-ssd, pd-standard, hyperdisk-balanced; "
                       "did you mean 'pd-ssd'?")


def test_unknown_keys_at_every_level_collected_in_one_run() -> None:
    out, problems = check("""\
nmae: demo
name: demo
trainer:
  containr: {image_uri: x}
cluster:
  chief:
    machine: n1-standard-4
  workers: {replicas: 2, acelerator: t4}
schedulng: {}
""")
    # Unknown keys are reported but the rest still comes out, so the rules can check it too.
    assert out == {"name": "demo", "trainer": {}, "cluster": {"chief": {}, "workers": {"replicas": 2}}}
    assert [(p, line, m.split(";")[-1].strip()) for p, line, m in problems] == [
        ("nmae", 1, "did you mean 'name'?"),
        ("trainer.containr", 4, "did you mean 'container'?"),
        ("cluster.chief.machine", 7, "did you mean 'machine_type'?"),
        ("cluster.workers.acelerator", 8, "did you mean 'accelerator'?"),
        ("schedulng", 9, "did you mean 'scheduling'?"),
    ]
    assert problems[0][2].startswith("unknown key 'nmae' in the top level; allowed: version, name, project, ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: demo\n", [("", 1, "missing required key 'trainer' at the top level; add it (required: name, "
                               "trainer, cluster)"),
                          ("", 1, "missing required key 'cluster' at the top level; add it (required: name, "
                                  "trainer, cluster)")]),
        (HEAD + "cluster: {}\n", [("cluster", 4, "missing required key 'chief' in cluster; add it (required: "
                                                 "chief)")]),
        (HEAD + "cluster: []\n", [("cluster", 4, "expected a mapping with keys chief, workers, parameter_servers, "
                                                 "reduction_server, evaluator, got a list")]),
    ],
)  # fmt: skip
def test_required_keys(text: str, expected: list[tuple[str, int, str]]) -> None:
    out, problems = check(text)
    assert out is None and problems == expected


def test_empty_document() -> None:
    out, problems = check_job(None, load_yaml("", "job.yaml")[1])
    assert out is None
    assert [(p.path, p.line, p.message) for p in problems] == [
        ("", 1, "the job file is empty; it needs at least name, trainer and cluster")]


@pytest.mark.parametrize("role", ["chief", "workers", "parameter_servers", "evaluator"])
def test_auto_is_only_for_reducers(role: str) -> None:
    chief = "" if role == "chief" else "  chief: {machine_type: n1-standard-4}\n"
    problem = only_problem(HEAD + f"cluster:\n{chief}  {role}: {{replicas: auto}}\n")
    assert problem[0] == f"cluster.{role}.replicas"
    assert problem[2] == "'auto' is only for cluster.reduction_server.replicas; give a whole number here"


def test_reducers_accept_auto() -> None:
    out, problems = check(HEAD + "cluster:\n  chief: {machine_type: n1-standard-4}\n  reducers: {replicas: Auto}\n")
    assert problems == [] and out is not None
    assert out["cluster"]["reduction_server"] == {"replicas": "auto"}


def test_schema_lists_every_top_level_key_the_docs_promise() -> None:
    assert {"name", "trainer", "cluster", "scheduling", "reservation", "labels", "region"} <= set(JOB_SCHEMA.fields)
