"""Pytest fixtures for the emulator; enable them with
`pytest_plugins = ["vtrain.emulator.testing"]` in the root conftest.py.

`vertex_emulator` is a running :class:`~vtrain.emulator.Emulator` with short timings
(PENDING 0.05 s, RUNNING 0.3 s, CANCELLING 0.05 s); `vertex_client` is the real
`JobServiceClient` pointed at it. Both are per test, so injected faults never leak.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from vtrain.emulator import Emulator, sleep_runner

FAST: dict[str, Any] = {"pending_seconds": 0.05, "cancel_seconds": 0.05}


@pytest.fixture
def vertex_emulator() -> Iterator[Emulator]:
    with Emulator(runner=sleep_runner(0.3), **FAST) as emu:
        yield emu


@pytest.fixture
def vertex_client(vertex_emulator: Emulator) -> Any:
    return vertex_emulator.client()
