"""`load_config` takes a job file's path, its YAML text, or a mapping (issue 32, "Python API"): a notebook
needs no file. Text and mappings pass exactly the checks a file does; problems point at `<string>:LINE:COL`
for text and at `<mapping>` plus the key for a mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import planned
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.load import load_config
from vtrain.request.build import build_request

TEXT = """\
name: demo
region: us-central1
trainer:
  package_uris: [gs://b-1/t.tar.gz]
  module: t.task
  image: tf-cpu.2-17
cluster:
  chief: {machine_type: n1-standard-4}
  workers: {replicas: 2}
"""


def _problems(source: Any, **kwargs: Any) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        load_config(source, **kwargs)
    return info.value.problems


def test_text_and_mapping_give_the_job_the_file_gives(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(TEXT, encoding="utf-8")
    from_file = load_config(path)
    from_text, from_mapping = load_config(TEXT), load_config(yaml.safe_load(TEXT))
    assert from_text == from_file and from_mapping == from_file
    body = build_request(*planned(from_file)).body
    assert build_request(*planned(from_text)).body == body and build_request(*planned(from_mapping)).body == body


def test_an_error_in_yaml_text_points_at_string_line_and_column() -> None:
    [problem] = _problems(TEXT.replace("replicas: 2", "replicas: two"))
    assert (problem.file, problem.line, problem.column) == ("<string>", 9, 23)
    assert str(problem).startswith("<string>:9:23: cluster.workers.replicas: ")


def test_a_yaml_syntax_error_in_text_points_at_string_line_and_column() -> None:
    [problem] = _problems(TEXT.replace("  module: t.task\n", "  module: [t.task\n"))
    assert problem.file == "<string>" and problem.line is not None and problem.line >= 5
    assert "YAML syntax error" in problem.message
    assert str(problem).startswith(f"<string>:{problem.line}:{problem.column}: ")


def test_text_takes_overrides_and_they_are_reported_against_the_flag() -> None:
    workers = load_config(TEXT, ["cluster.workers.replicas=3"]).workers
    assert workers is not None and workers.replicas == 3
    [problem] = _problems(TEXT, overrides=["cluster.workers.replicas=-1"])
    assert problem.file == "--set cluster.workers.replicas=-1"


def test_a_mapping_problem_names_the_key_without_lines_of_a_text_nobody_wrote() -> None:
    job = yaml.safe_load(TEXT)
    job["cluster"]["workers"]["replicas"] = "two"
    [problem] = _problems(job)
    assert (problem.file, problem.line, problem.column) == ("<mapping>", None, None)
    assert str(problem).startswith("<mapping>: cluster.workers.replicas: ")


def test_a_mapping_takes_tuples_and_refuses_what_is_not_plain_data() -> None:
    job = yaml.safe_load(TEXT)
    job["trainer"]["args"] = ("--epochs=2",)
    assert list(load_config(job).trainer.args) == ["--epochs=2"]
    job["trainer"]["args"] = [object()]
    [problem] = _problems(job)
    assert problem.path == "trainer.args[0]" and "'object' is not job-file data" in problem.message
    assert problem.file == "<mapping>"


def test_a_mapping_that_contains_itself_is_refused_in_one_line() -> None:
    job: dict[str, Any] = yaml.safe_load(TEXT)
    job["labels"] = job
    [problem] = _problems(job)
    assert "nested deeper than" in problem.message and problem.file == "<mapping>"


def test_warnings_of_a_mapping_have_no_lines_either() -> None:
    job = yaml.safe_load(TEXT)
    job["region"] = "us-central9"
    config_or_problems: list[Problem]
    try:
        config_or_problems = list(load_config(job).warnings)
    except ConfigError as err:
        config_or_problems = err.problems
    assert config_or_problems and all(p.line is None and p.file == "<mapping>" for p in config_or_problems)


def test_relative_paths_in_text_are_taken_from_the_current_directory(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "pyproject.toml").write_text("[project]\nname = 't'\nversion = '1'\n", encoding="utf-8")
    (tmp_path / "t" / "t").mkdir()
    (tmp_path / "t" / "t" / "task.py").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    text = TEXT.replace("  package_uris: [gs://b-1/t.tar.gz]\n", "  package: ./t\n")
    assert load_config(text + "staging_bucket: gs://b-1/s\n").trainer.package == tmp_path / "t"


def test_a_one_line_str_is_still_a_path(tmp_path: Path) -> None:
    [problem] = _problems(str(tmp_path / "nope.yaml"))
    assert "job file not found" in problem.message
