"""The strict docs build (run by `make test`) fails on what would mislead a reader: a link to a page or a
heading that is not there, a page no menu reaches, a generated page the code has moved past."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
pytestmark = pytest.mark.slow  # each build takes ~5 s here


def _checkout(tmp_path: Path) -> Path:
    """The docs, their config and what they read from the repository, in a folder of their own."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    for name in ("vtrain", "examples"):
        (root / name).symlink_to(REPO / name)
    return root


def _build(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / "site")],
                          cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_a_broken_link_a_missing_anchor_and_a_page_outside_the_menu_fail_the_build(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    with (root / "docs" / "index.md").open("a", encoding="utf-8") as home:
        home.write("\nSee [the old page](guides/gone.md) and [a heading](guides/ci.md#no-such-heading).\n")
    (root / "docs" / "guides" / "orphan.md").write_text("# Nobody links here\n", encoding="utf-8")
    done = _build(root)
    assert done.returncode != 0
    assert "contains a link 'guides/gone.md', but the target is not found" in done.stderr
    assert "does not contain an anchor '#no-such-heading'" in done.stderr
    assert "guides/orphan.md" in done.stderr  # not in the nav


def test_a_stale_generated_page_fails_the_build(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    page = root / "docs" / "reference" / "errors.md"
    text = page.read_text(encoding="utf-8")
    assert "| 13 | the job ended `JOB_STATE_EXPIRED` |" in text
    page.write_text(text.replace("| 13 | the job ended `JOB_STATE_EXPIRED` |", "| 13 | the job expired |"),
                    encoding="utf-8")
    done = _build(root)
    assert done.returncode != 0
    assert "docs/reference/errors.md is stale: run `python docs/generate.py`" in done.stderr
