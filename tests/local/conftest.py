"""What the `vtrain local` tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One environment cache per test file: each trainer is installed once, then reused."""
    return tmp_path_factory.mktemp("vtrain-cache")
