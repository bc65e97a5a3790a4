"""VTRAIN_COLLECTIVE_TIMEOUT bounds a Horovod job's start too (issue 46, class 7): a rank alive but never reaching its
first tensor held the others in TensorFlow's registration wait until it came (a 10 s timeout, 45 s waited here,
and forever for a rank stuck or failed before its first tensor). Its timeout within a running ring is
tests/horovod/test_upstream.py's (the shared job's last phase)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.horovod.conftest import migrate, run_job
from vtrain.handle import FAILED

pytestmark = pytest.mark.skipif(not all(importlib.util.find_spec(name) for name in ("tensorflow", "tf_keras")),
                                reason="TensorFlow and tf_keras are not installed")


@pytest.mark.slow
@pytest.mark.alone  # what it asserts is a deadline
def test_a_rank_that_never_makes_its_first_tensor_fails_the_start_after_the_timeout(tmp_path: Path,
                                                                                    cache: Path) -> None:
    """This machine's TensorFlow (2.18 on): its registration barrier, bounded by the timeout, raises where the first
    collective made the first tensor."""
    handle, printed = run_job(tmp_path, cache, migrate(tmp_path / "examples"), "late_start", "horovod",
                              env={"VTRAIN_COLLECTIVE_TIMEOUT": "6"}, restart_policy="never")
    assert handle.state == FAILED, printed[-4000:]
    chief = json.loads((tmp_path / "out" / "model" / "late-rank0.json").read_text())
    assert chief["outcome"].startswith("DeadlineExceededError"), chief
    assert "Wait_for_all_tasks_to_register" in chief["outcome"] and "/job:worker/replica:0/task:0" in chief["outcome"]
    assert 6 <= chief["waited"] < 6 + 20, chief  # rank 1 made no tensor for 120 s
    assert not (tmp_path / "out" / "model" / "late-rank1.json").exists()  # stopped with the job, still asleep


@pytest.mark.slow
@pytest.mark.alone  # what it asserts is a deadline
def test_on_the_images_tensorflow_a_start_held_past_the_timeout_ends_the_rank(tmp_path: Path, cache: Path) -> None:
    """tf-cpu.2-17's TensorFlow (Vertex's default image, on its stack): no registration bound to configure, and
    its wait holds the GIL; vtrain.horovod's C-level timer ends the rank with where it waited."""
    handle, printed = run_job(tmp_path, cache, migrate(tmp_path / "examples"), "late_start", "horovod",
                              env={"VTRAIN_COLLECTIVE_TIMEOUT": "6"}, restart_policy="never", runtime="stack")
    assert handle.state == FAILED, printed[-4000:]
    assert "python3.10/site-packages/tensorflow/" in printed  # the stack's TensorFlow, not this machine's (3.11)
    chief = [line for line in printed.splitlines() if line.startswith("[chief-0]")]
    assert any("Timeout (0:00:06)!" in line for line in chief), "\n".join(chief[-40:])
    assert any("in ensure_initialized" in line for line in chief), "\n".join(chief[-40:])
    assert not (tmp_path / "out" / "model").exists() or not list((tmp_path / "out" / "model").glob("late-rank*"))
