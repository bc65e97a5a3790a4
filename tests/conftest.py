"""Shared fixtures. No test may read the developer's Google Cloud or vtrain setup."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_PREFIXES = ("GOOGLE_", "CLOUDSDK_", "VTRAIN_", "TF_CONFIG", "CLUSTER_SPEC", "AIP_", "STORAGE_EMULATOR_HOST")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    # vtrain's state (records of creates whose answer was lost) stays inside each test.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


@pytest.fixture
def repo() -> Path:
    return REPO

pytest_plugins = ["tests.gcs_emulator"]
