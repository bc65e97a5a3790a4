"""Grid, seeded random and TPE suggestions, the median stopping rule, and how values become flags."""

from __future__ import annotations

import math

import pytest

from vtrain.tuning import search
from vtrain.tuning.config import MetricConfig, ParameterConfig, TuningConfig


def study(*params: ParameterConfig, algorithm: str = "random", goal: str = "maximize") -> TuningConfig:
    return TuningConfig((MetricConfig("acc", goal),), params, max_trials=50, algorithm=algorithm)


LR = ParameterConfig("lr", "double", 1e-4, 1e-1, "log")
UNITS = ParameterConfig("units", "integer", 8, 64)
BATCH = ParameterConfig("batch", "discrete", values=(16, 32))
OPT = ParameterConfig("opt", "categorical", values=("sgd", "adam"))


def test_grid_is_every_combination_in_file_order() -> None:
    g = search.make_searcher(study(BATCH, OPT, ParameterConfig("n", "integer", 1, 2), algorithm="grid"))
    points = []
    while (p := g.suggest()) is not None:
        points.append((p["batch"], p["opt"], p["n"]))
    assert points[:3] == [(16.0, "sgd", 1), (16.0, "sgd", 2), (16.0, "adam", 1)]
    assert len(points) == len(set(points)) == 8


def test_random_search_is_reproducible_by_seed_and_respects_scales() -> None:
    def draws(seed: int) -> list[dict]:
        s = search.make_searcher(study(LR, UNITS, BATCH, OPT), seed)
        return [s.suggest() for _ in range(200)]

    first = draws(7)
    assert first == draws(7) and first != draws(8)
    lrs = [d["lr"] for d in first]
    assert all(1e-4 <= v <= 1e-1 for v in lrs)
    assert sum(v < 1e-2 for v in lrs) > 100  # log scale: two of three decades lie below 0.01
    assert {d["units"] for d in first} <= set(range(8, 65)) and {8, 64} <= {d["units"] for d in first}
    assert {d["batch"] for d in first} == {16.0, 32.0} and {d["opt"] for d in first} == {"sgd", "adam"}
    rev = search.make_searcher(study(ParameterConfig("m", "double", 0.9, 0.9999, "reverse_log")), 1)
    ms = [rev.suggest()["m"] for _ in range(200)]  # type: ignore[index]
    assert all(0.9 <= m <= 0.9999 for m in ms) and sum(m > 0.95 for m in ms) > 100


def test_default_uses_optuna_tpe_seeded_and_says_so() -> None:
    pytest.importorskip("optuna")
    def run(seed: int) -> list[dict]:
        s = search.make_searcher(study(LR, UNITS, OPT, algorithm="default"), seed)
        assert s.notice and "TPE" in s.notice
        out = []
        for _ in range(12):
            p = s.suggest()
            assert p is not None
            s.tell(p, -abs(math.log10(p["lr"]) + 2))  # best near lr = 0.01
            out.append(p)
        return out

    assert run(3) == run(3)
    failing = search.make_searcher(study(LR, algorithm="default"), 0)
    p = failing.suggest()
    failing.tell(p, None)  # a failed trial is told, not dropped


def test_median_rule() -> None:
    done = [[(1, 0.5), (2, 0.6)], [(1, 0.7), (2, 0.8)], [(1, 0.2), (2, 0.3)]]
    # running averages at step 2: 0.55, 0.75, 0.25 -> median 0.55
    assert search.should_stop_median([(1, 0.4), (2, 0.5)], done, maximize=True)
    assert not search.should_stop_median([(1, 0.6)], done, maximize=True)  # at step 1: 0.5, 0.7, 0.2 -> 0.5
    assert not search.should_stop_median([(1, 0.1)], done[:1], maximize=True)  # too few completed
    assert search.should_stop_median([(1, 0.9)], done, maximize=False)
    assert not search.should_stop_median([], done, maximize=True)


def test_best_and_flags() -> None:
    assert search.best_index([0.2, None, 0.9, 0.9], maximize=True) == 2
    assert search.best_index([0.2, None, 0.1, 0.1], maximize=False) == 2
    assert search.best_index([None, float("nan")], maximize=True) is None
    assert search.flag_value(BATCH, 32.0) == "32"
    assert search.flag_value(LR, 0.001) == "0.001"
    assert search.flag_value(UNITS, 9) == "9"
    assert search.flag_value(OPT, "adam") == "adam"
    assert search.trial_args(study(LR, OPT), {"lr": 0.5, "opt": "sgd"}) == ["--lr=0.5", "--opt=sgd"]
