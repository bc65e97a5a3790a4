"""`vtrain init`: copies a template, writes a job file, never overwrites."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from vtrain.cli import cli
from vtrain.commands.trainer import TEMPLATES, job_name, template_files
from vtrain.jobfile.config import DtensorConfig

ROOT = Path(__file__).resolve().parents[2]


def files_under(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}


@pytest.mark.parametrize("template", TEMPLATES)
def test_init_copies_template_and_writes_job_file(tmp_path: Path, template: str) -> None:
    target = tmp_path / "Fraud Model_v2"
    result = CliRunner().invoke(cli, ["init", str(target), "--template", template])
    assert result.exit_code == 0, result.output
    expected = {rel.as_posix() for rel in template_files(template)} | {"vtrain.yaml", "vtrain.schema.json"}
    assert files_under(target) == expected
    assert result.output.splitlines()[-1] == f"next: vtrain validate {shlex.quote(str(target / 'vtrain.yaml'))}"
    source = ROOT / "trainer_templates" / template / "trainer" / "task.py"
    assert (target / "trainer" / "task.py").read_bytes() == source.read_bytes()
    job = yaml.safe_load((target / "vtrain.yaml").read_text())
    assert job["name"] == "fraud-model-v2"
    assert job["trainer"]["module"] == "trainer.task"
    assert (target / job["trainer"]["package"] / "pyproject.toml").is_file()
    assert job["staging_bucket"].startswith("gs://") and job["base_output_dir"].startswith("gs://")
    assert job["distribution_strategy"] == ("dtensor" if template == "model-parallel" else "auto")
    assert job.get("dtensor") == ({"mesh": {"batch": 2, "model": 2}} if template == "model-parallel" else None)
    assert job["cluster"] == {"chief": {"machine_type": "n1-standard-4"}, "workers": {"replicas": 1}}


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "vtrain.yaml").write_text("mine\n")
    result = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output == (
        f"error: refusing to overwrite existing file(s): {tmp_path / 'vtrain.yaml'}; nothing was written\n"
    )
    assert files_under(tmp_path) == {"vtrain.yaml"}
    assert (tmp_path / "vtrain.yaml").read_text() == "mine\n"


def test_init_options_and_json_output(tmp_path: Path) -> None:
    args = [
        "init",
        str(tmp_path / "t"),
        "-t",
        "custom-loop",
        "--name",
        "nightly",
        "--bucket",
        "gs://acme-ml/",
        "-o",
        "json",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["template"] == "custom-loop" and len(data["files"]) == len(template_files("custom-loop")) + 2
    job = yaml.safe_load((tmp_path / "t" / "vtrain.yaml").read_text())
    assert (job["name"], job["staging_bucket"], job["base_output_dir"]) == (
        "nightly",
        "gs://acme-ml/staging",
        "gs://acme-ml/nightly",
    )


@pytest.mark.parametrize("name", ["a: b # c", "true", "héllo wörld 日本", "'quoted'", "x\ty"])
def test_init_name_is_written_so_that_it_reads_back(tmp_path: Path, name: str) -> None:
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "t"), "--name", name])
    assert result.exit_code == 0, result.output
    job = yaml.safe_load((tmp_path / "t" / "vtrain.yaml").read_text())
    assert job["name"] == name
    assert job["base_output_dir"].startswith("gs://my-vtrain-bucket/") and " " not in job["base_output_dir"]
    result = CliRunner().invoke(cli, ["validate", str(tmp_path / "t" / "vtrain.yaml")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--bucket", "acme-ml"], "--bucket must look like gs://BUCKET"),
        (["--template", "pytorch"], "Invalid value for '-t' / '--template'"),
        (["--name", "x" * 129], "--name is 129 characters; Vertex allows at most 128"),
        (["--name", "  "], "--name must not be blank"),
    ],
)
def test_init_bad_options(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "t"), *args])
    assert result.exit_code in (1, 2) and message in result.output
    assert not (tmp_path / "t").exists()


def test_init_where_nothing_can_be_written_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "afile" / "t")])
    assert result.exit_code == 1
    assert result.output == f"error: cannot write {tmp_path / 'afile' / 't'}: Not a directory; nothing was written\n"


@pytest.mark.parametrize("name,expected", [("My_Proj", "my-proj"), ("2024 run", "job-2024-run"), ("__", "my-job")])
def test_job_name(tmp_path: Path, name: str, expected: str) -> None:
    assert job_name(tmp_path / name) == expected


def test_init_as_a_subprocess(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "vtrain", "init", str(tmp_path / "x")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "x" / "vtrain.yaml").is_file()


@pytest.mark.parametrize("template", TEMPLATES)
def test_written_job_file_loads_and_validates(tmp_path: Path, template: str) -> None:
    import vtrain

    target = tmp_path / "proj"
    assert CliRunner().invoke(cli, ["init", str(target), "-t", template]).exit_code == 0
    config = vtrain.load_config(target / "vtrain.yaml")
    dtensor = template == "model-parallel"  # its job file shards the model: 2 replicas x 2 logical CPUs
    assert config.name == "proj" and config.distribution_strategy == ("dtensor" if dtensor else "auto")
    assert config.dtensor == (DtensorConfig((("batch", 2), ("model", 2))) if dtensor else None)
    assert config.trainer.package == target.resolve() and config.trainer.module == "trainer.task"
    assert config.training_replicas() == 2 and not config.warnings
    result = CliRunner().invoke(cli, ["validate", str(target / "vtrain.yaml")])
    assert result.exit_code == 0, result.output
    mesh = "; dtensor mesh batch 2 x model 2 = 4 devices" if dtensor else ""
    assert result.output == (f"{target / 'vtrain.yaml'}: valid: chief 1 × n1-standard-4; workers 1 × "
                             f"n1-standard-4{mesh}\n")


def test_the_next_command_is_pasteable_for_a_directory_with_a_space(tmp_path: Path) -> None:
    """Issue 20, class 14: `init "my trainer"` printed `next: vtrain validate my trainer/vtrain.yaml`."""
    target = tmp_path / "my trainer"
    result = CliRunner().invoke(cli, ["init", str(target)])
    command = result.output.splitlines()[-1].removeprefix("next: ")
    assert shlex.split(command) == ["vtrain", "validate", str(target / "vtrain.yaml")]
    assert CliRunner().invoke(cli, shlex.split(command)[1:]).exit_code == 0
