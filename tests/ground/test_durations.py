"""Issue 20, class 10: one duration grammar. Faults, job files, the estimate and --recover-backoff
each parsed durations their own way: `inf`, `1e400` and `1_0` were read by float() in --fault
(`stop:inf` froze a worker for good), `0s` was "not a duration" instead of "must be longer than 0s",
and `1d` or `.5s` worked in one place and not another."""

from __future__ import annotations

import pytest

from vtrain.durations import DurationError, parse_seconds
from vtrain.errors import EstimateError
from vtrain.estimate.network import parse_seconds as estimate_seconds
from vtrain.jobfile.nodes import parse_duration
from vtrain.local.faults import FaultSpecError, parse_fault
from vtrain.local.faults import parse_seconds as fault_seconds

SAME = {"90s": 90.0, "90": 90.0, "1h30m": 5400.0, "1d": 86400.0, ".5s": 0.5, "0.5": 0.5, "400ms": 0.4,
        "30us": 3e-05, "2min": 120.0, "1 H 30 M": 5400.0, "4e-1s": 0.4}
REFUSED = ["inf", "-inf", "nan", "1e400", "1e400s", "1_0", "-5s", "", "s", "1.h", "1hh", "30m1", "5x", "١٠s"]


@pytest.mark.parametrize(("text", "seconds"), sorted(SAME.items()))
def test_every_reader_reads_a_duration_alike(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds
    assert fault_seconds(text) == seconds
    assert estimate_seconds(text) == seconds
    assert parse_duration(text) == int(seconds)
    assert parse_fault(f"worker-0:kill@{text}").after == seconds


@pytest.mark.parametrize("text", REFUSED)
def test_every_reader_refuses_what_is_not_one(text: str) -> None:
    with pytest.raises(DurationError):
        parse_seconds(text)
    assert fault_seconds(text) is None and parse_duration(text) is None
    with pytest.raises(EstimateError):
        estimate_seconds(text)
    with pytest.raises(FaultSpecError):
        parse_fault(f"worker-0:kill@{text}")
    with pytest.raises(FaultSpecError):
        parse_fault(f"worker-0:stop:{text}@1s")


def test_zero_is_a_duration_that_a_caller_may_refuse_by_name() -> None:
    assert parse_seconds("0s") == 0.0
    with pytest.raises(FaultSpecError, match="stop:0s must be longer than 0s"):
        parse_fault("worker-0:stop:0s@1s")
    assert parse_fault("worker-0:kill@0s").after == 0.0  # at once is a time


def test_step_counts_are_ascii_digits() -> None:
    for step in ("²", "٣", "-1", "0"):
        with pytest.raises(FaultSpecError, match="whole number of steps"):
            parse_fault(f"worker-0:kill@step:{step}")
