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

#: A test that takes longer than this and is not marked `slow` is named at the end of the run, so
#: `make test-fast` stays quick; a report, not a failure (timings are not asserted in tests).
SLOW_SECONDS = 5.0
_unmarked_slow: list[tuple[str, float]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):  # noqa: ANN201 - a hook wrapper
    import time

    start = time.monotonic()
    yield
    took = time.monotonic() - start
    if took > SLOW_SECONDS and item.get_closest_marker("slow") is None:
        _unmarked_slow.append((item.nodeid, took))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _unmarked_slow:
        terminalreporter.section(f"tests over {SLOW_SECONDS:g} s not marked slow (mark them @pytest.mark.slow)")
        for nodeid, took in sorted(_unmarked_slow, key=lambda e: -e[1]):
            terminalreporter.write_line(f"{took:6.1f} s  {nodeid}")
