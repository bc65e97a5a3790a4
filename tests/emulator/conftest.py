"""What the emulator tests that run real jobs (`--run-jobs`) share: the bucket (the environment cache is
`tests/conftest.py`'s `cache`)."""

from __future__ import annotations

from typing import Any

import pytest

PROJECT = "test-project"


@pytest.fixture
def bucket(gcs: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The staging bucket stage-bkt on gcp-storage-emulator; VTRAIN_PROJECT and VTRAIN_REGION set, so no command
    asks gcloud."""
    gcs.create_bucket("stage-bkt")
    monkeypatch.setenv("VTRAIN_PROJECT", PROJECT)
    monkeypatch.setenv("VTRAIN_REGION", "us-central1")
    return gcs
