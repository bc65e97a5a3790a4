"""The quickstart page does what it says: its shell blocks run as written, its mistake gets the output shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import REPO
from vtrain.cli import cli

PAGE = REPO / "docs" / "guides" / "quickstart.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), flags=re.S | re.M)


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
def test_the_shell_blocks_run_as_written(tmp_path: Path) -> None:
    """The ```bash blocks, in order, in one shell (as in a person's terminal), in a folder laid out as a
    checkout. The quickstart job trains the keras template with a chief and two workers: real TensorFlow
    processes, ~30 s on an idle machine."""
    if not (Path(sys.prefix) / "bin" / "vtrain").is_file():
        pytest.skip(f"the page runs `source .venv/bin/activate` then `vtrain`: {sys.prefix} has no vtrain script")
    for name in ("configs", "trainer_templates"):
        (tmp_path / name).symlink_to(REPO / name)
    (tmp_path / ".venv").symlink_to(sys.prefix)
    script = "\n".join(_blocks("bash"))
    env = {**os.environ, "VTRAIN_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    run = tmp_path / "vtrain-out" / "quickstart" / "vtrain-local" / "latest"
    assert '"JOB_STATE_SUCCEEDED"' in (run / "result.json").read_text()
    assert (run / "timeline.html").is_file()
    assert (tmp_path / "my-trainer" / "vtrain.yaml").is_file()
    assert '"workerPoolSpecs"' in done.stdout and "workerPoolSpecs:" in (tmp_path / "job.yaml").read_text()
