"""vtrain.runtime.report_metric writes what Google's cloudml-hypertune package writes, and reads it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vtrain.runtime import hypertune


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_metric_file_is_the_packages_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    official = pytest.importorskip("hypertune")
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "7")
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(tmp_path / "google" / "output.metrics"))
    theirs = official.HyperTune()
    for step, value in [(1, 0.5), (2, 0.25), (0, 3)]:
        theirs.report_hyperparameter_tuning_metric("loss", value, global_step=step)
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(tmp_path / "vtrain" / "output.metrics"))
    for step, value in [(1, 0.5), (2, 0.25), (0, 3)]:
        hypertune.report_metric("loss", value, step=step)
    google, ours = tmp_path / "google" / "output.metrics", tmp_path / "vtrain" / "output.metrics"
    for a, b in zip(_lines(google), _lines(ours), strict=True):
        assert set(a) == set(b) and abs(a.pop("timestamp") - b.pop("timestamp")) < 60
        assert a == b
    # key order and spacing too: each line is json.dumps(sort_keys=True)
    strip = [line.split('"timestamp"')[0] for line in google.read_text().splitlines()]
    assert strip == [line.split('"timestamp"')[0] for line in ours.read_text().splitlines()]
    assert [(r.name, r.value, r.step, r.trial) for r in hypertune.read_reports(google)] == [
        ("loss", 0.5, 1, "7"), ("loss", 0.25, 2, "7"), ("loss", 3.0, 0, "7")]


def test_the_file_keeps_the_latest_100_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(tmp_path / "m" / "out.metrics"))
    for step in range(1, 131):
        hypertune.report_metric("acc", step / 1000, step=step)
    reports = hypertune.read_reports(tmp_path / "m" / "out.metrics")
    assert len(reports) == 100 and reports[0].step == 31 and reports[-1].value == 0.13
    assert reports[-1].trial == "0"  # outside a trial, as the package writes it


def test_bad_names_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="metric name"):
        hypertune.report_metric("global_step", 1.0)
    with pytest.raises(ValueError):
        hypertune.report_metric("loss", "not a number")  # type: ignore[arg-type]
    assert hypertune.read_reports(tmp_path / "missing") == []
    (tmp_path / "junk").write_text('not json\n[1]\n{"loss": "x", "global_step": "1"}\n')
    assert hypertune.read_reports(tmp_path / "junk") == []


def test_trial_id_and_info(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hypertune.trial_id() is None
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "3")
    assert hypertune.trial_id() == "3"
    from vtrain.runtime.decision import Info

    assert Info("chief", 0, True, 1, 1, "one_device", "", None, trial_id="3").to_dict()["trial_id"] == "3"
