"""`vtrain validate -o github`: one GitHub Actions workflow command per problem, at its file, line and
column, escaped as GitHub's runner expects; several job files in one call (as pre-commit passes them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import REPO
from tests.helpers import write_job
from tests.scenarios.test_bad_inputs import FILES, corpus, expectations  # noqa: F401 (corpus is a fixture)
from vtrain.cli import cli
from vtrain.errors import Problem

_COMMAND = re.compile(r"^::(error|warning) (?P<props>[^:]*)::(?P<message>.*)$")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def annotations(out: str) -> list[tuple[str, dict[str, str], str]]:
    found = []
    for line in out.splitlines():
        match = _COMMAND.match(line)
        if match:
            props = dict(p.split("=", 1) for p in match["props"].split(","))
            found.append((line[2:].split(" ", 1)[0], props, match["message"]))
    return found


def _unescape(text: str) -> str:
    return text.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")


@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_one_annotation_per_problem_at_its_file_line_and_column(corpus: Path, name: str) -> None:  # noqa: F811
    from vtrain.errors import ConfigError
    from vtrain.jobfile.load import load_config

    file = corpus / name
    with pytest.raises(ConfigError) as info:
        load_config(file)
    problems = info.value.problems + info.value.warnings
    code, out, err = run("validate", str(file), "-o", "github")
    assert code == 2 and "Traceback" not in err
    got = annotations(out)
    assert len(got) == len(problems) == len(expectations(file)) + len(info.value.warnings)
    for (kind, props, message), problem in zip(got, problems, strict=True):
        assert kind == ("error" if problem.severity == "error" else "warning")
        assert _unescape(props["file"]) == str(file)
        assert int(props["line"]) == problem.line
        assert props.get("col") == (str(problem.column) if problem.column is not None else None)
        assert _unescape(message) == (f"{problem.path}: " if problem.path else "") + problem.message


def test_escaping_follows_githubs_rules() -> None:
    problem = Problem("labels.a", "100% wrong\nsecond line, too: yes", "dir,x/a:b.yaml", 3, 7)
    assert problem.github() == (
        "::error file=dir%2Cx/a%3Ab.yaml,line=3,col=7,title=vtrain%3A labels.a::"
        "labels.a: 100%25 wrong%0Asecond line, too: yes"
    )


def test_warnings_are_warning_commands_and_set_flags_are_no_file(tmp_path: Path) -> None:
    assert Problem("x", "m", "--set a=b", severity="warning").github() == "::warning title=vtrain%3A x::--set a=b: x: m"
    job = write_job(tmp_path, """
        name: ok
        trainer: {package_uris: [gs://my-bucket/t.tar.gz], module: t.task, image: tf-cpu.2-17}
        cluster: {chief: {machine_type: n1-standard-4}}
    """)
    code, out, _ = run("validate", str(job), "-o", "github", "--set", "cluster.chief.replicas=2")
    assert code == 2
    ((kind, props, message),) = annotations(out)
    assert kind == "error" and "file" not in props and message.startswith("--set cluster.chief.replicas=2: ")


def test_several_files_in_one_call_each_judged(tmp_path: Path, corpus: Path) -> None:  # noqa: F811
    good = REPO / "configs" / "quickstart.yaml"
    bad = corpus / "several_schema.yaml"
    code, out, err = run("validate", str(good), str(bad), "-o", "github")
    assert code == 2
    assert f"{good}: valid: " in out
    assert {_unescape(p["file"]) for _, p, _ in annotations(out)} == {str(bad)}
    assert err.strip() == "error: 1 of 2 job files invalid"
    code, out, _ = run("validate", str(good), str(bad), "-o", "json")
    assert code == 2 and {p["file"] for p in json.loads(out)} == {str(bad)}
    code, out, err = run("validate", str(good), str(good))
    assert code == 0 and out.count("valid: ") == 2
