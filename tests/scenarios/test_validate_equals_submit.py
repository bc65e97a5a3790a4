"""validate ≡ submit: for every trainer layout, `vtrain validate` says valid exactly when `vtrain
package` (the build and checks submit runs) accepts it, with the same message when both refuse.
A regression test in both directions for the layout validate once accepted and package refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from vtrain.cli import cli

PYPROJECT = '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n' \
            '[project]\nname = "t"\nversion = "0.1"\n'

LAYOUTS = {
    # name: (files, module, refusal or None)
    "module file": ({"trainer/__init__.py": "", "trainer/task.py": "print('hi')\n"}, "trainer.task", None),
    "src layout": ({"src/trainer/__init__.py": "", "src/trainer/task.py": ""}, "trainer.task", None),
    "package run with -m, no __init__": ({"trainer/__main__.py": ""}, "trainer", None),
    "package with __main__ and __init__": ({"trainer/__init__.py": "", "trainer/__main__.py": ""}, "trainer", None),
    "package without __main__": ({"trainer/__init__.py": ""}, "trainer", "is a package without __main__.py"),
    "module excluded by .gitignore": (
        {"trainer/__init__.py": "", "trainer/task.py": "", ".gitignore": "task.py\n"},
        "trainer.task",
        "trainer/task.py exists but is excluded by an ignore file",
    ),
    "syntax error": ({"trainer/__init__.py": "", "trainer/task.py": "def f(:\n"}, "trainer.task", "invalid syntax"),
    "missing module": ({"trainer/__init__.py": ""}, "trainer.task", "'trainer.task' not found"),
}


def _write(tmp_path: Path, files: dict[str, str], module: str) -> Path:
    pkg = tmp_path / "pkg"
    for rel, text in {"pyproject.toml": PYPROJECT, **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    (tmp_path / "staging").mkdir()
    job = tmp_path / "job.yaml"
    job.write_text(f"name: demo\nstaging_bucket: {tmp_path / 'staging'}\ntrainer:\n  package: pkg\n"
                   f"  module: {module}\ncluster:\n  chief: {{machine_type: n1-standard-4}}\n")
    return job


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.slow
def test_validate_and_package_agree(tmp_path: Path, layout: str) -> None:
    files, module, refusal = LAYOUTS[layout]
    job = _write(tmp_path, files, module)
    runner = CliRunner()
    validated = runner.invoke(cli, ["validate", str(job), "--target", "local"])
    packaged = runner.invoke(cli, ["package", str(job), "--target", "local"])
    if refusal is None:
        assert validated.exit_code == 0, validated.output
        assert packaged.exit_code == 0, packaged.output
        assert len(list((tmp_path / "staging").rglob("*.tar.gz"))) == 2  # trainer and runtime sdists
    else:
        assert validated.exit_code == 2 and refusal in validated.output, validated.output
        assert packaged.exit_code != 0 and refusal in packaged.output, packaged.output
        assert list((tmp_path / "staging").iterdir()) == []  # refused before anything was staged


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_submit_dry_run_runs_the_same_checks(tmp_path: Path, layout: str) -> None:
    files, module, refusal = LAYOUTS[layout]
    job = _write(tmp_path, files, module)
    result = CliRunner().invoke(
        cli,
        ["submit", str(job), "--dry-run", "--set", "staging_bucket=gs://my-bucket/staging"],
        env={"VTRAIN_PROJECT": "proj-one", "VTRAIN_REGION": "us-central1"},
    )
    if refusal is None:
        assert result.exit_code == 0, result.output
        assert "Dry run: nothing is uploaded" in result.output
    else:
        assert result.exit_code != 0 and refusal in result.output, result.output
