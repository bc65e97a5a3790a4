"""A key and its alias together are one key given twice: a duplicate, never a silent merge.

The schema accepts a few second spellings (`replica_count` for `replicas`, `worker` for `workers`,
`ps`, `reducers`). Written next to the canonical key, in the file or through `--set`, the one that
came last used to win in silence (a whole pool's machine could vanish). Every alias the schema
knows is found by walking it, so a new alias is covered without touching this test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from vtrain.cli import cli
from vtrain.errors import ConfigError
from vtrain.jobfile.load import parse_config
from vtrain.jobfile.schema import JOB_SCHEMA, Obj, check_job
from vtrain.jobfile.yamlpos import load_yaml

BASE: dict[str, Any] = {
    "name": "demo",
    "trainer": {"container": {"image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"}},
    "cluster": {"chief": {"machine_type": "n1-standard-4"}},
}


def alias_sites(obj: Obj = JOB_SCHEMA, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str, str]]:
    """(mapping path, alias, canonical) for every alias, reached under every spelling of its parents."""
    for alias, canonical in obj.aliases.items():
        yield path, alias, canonical
    spellings: dict[str, list[str]] = {name: [name] for name in obj.fields}
    for alias, canonical in obj.aliases.items():
        spellings[canonical].append(alias)
    for name, field in obj.fields.items():
        if isinstance(field, Obj):
            for spelling in spellings[name]:
                yield from alias_sites(field, (*path, spelling))


SITES = sorted(alias_sites())


def test_the_walk_finds_every_alias_the_schema_has() -> None:
    found = {(alias, canonical) for _, alias, canonical in SITES}
    assert found == {("replica_count", "replicas"), ("worker", "workers"), ("ps", "parameter_servers"),
                     ("reducers", "reduction_server"), ("metrics", "metric")}
    # replica_count in each of the five pools, under each spelling of the pool's name, and in DiLoCo's
    # second learner pool
    assert sum(alias == "replica_count" for _, alias, _ in SITES) == 9


def sample(canonical: str) -> Any:
    return 1 if canonical == "replicas" else {"replicas": 1}


def with_keys(path: tuple[str, ...], *pairs: tuple[str, Any]) -> dict[str, Any]:
    """BASE with these keys (in this order) in the mapping at `path`."""
    data = yaml.safe_load(yaml.safe_dump(BASE))
    node = data
    for part in path:
        node = node.setdefault(part, {})
    for key, value in pairs:
        node.pop(key, None)
        node[key] = value
    return data


@pytest.mark.parametrize(("path", "alias", "canonical"), SITES, ids=[".".join((*p, a)) for p, a, _ in SITES])
@pytest.mark.parametrize("alias_first", [False, True], ids=["canonical-first", "alias-first"])
def test_alias_and_canonical_in_one_file_is_a_duplicate_with_both_positions(
    path: tuple[str, ...], alias: str, canonical: str, alias_first: bool
) -> None:
    first, second = (alias, canonical) if alias_first else (canonical, alias)
    text = yaml.safe_dump(with_keys(path, (first, sample(canonical)), (second, sample(canonical))), sort_keys=False)
    data, positions, problems = load_yaml(text, "job.yaml")
    assert problems == []
    _, found = check_job(data, positions)
    (problem,) = [p for p in found if p.message.startswith("duplicate key")]  # (a bare block may miss keys)
    at_first = positions.keys[(*path, first)]
    at_second = positions.keys[(*path, second)]
    assert (problem.path, problem.line, problem.column) == (".".join((*path, second)), at_second.line, at_second.column)
    assert f"at job.yaml:{at_first.line}:{at_first.column}" in problem.message
    assert problem.message.startswith("duplicate key: ") and problem.message.endswith("; keep only one")
    assert f"'{alias}'" in problem.message and f"'{canonical}'" in problem.message


def duplicates(err: ConfigError) -> list[Any]:
    """The duplicate-key problems (a reducer pool alone also breaks rules about GPU workers)."""
    return [p for p in err.problems if p.message.startswith("duplicate key")]


@pytest.mark.parametrize(("path", "alias", "canonical"), SITES, ids=[".".join((*p, a)) for p, a, _ in SITES])
def test_through_set_the_flag_is_the_position(path: tuple[str, ...], alias: str, canonical: str) -> None:
    text = yaml.safe_dump(with_keys(path, (canonical, sample(canonical))), sort_keys=False)
    value = "1" if canonical == "replicas" else "{replicas: 1}"
    flag = f"{'.'.join((*path, alias))}={value}"
    with pytest.raises(ConfigError) as err:
        parse_config(text, "job.yaml", overrides=[flag])
    (problem,) = duplicates(err.value)
    assert problem.file == f"--set {flag}"
    assert problem.path == ".".join((*path, alias))
    assert "at job.yaml:" in problem.message and "keep only one" in problem.message
    # two flags, two spellings: both positions are flags
    other = f"{'.'.join((*path, canonical))}={value}"
    with pytest.raises(ConfigError) as err:
        parse_config(yaml.safe_dump(BASE), "job.yaml", overrides=[other, flag])
    (problem,) = duplicates(err.value)
    assert problem.file == f"--set {flag}" and f"by --set {other}" in problem.message


def test_a_whole_pool_given_twice_no_longer_loses_its_machine(tmp_path: Path) -> None:
    """The sample from the QA pass, end to end through the CLI: exit 2, both lines named."""
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: demo\n"
        "trainer: {container: {image_uri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest}}\n"
        "cluster:\n"
        "  chief: {machine_type: n1-standard-4}\n"
        "  workers: {replicas: 2, replica_count: 5, machine_type: n1-highmem-8}\n"
        "  worker: {replicas: 3}\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(job), "--set", "cluster.ps.replicas=1",
                                      "--set", "cluster.parameter_servers.replica_count=1"])
    assert result.exit_code == 2, result.output
    lines = result.output.splitlines()
    assert lines == [  # sorted by file: the flag's problem first
        "--set cluster.parameter_servers.replica_count=1: cluster.parameter_servers: duplicate key: 'ps' (another "
        "name for 'parameter_servers') is already given by --set cluster.ps.replicas=1; keep only one",
        f"{job}:5:26: cluster.workers.replica_count: duplicate key: 'replica_count' is another name for "
        f"'replicas', already given at {job}:5:13; keep only one",
        f"{job}:6:3: cluster.worker: duplicate key: 'worker' is another name for 'workers', already given at "
        f"{job}:5:3; keep only one",
        "error: 3 problems in the job file",
    ]


def test_the_same_key_set_twice_is_still_an_override() -> None:
    """Only different spellings are duplicates: `--set k=1 --set k=2` keeps its documented meaning."""
    config = parse_config(yaml.safe_dump(BASE), "job.yaml", overrides=["cluster.workers.replicas=1",
                                                                       "cluster.workers.replicas=4"])
    assert config.workers is not None and config.workers.replicas == 4
