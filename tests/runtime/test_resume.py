"""Resume with nothing lost, at the process level: a template is killed (or preempted) mid-training,
then started again on the same checkpoint directory, as Vertex AI restarts a replica in place.

Real TensorFlow on CPU, one process at a time, no supervisor: the test itself plays the launcher
(VTRAIN_STATUS_FILE for the steps, VTRAIN_RESTART_COUNT on the restart).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.trainer.test_templates import finish, start, weights
from vtrain.constants import PREEMPTED_EXIT_CODE
from vtrain.runtime import report_step


def read_step(path: Path) -> int:
    try:
        return int(json.loads(path.read_text())["step"])
    except (OSError, ValueError, KeyError):
        return 0


def run_until_step(proc: subprocess.Popen[str], status: Path, step: int, timeout: float = 120) -> None:
    """Wait (polling the trainer's own step reports) until it has done `step` steps."""
    end = time.monotonic() + timeout
    while read_step(status) < step:
        if proc.poll() is not None or time.monotonic() > end:
            output = proc.communicate()[0] if proc.poll() is not None else ""
            os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
            pytest.fail(f"trainer never reached step {step} (exit {proc.returncode}):\n{output[-3000:]}")
        time.sleep(0.005)


def signalled(proc: subprocess.Popen[str], sig: int) -> str:
    os.killpg(proc.pid, sig)
    output, _ = proc.communicate(timeout=120)
    return output


def test_report_step_writes_whole_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status = tmp_path / "status.json"
    report_step(3)  # no VTRAIN_STATUS_FILE: nothing, no error
    monkeypatch.setenv("VTRAIN_STATUS_FILE", str(status))
    monkeypatch.setenv("VTRAIN_RESTART_COUNT", "2")
    report_step(7, epoch=1)
    record = json.loads(status.read_text())
    assert (record["step"], record["epoch"], record["restarts"]) == (7, 1, 2)
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temporary file left behind
    monkeypatch.setenv("VTRAIN_STATUS_FILE", str(tmp_path / "missing-dir" / "status.json"))
    report_step(8)  # an unwritable path never stops training


def test_report_step_pauses_once_at_each_step_a_fault_is_armed_for(tmp_path: Path) -> None:
    """VTRAIN_FAULT_STEPS (set by `vtrain local` for a step fault): report_step pauses at the first report at or
    past each armed step, so the launcher's signal lands there; children of the replica do not inherit it."""
    code = (
        "import os, sys, time\n"
        "from vtrain.runtime import recovery\n"
        "recovery.FAULT_STEP_WAIT = 0.4\n"
        "times = {}\n"
        "for step in (1, 2, 3, 5, 6, 7, 8):\n"
        "    start = time.perf_counter(); recovery.report_step(step); times[step] = time.perf_counter() - start\n"
        "print(sorted(s for s, t in times.items() if t >= 0.35), max(times[s] for s in (1, 2, 3, 7, 8)) < 0.3,\n"
        "      'VTRAIN_FAULT_STEPS' in os.environ)\n"
    )
    env = {**os.environ, "VTRAIN_STATUS_FILE": str(tmp_path / "status.json"), "VTRAIN_FAULT_STEPS": "4,6,x"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[5,", "6]", "True", "False"]  # 4 was skipped: the first report past it pauses


@pytest.mark.slow
def test_custom_loop_sigterm_saves_the_step_and_resumes_to_the_same_weights(tmp_path: Path) -> None:
    args = ["--epochs=2", "--steps-per-epoch=400", "--batch-size=8", "--checkpoint-every=50"]
    clean = tmp_path / "clean" / "out"
    clean.parent.mkdir()
    finish(start("custom-loop", clean, args))
    expected = weights(clean / "model")["sha256"]

    out = tmp_path / "faulty" / "out"
    out.parent.mkdir()
    status = out.parent / "status.json"
    proc = start("custom-loop", out, args, VTRAIN_STATUS_FILE=str(status))
    run_until_step(proc, status, 120)
    log = signalled(proc, signal.SIGTERM)  # what a Spot VM gets before it goes
    assert proc.returncode == PREEMPTED_EXIT_CODE, log[-3000:]
    assert "SIGTERM: saving a checkpoint after this step" in log
    saved = read_step(status)  # the last step it finished is the one the handler saved
    assert list((out / "checkpoints" / "preempt").glob("ckpt-*.index")), log[-3000:]
    assert not (out / "model").exists()

    log = finish(start("custom-loop", out, args, VTRAIN_STATUS_FILE=str(status), VTRAIN_RESTART_COUNT="1"))
    assert f"resuming at step {saved} (restart 1 of this replica)" in log, log[-3000:]
    assert "restarts 1" in log
    # The resumed run reports only the epochs the first run did not finish (400 steps each): none twice.
    finished = saved // 400
    assert [f"epoch {e}:" in log for e in (1, 2)] == [e > finished for e in (1, 2)], log[-3000:]
    assert read_step(status) == 800
    assert weights(out / "model")["sha256"] == expected  # nothing lost, nothing trained twice


@pytest.mark.slow
def test_keras_sigkill_resumes_at_the_last_backup_not_at_zero(tmp_path: Path) -> None:
    args = ["--epochs=4", "--steps-per-epoch=20", "--batch-size=8"]
    out = tmp_path / "out"
    status = tmp_path / "status.json"
    proc = start("keras", out, args, VTRAIN_STATUS_FILE=str(status))
    run_until_step(proc, status, 2 * 20 + 3)  # inside epoch 3: the backup of epoch 2 is on disk
    log = signalled(proc, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL and "Epoch 3/4" in log

    status.unlink()
    restarted = start("keras", out, args, VTRAIN_STATUS_FILE=str(status), VTRAIN_RESTART_COUNT="1")
    run_until_step(restarted, status, 1)
    first = read_step(status)
    log = finish(restarted)
    assert "restarts 1" in log
    assert "Epoch 1/4" not in log and "Epoch 3/4" in log, log[-3000:]
    assert 40 < first <= 60  # the optimizer's step count came back with the epoch-2 backup
    assert read_step(status) == 80
    assert weights(out / "model")["is_chief"]


def test_restart_count_and_attempt_from_the_launcher_or_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vtrain.runtime import restarts

    assert restarts.job_attempt({}) == 1 and restarts.job_attempt({"VTRAIN_JOB_ATTEMPT": "3"}) == 3
    monkeypatch.setenv("VTRAIN_RESTART_COUNT", "2")
    restarts.restart_count.cache_clear()
    assert restarts.restart_count() == 2
    # On Vertex nobody says: each start of the task is counted under AIP_CHECKPOINT_DIR.
    monkeypatch.delenv("VTRAIN_RESTART_COUNT")
    monkeypatch.setenv("CLOUD_ML_JOB_ID", "123")
    monkeypatch.setenv("AIP_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    monkeypatch.setenv("CLUSTER_SPEC", json.dumps({"task": {"type": "workerpool1", "index": 1}}))
    counts = []
    for _ in range(3):
        restarts.restart_count.cache_clear()
        counts.append(restarts.restart_count())
    restarts.restart_count.cache_clear()
    assert counts == [0, 1, 2]
    assert (tmp_path / "ckpt" / ".vtrain-starts" / "123-worker-1").read_text() == "3\n"


def test_a_keras_backup_interrupted_mid_write_leaves_a_whole_backup(tmp_path: Path) -> None:
    """Keras 3 writes latest.weights.h5 in place; a replica killed mid-write used to leave a file that every
    restart failed to open ("bad object header version number"). vtrain's writer renames a whole file over."""
    keras = pytest.importorskip("keras")
    if not keras.__version__.startswith("3"):
        pytest.skip("Keras 3's BackupAndRestore")
    from vtrain.runtime.outputs import _atomic_backup_class

    def model() -> object:
        m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        m.compile(optimizer="adam", loss="mse")
        return m

    def interrupted_save(m: object, path: str) -> None:
        def dies_half_way(filepath: str, overwrite: bool = True) -> None:
            Path(filepath).write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 40)  # half a file, then the process is gone
            raise SystemExit("killed")

        m.save_weights = dies_half_way  # type: ignore[attr-defined]

    for make, whole in ((_atomic_backup_class(keras), True), (keras.callbacks.BackupAndRestore, False)):
        backup = tmp_path / make.__name__
        first = model()
        saver = make(backup_dir=str(backup), save_freq=1)
        saver.set_model(first)
        saver._save_model()  # a good backup
        interrupted_save(first, str(backup))
        with pytest.raises(SystemExit):
            saver._save_model()  # the next one dies mid-write
        restarted = model()
        loader = make(backup_dir=str(backup), save_freq=1)
        loader.set_model(restarted)
        if whole:
            loader.on_train_begin()  # the previous backup, whole
            assert all((a == b).all() for a, b in zip(first.get_weights(), restarted.get_weights(), strict=True))
        else:
            with pytest.raises(OSError):  # what Keras' own writer leaves: the restart cannot start
                loader.on_train_begin()
