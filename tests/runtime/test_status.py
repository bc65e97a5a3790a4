"""The replica status file: what the runtime writes is what the launcher reads, and a torn file is no report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vtrain.runtime import recovery, report_step
from vtrain.runtime.status import Status, read_status, write_status


def test_write_then_read_gives_the_same_record(tmp_path: Path) -> None:
    path = tmp_path / "chief-0.json"
    status = Status(12, restarts=1, epoch=2, time=5.0, first=9)
    write_status(path, status)
    assert read_status(path) == status
    assert [p.name for p in tmp_path.iterdir()] == ["chief-0.json"]  # no temporary file left behind
    write_status(path, Status(13, restarts=1, first=9))  # replaced, not appended
    assert read_status(path) == Status(13, restarts=1, first=9)


def test_the_format_is_unchanged(tmp_path: Path) -> None:
    """The keys, in the order launchers and tools have read them since step reports began."""
    path = tmp_path / "s.json"
    write_status(path, Status(7, restarts=2, epoch=1, time=3.5, first=4))
    assert path.read_text() == '{"step": 7, "first": 4, "epoch": 1, "restarts": 2, "time": 3.5}'


@pytest.mark.parametrize("text", ["", '{"step": 4', '{"step": 4, "restarts": 1, "ti', "[1, 2]", '{"restarts": 1}',
                                  '{"step": "four"}', "\x00\x00", '{"step": 4, "first": "x"}'])
def test_a_torn_or_foreign_file_is_no_report(tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    assert read_status(path) is None


def test_no_file_and_an_old_record_without_first(tmp_path: Path) -> None:
    assert read_status(tmp_path / "missing.json") is None
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"step": 12, "restarts": 1, "epoch": 2, "time": 5.0}))
    assert read_status(path) == Status(12, 1, 2, 5.0)


def test_an_unwritable_folder_raises_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        write_status(tmp_path / "missing-dir" / "s.json", Status(1))


def test_report_step_writes_what_read_status_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "worker-1.json"
    monkeypatch.setenv("VTRAIN_STATUS_FILE", str(path))
    monkeypatch.setenv("VTRAIN_RESTART_COUNT", "3")
    monkeypatch.setattr(recovery, "_first_step", [])
    report_step(40, epoch=2)
    report_step(41)
    status = read_status(path)
    assert status is not None
    assert (status.step, status.first, status.epoch, status.restarts) == (41, 40, None, 3)


def test_the_launcher_reads_status_without_tensorflow() -> None:
    code = "import sys, vtrain.local.faults, vtrain.local.restarts; print(any('tensorflow' in m for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("content", ['{"step": 1e999}', '{"step": true}', '{"step": -2}', '{"step": NaN}',
                                     '{"step": 3, "first": 1e999}', '{"step": 3, "restarts": "1"}', "[1]",
                                     "[" * 100_000 + "]" * 100_000, '{"step": 3, "pad": "' + "x" * 70_000 + '"}'])
def test_a_status_file_the_trainer_mangled_is_no_report(tmp_path: Path, content: str) -> None:
    """The trainer owns its status file: whatever it holds, the launcher reads "no report", never an exception."""
    path = tmp_path / "status.json"
    path.write_text(content, encoding="utf-8")
    assert read_status(path) is None


def test_a_status_file_replaced_by_a_fifo_does_not_hang_the_launcher(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    os.mkfifo(path)
    assert read_status(path) is None
