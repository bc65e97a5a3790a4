"""What a watcher reads (issue 26, issue 20's newcomer paragraph): TensorFlow's C++ lines told from a
replica's Python lines, and the plain progress line."""

from __future__ import annotations

import pytest

from vtrain.view.lines import changed, clock, is_native_log, plain_line, replica_text

# Lines a TensorFlow 2.21 quickstart replica printed here (`make demo`), prefixes removed.
NATIVE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796165869.336992   13361 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders.",
    "I0000 00:00:1796165869.340476   13361 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will "
    "not be used.",
    "E0000 00:00:1796165869.400000   13361 cuda_executor.cc:1228] INTERNAL: CUDA Runtime error: Failed call to "
    "cudaGetRuntimeVersion: Error loading CUDA libraries. failed call to cuInit: UNKNOWN ERROR (303)",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI FMA, in other operations, rebuild TensorFlow "
    "with the appropriate compiler flags.",
    "2024-05-01 10:00:00.123456: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",  # TF < 2.16
]
PYTHON = [
    "2026-12-01 22:58:02,470 vtrain.runtime INFO vtrain: worker/0 using multi_worker_mirrored strategy",
    "Epoch 1/2",
    "20/20 - 2s - loss: 1.0497 - 2s/epoch - 108ms/step",
    "/job:worker/replica:0/task:1",
    "Traceback (most recent call last):",
    "RuntimeError: probe chief-0 was told to raise",
    "I0000 is what I print",
    "To enable the following instructions, read the manual",
]


@pytest.mark.parametrize("line", NATIVE)
def test_tensorflow_cpp_lines_are_recognised(line: str) -> None:
    assert is_native_log(line)


@pytest.mark.parametrize("line", PYTHON)
def test_python_lines_are_not(line: str) -> None:
    assert not is_native_log(line)


def test_clock() -> None:
    assert [clock(s) for s in (0, 7.9, 65, 3723, -1)] == ["0:00", "0:07", "1:05", "1:02:03", "0:00"]


def test_plain_line_and_what_counts_as_a_change() -> None:
    rows = [{"replica": "chief-0", "state": "running", "step": 40, "rate": 3.14, "restarts": 0},
            {"replica": "worker-0", "state": "starting", "step": None, "rate": None, "restarts": 1},
            {"replica": "worker-1", "state": "done", "step": 40, "rate": None, "restarts": 2}]
    now = {"state": "JOB_STATE_RUNNING", "seconds": 75.2, "replicas": rows}
    assert plain_line(now) == ("progress 1:15: chief-0 running step 40 (3.1/s); worker-0 starting, 1 restart; "
                               "worker-1 done step 40, 2 restarts")
    assert replica_text({**rows[0], "rate": 250.0}) == "chief-0 running step 40 (250/s)"
    assert changed(None, now)
    assert not changed(now, {**now, "seconds": 99, "replicas": [{**rows[0], "rate": 9.0}, *rows[1:]]})  # rate, time
    assert changed(now, {**now, "replicas": [{**rows[0], "step": 41}, *rows[1:]]})
    assert changed(now, {**now, "replicas": [rows[0], {**rows[1], "restarts": 2}, rows[2]]})
