"""Issue 20, class 3: a text field keeps what the user wrote. YAML 1.1 reads unquoted 01234 as octal
668, 1.10 as 1.1, 0x1F as 31, 1:30 as 90 and off as False; a text field used to render the converted
value (env ZIP: 01234 became "668", an env key off: became "False"), and the "quote it" hint quoted
the conversion ('493' for 0755), so following it corrupted the argument. Every value or key that is
text now takes the scalar's source text, or is refused with a hint quoting the text as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.helpers import write_job
from vtrain.cli import cli

#: Unquoted scalars YAML 1.1 turns into something else, with the text that was written.
CONVERTED = ["01234", "0755", "1.10", "0x1F", "1:30", "1_000", "1e3", ".5", "+12", "0o17"]
BOOLEAN = ["off", "yes", "No", "ON"]

JOB = """
name: texts
trainer:
  container: {{image_uri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest}}
  env: {{{env}}}
cluster:
  chief: {{machine_type: n1-standard-4}}
"""


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


def _env(out: str) -> dict[str, str]:
    pool = json.loads(out)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    return {e["name"]: e["value"] for e in pool["env"]}


def test_env_values_keep_the_text_as_written(tmp_path: Path) -> None:
    env = ", ".join(f"V{i}: {text}" for i, text in enumerate(CONVERTED))
    code, out = _run("render", str(write_job(tmp_path, JOB.format(env=env))))
    assert code == 0, out
    assert [_env(out)[f"V{i}"] for i in range(len(CONVERTED))] == CONVERTED


def test_env_keys_keep_the_text_as_written(tmp_path: Path) -> None:
    env = ", ".join(f"{word}: v" for word in BOOLEAN)
    code, out = _run("render", str(write_job(tmp_path, JOB.format(env=env))))
    assert code == 0, out
    assert set(BOOLEAN) <= set(_env(out))


def test_set_values_keep_the_text_as_written(tmp_path: Path) -> None:
    job = write_job(tmp_path, JOB.format(env="A: x"))
    flags = [a for i, text in enumerate(CONVERTED) for a in ("--set", f"trainer.env.S{i}={text}")]
    code, out = _run("render", str(job), *flags, "--set", "trainer.env={off: 1.10}")
    assert code == 0, out
    assert _env(out) == {"off": "1.10", **{"VTRAIN_DISTRIBUTION_STRATEGY": "auto"}}
    code, out = _run("render", str(job), *flags)
    assert [_env(out)[f"S{i}"] for i in range(len(CONVERTED))] == CONVERTED


#: Of those, what PyYAML (YAML 1.1) really converts: 1e3 and 0o17 are already text there.
READ_AS_OTHER = [text for text in CONVERTED + BOOLEAN if not isinstance(yaml.safe_load(text), str)]


def test_the_cases_are_what_yaml_converts() -> None:
    assert {"01234", "0755", "1.10", "0x1F", "1:30", "off"} <= set(READ_AS_OTHER)
    assert yaml.safe_load("0755") == 493 and yaml.safe_load("1:30") == 90 and yaml.safe_load("off") is False


@pytest.mark.parametrize("text", READ_AS_OTHER)
@pytest.mark.parametrize("where", ["args", "label"])
def test_a_refused_value_is_quoted_as_written_in_the_hint(tmp_path: Path, text: str, where: str) -> None:
    extra = f"  args: [{text}]\n" if where == "args" else ""
    job = JOB.format(env="A: x").replace("trainer:\n", f"labels: {{team: {text}}}\ntrainer:\n" if where == "label"
                                         else "trainer:\n" + extra)
    code, out = _run("validate", str(write_job(tmp_path, job)))
    assert code == 2 and f"'{text}'" in out, out
    code, out = _run("validate", str(write_job(tmp_path, JOB.format(env="A: x"))), "--set",
                     f"trainer.args=[{text}]" if where == "args" else f"labels.team={text}")
    assert code == 2 and f"'{text}'" in out, out
    if where == "args":  # following the hint works (a label has rules of its own: lower case, no dots)
        assert _run("validate", str(write_job(tmp_path, job.replace(f"[{text}]", f"['{text}']"))))[0] == 0


@pytest.mark.parametrize(("flag", "path"), [("name=~", "name"), ("cluster.chief=null", "cluster.chief")])
def test_a_required_key_removed_by_set_blames_the_flag(tmp_path: Path, flag: str, path: str) -> None:
    """Issue 20, class 14: `--set name=~` was reported at the job file's first line."""
    code, out = _run("validate", str(write_job(tmp_path, JOB.format(env="A: x"))), "--set", flag)
    assert code == 2 and out.startswith(f"--set {flag}: {path}: missing required key"), out
