"""The α–β model of `vtrain estimate`: hand-checked cases, properties, parsing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vtrain.estimate import (
    EstimateError,
    costs,
    estimate,
    gradient_bytes,
    low_communication,
    parse_params,
    parse_seconds,
    recommended_reducers,
)

GB = 1e9  # bytes; 8 Gbps moves exactly one GB per second


# --------------------------------------------------------------------------- hand-checked


def test_two_workers_ring_equals_reduction_server() -> None:
    # n = 2: ring sends 2·1/2·S = S in 2 hops; reducers send S in 2 hops. Equal.
    e = estimate(2, 8, 1, 16, GB, alpha_s=1e-3)
    assert e.ring.bytes_sent_per_worker == GB
    assert e.ring.comm_seconds == pytest.approx(2e-3 + 1.0)
    assert e.reduction_server.bytes_sent_per_worker == GB
    assert e.reduction_server.comm_seconds == pytest.approx(2e-3 + 1.0)
    assert e.recommended_reducers == 1  # ⌈2 × 8 / 16⌉
    assert e.speedup == pytest.approx(1.0)
    assert e.min_reducers_to_beat_ring is None  # nothing beats the ring at n = 2
    assert e.ceiling == 1.0


def test_eight_workers_below_and_at_the_sizing_rule() -> None:
    alpha = 1e-5
    below = estimate(8, 8, 2, 16, GB, alpha_s=alpha)
    assert below.recommended_reducers == 4  # ⌈8 × 8 / 16⌉
    assert below.ring.bytes_sent_per_worker == pytest.approx(1.75 * GB)
    assert below.ring.comm_seconds == pytest.approx(14 * alpha + 1.75)
    # 2 reducers × 2 GB/s carry 8 GB: reducer-bound, 2 s.
    assert below.reduction_server.reducer_bound
    assert below.reduction_server.comm_seconds == pytest.approx(2 * alpha + 2.0)
    assert below.speedup == pytest.approx((14 * alpha + 1.75) / (2 * alpha + 2.0))
    at = estimate(8, 8, 4, 16, GB, alpha_s=alpha)
    assert not at.reduction_server.reducer_bound
    assert at.reduction_server.comm_seconds == pytest.approx(2 * alpha + 1.0)
    assert at.speedup == pytest.approx((14 * alpha + 1.75) / (2 * alpha + 1.0))
    above = estimate(8, 8, 9, 16, GB, alpha_s=alpha)
    assert above.reduction_server.comm_seconds == at.reduction_server.comm_seconds
    # 3 reducers: 8/(3·2) = 1.33 s < 1.75 s beats the ring; 2 do not.
    assert at.min_reducers_to_beat_ring == 3


def test_sixty_four_workers() -> None:
    alpha = 30e-6
    e = estimate(64, 8, 8, 32, GB, alpha_s=alpha)
    ring = 126 * alpha + 126 / 64
    assert e.ring.comm_seconds == pytest.approx(ring)
    assert e.recommended_reducers == 16  # ⌈64 × 8 / 32⌉
    assert e.reduction_server.comm_seconds == pytest.approx(2 * alpha + 2.0)  # 64 GB over 8 × 4 GB/s
    assert e.at_recommended.comm_seconds == pytest.approx(2 * alpha + 1.0)
    assert e.ceiling == pytest.approx(126 / 64)
    assert e.speedup == pytest.approx(ring / (2 * alpha + 2.0))  # < 1: too few reducers


def test_gpus_per_worker_make_the_ring_span_every_gpu() -> None:
    e = estimate(2, 8, 1, 16, GB, alpha_s=0, gpus_per_worker=4)
    assert e.ring_ranks == 8
    assert e.ring.bytes_sent_per_worker == pytest.approx(1.75 * GB)
    assert e.reduction_server.bytes_sent_per_worker == GB
    assert e.ring.gpu_hours == pytest.approx(8 * 1000 * 1.75 / 3600)


def test_step_compute_and_machine_hours() -> None:
    e = estimate(8, 8, 4, 16, GB, step_compute_s=0.25, alpha_s=0)
    assert e.ring.step_seconds == pytest.approx(2.0)
    assert e.ring.steps_per_sec == pytest.approx(0.5)
    assert e.reduction_server.steps_per_sec == pytest.approx(0.8)
    assert e.speedup == pytest.approx(1.6)
    assert e.ring.worker_hours == pytest.approx(8 * 1000 * 2.0 / 3600)
    assert e.reduction_server.reducer_hours == pytest.approx(4 * 1000 * 1.25 / 3600)
    assert e.break_even_worker_hours == pytest.approx(0.6 * 8 / 4)


def test_single_replica_exchanges_nothing() -> None:
    e = estimate(1, 100, 1, 32, GB, gpus_per_worker=8)
    assert e.ring.comm_seconds == e.reduction_server.comm_seconds == 0
    assert e.ring.steps_per_sec is None
    assert e.speedup == 1.0
    assert estimate(1, 100, 1, 32, GB, step_compute_s=0.5).ring.steps_per_sec == pytest.approx(2.0)


def test_published_bert_configuration() -> None:
    # 8 × a2-highgpu-8g (100 Gbps, 8 A100), BERT-large 340M fp32, 20 × n1-highcpu-16 (32 Gbps).
    e = estimate(8, 100, 20, 32, gradient_bytes(parse_params("340M"), "fp32"), gpus_per_worker=8)
    assert 1.5 <= e.speedup <= 2.0
    assert e.recommended_reducers == 25
    assert e.reduction_server.reducer_bound  # 20 × 32 < 8 × 100
    assert e.at_recommended.steps_per_sec > e.reduction_server.steps_per_sec


def test_sizing_rule_uses_the_sum_of_worker_bandwidths() -> None:
    assert recommended_reducers(100 + 7 * 50, 32) == 15
    assert recommended_reducers(0.1 * 3, 0.1) == 3  # float rounding does not leave a gap
    e = estimate(8, 50, 15, 32, GB, sizing_gbps=450)
    assert e.recommended_reducers == 15


# --------------------------------------------------------------------------- cost


def test_costs_and_break_even() -> None:
    e = estimate(8, 8, 4, 16, GB, step_compute_s=0.25, alpha_s=0)  # ring 2.0 s, reducers 1.25 s
    c = costs(e, worker_price_per_hour=36.0, reducer_price_per_hour=1.0)
    assert c.ring_per_1000_steps == pytest.approx(36 * 2000 / 3600)
    assert c.reduction_server_per_1000_steps == pytest.approx(40 * 1250 / 3600)
    assert c.reducers_cheaper
    assert c.break_even_reducer_price == pytest.approx(0.6 * 36 / 4)
    # 36(c + 1.75) = 40(c + 1.0)  ->  c = 5.75
    assert c.break_even_step_compute_s == pytest.approx(5.75)
    at_break_even = costs(e, 36.0, c.break_even_reducer_price)
    assert at_break_even.ring_per_1000_steps == pytest.approx(at_break_even.reduction_server_per_1000_steps)
    dear = costs(e, 36.0, 100.0)
    assert not dear.reducers_cheaper and dear.break_even_step_compute_s == 0.0
    assert costs(e, 36.0, 0.0).break_even_step_compute_s is None  # free reducers always pay


# --------------------------------------------------------------------------- DiLoCo


def test_low_communication_bandwidth_needs() -> None:
    rows = low_communication(GB, worker_gbps=8, step_compute_s=1.0, inner_steps=(100,))
    sync, diloco = rows
    assert sync.name == "sync data-parallel" and diloco.name == "DiLoCo H=100"
    assert sync.needed_gbps == pytest.approx(9 * 8)  # 1 GB must move in 1/9 s
    assert diloco.needed_gbps == pytest.approx(9 * 8 / 100)
    assert sync.utilisation == pytest.approx(0.5)
    assert sync.min_step_compute_s == pytest.approx(9.0)
    bound = low_communication(GB, 8, None, (100,))
    assert bound[0].needed_gbps is None and bound[1].min_step_compute_s == pytest.approx(0.09)


# --------------------------------------------------------------------------- properties

workers_st = st.integers(1, 300)
gbps_st = st.floats(0.5, 4000, allow_nan=False)
bytes_st = st.floats(1e3, 1e12, allow_nan=False)
compute_st = st.one_of(st.none(), st.floats(0, 10, allow_nan=False))
gpus_st = st.integers(0, 16)
alpha_st = st.floats(0, 1e-3, allow_nan=False)


def _time(e: object, attr: str) -> float:
    return getattr(e, attr).step_seconds


@given(workers_st, gbps_st, st.integers(1, 500), gbps_st, bytes_st, compute_st, gpus_st, alpha_st,
       st.floats(1.0, 10.0))  # fmt: skip
def test_more_bandwidth_is_never_slower(
    n: int, bw: float, m: int, br: float, s: float, c: float | None, g: int, a: float, k: float
) -> None:
    base = estimate(n, bw, m, br, s, c, a, g)
    faster_workers = estimate(n, bw * k, m, br, s, c, a, g)
    faster_reducers = estimate(n, bw, m, br * k, s, c, a, g)
    tol = 1 + 1e-12
    for attr in ("ring", "reduction_server", "at_recommended"):
        assert _time(faster_workers, attr) <= _time(base, attr) * tol
    assert _time(faster_reducers, "reduction_server") <= _time(base, "reduction_server") * tol
    assert _time(faster_reducers, "ring") == _time(base, "ring")


@given(workers_st, gbps_st, gbps_st, bytes_st, compute_st, gpus_st, alpha_st, st.integers(0, 50))
def test_reducers_past_the_rule_are_never_faster(
    n: int, bw: float, br: float, s: float, c: float | None, g: int, a: float, extra: int
) -> None:
    rule = estimate(n, bw, 1, br, s, c, a, g).recommended_reducers
    at_rule = estimate(n, bw, rule, br, s, c, a, g).reduction_server
    past = estimate(n, bw, rule + extra, br, s, c, a, g).reduction_server
    assert past.step_seconds == at_rule.step_seconds
    assert not at_rule.reducer_bound
    if rule > 1:  # one fewer than the rule is never faster either
        fewer = estimate(n, bw, rule - 1, br, s, c, a, g).reduction_server
        assert fewer.step_seconds >= at_rule.step_seconds


@given(workers_st, gbps_st, gbps_st, bytes_st, gpus_st)
def test_speedup_never_exceeds_the_ceiling_without_latency(
    n: int, bw: float, br: float, s: float, g: int
) -> None:
    e = estimate(n, bw, 10_000, br, s, None, 0.0, g)
    assert e.speedup <= e.ceiling * (1 + 1e-12)


# --------------------------------------------------------------------------- parsing and bad input


@pytest.mark.parametrize(
    ("text", "value"),
    [("340M", 340_000_000), ("1.3B", 1_300_000_000), ("7e9", 7_000_000_000), ("125_000_000", 125_000_000),
     ("10k", 10_000), ("2g", 2_000_000_000), (" 66m ", 66_000_000), ("1T", 10**12)],
)  # fmt: skip
def test_parse_params(text: str, value: int) -> None:
    assert parse_params(text) == value


@pytest.mark.parametrize("text", ["abc", "", "-5M", "0", "1.5X", "M", "1e400"])
def test_parse_params_rejects(text: str) -> None:
    with pytest.raises(EstimateError, match="parameter") as err:
        parse_params(text)
    assert "--" not in str(err.value)  # the library speaks of values; the CLI names the flag


@pytest.mark.parametrize(
    ("text", "value"),
    [("0.4s", 0.4), ("400ms", 0.4), ("30us", 30e-6), ("30µs", 30e-6), ("0.4", 0.4), ("2m", 120.0),
     (".5", 0.5), ("1h", 3600.0), ("0", 0.0)],
)  # fmt: skip
def test_parse_seconds(text: str, value: float) -> None:
    assert math.isclose(parse_seconds(text), value)


@pytest.mark.parametrize("text", ["fast", "-1s", "1 parsec", "", "1e400s"])
def test_parse_seconds_rejects(text: str) -> None:
    with pytest.raises(EstimateError, match="duration") as err:
        parse_seconds(text)
    assert "--" not in str(err.value)


def test_gradient_bytes() -> None:
    assert gradient_bytes(10, "fp32") == 40
    assert gradient_bytes(10, "bf16") == gradient_bytes(10, "fp16") == 20
    with pytest.raises(EstimateError):
        gradient_bytes(10, "int8")


@pytest.mark.parametrize(
    ("args", "message"),
    [((0, 8, 1, 16, GB), "0 worker replicas"), ((2, 8, 0, 16, GB), "at least 1 reducer"),
     ((2, 0, 1, 16, GB), "worker bandwidth"), ((2, 8, 1, -1, GB), "reducer bandwidth"),
     ((2, 8, 1, 16, 0), "gradient size")],
)  # fmt: skip
def test_bad_inputs(args: tuple, message: str) -> None:
    with pytest.raises(EstimateError, match=message):
        estimate(*args)
