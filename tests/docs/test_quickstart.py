"""The quickstart page does what it says: its shell blocks run as written, its mistake gets the output shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import QUICKSTART_PAGE as PAGE
from tests.conftest import page_blocks
from tests.helpers import QuickstartRun
from vtrain.cli import cli


def _blocks(language: str) -> list[str]:
    return page_blocks(PAGE, language)


def test_the_page_has_the_blocks_this_file_runs() -> None:
    bash = _blocks("bash")
    assert len(bash) == 2
    assert "vtrain validate configs/quickstart.yaml" in bash[0] and "vtrain local configs/quickstart.yaml" in bash[0]
    assert "vtrain init my-trainer" in bash[1] and "vtrain submit my-trainer/vtrain.yaml --dry-run" in bash[1]


def test_the_mistake_shown_is_the_one_validate_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = next(b for b in _blocks("yaml") if "workerz" in b)
    shown = next(b for b in _blocks("text") if b.startswith("$ vtrain validate job.yaml\n"))
    (tmp_path / "job.yaml").write_text(job, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["validate", "job.yaml"])
    assert result.exit_code == 2
    assert result.stdout + result.stderr == shown.split("\n", 1)[1]


@pytest.mark.slow
def test_the_shell_blocks_run_as_written(quickstart_run: QuickstartRun) -> None:
    """The ```bash blocks, in order, in one shell, in a folder laid out as a checkout (the `quickstart_run`
    fixture, tests/conftest.py). The quickstart job trains the keras template with a chief and two workers:
    real TensorFlow processes, ~30 s on an idle machine."""
    quickstart_run.assert_succeeded()
    assert '"JOB_STATE_SUCCEEDED"' in (quickstart_run.run_dir / "result.json").read_text()
    assert (quickstart_run.run_dir / "timeline.html").is_file()
    assert (quickstart_run.folder / "my-trainer" / "vtrain.yaml").is_file()
    assert '"workerPoolSpecs"' in quickstart_run.stdout
    # The quickstart rehearses on its image's stack (tf-cpu.2-17: TensorFlow 2.17.1 on Python 3.10), built in the
    # run's first use of it, with no notice that the image's TensorFlow differs from what ran.
    said = quickstart_run.stdout + quickstart_run.stderr
    assert "runtime: stack: the default for a prebuilt image: the image's stack, tf-cpu.2-17 (TensorFlow 2.17.1" in said
    assert "local results can differ" not in said
    assert "workerPoolSpecs:" in (quickstart_run.folder / "job.yaml").read_text()
