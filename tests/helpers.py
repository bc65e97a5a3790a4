"""Small helpers for tests that write job files."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_job(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path
