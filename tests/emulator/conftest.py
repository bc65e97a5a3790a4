"""What the emulator tests that run real jobs (`--run-jobs`) share: the environment cache and the bucket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

PROJECT = "test-project"


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One environment cache for the session: the probe is installed once, then reused."""
    return tmp_path_factory.mktemp("vtrain-emulated-cache")


@pytest.fixture
def bucket(gcs: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The staging bucket stage-bkt on gcp-storage-emulator; VTRAIN_PROJECT and VTRAIN_REGION set, so no command
    asks gcloud."""
    gcs.create_bucket("stage-bkt")
    monkeypatch.setenv("VTRAIN_PROJECT", PROJECT)
    monkeypatch.setenv("VTRAIN_REGION", "us-central1")
    return gcs
