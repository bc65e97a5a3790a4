"""`vtrain local` on a tuning job: trials as real local jobs, metrics read from what trainers reported.

Most tests use tests/data/trainers/tuner (no TensorFlow: score = -(x-3)^2, +1 when y is b); one
runs the keras template's grid of two learning rates, both trials at once, with real TensorFlow (the grid's
cross product and its order are the tuner trainer's tests: a TensorFlow trial costs ~10 CPU-s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.local.test_local_run import alive
from vtrain.errors import JobFailed
from vtrain.handle import CANCELLED, FAILED, SUCCEEDED
from vtrain.local.study_run import run_local_tuning

TUNER = REPO / "tests" / "data" / "trainers" / "tuner"
KERAS = REPO / "trainer_templates" / "keras"


def job(tmp_path: Path, tuning: str, args: str = "[]", package: Path = TUNER, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(f"""\
        name: tune-local
        trainer: {{package: {package}, module: trainer.task, args: {args}}}
        cluster:
          chief: {{machine_type: n1-standard-4}}
        tuning:
        """) + textwrap.indent(textwrap.dedent(tuning), "  "), encoding="utf-8")
    return path


GRID = """\
    metric: {name: score, goal: maximize}
    parameters:
      x: {type: discrete, values: [1, 3]}
      y: {type: categorical, values: [a, b]}
    algorithm: grid
    max_trials: 4
    parallel_trials: 2
    """
RANDOM = """\
    metric: {name: score, goal: maximize}
    parameters:
      x: {type: double, min: 0, max: 6}
      y: {type: categorical, values: [a, b]}
    algorithm: random
    max_trials: 3
    parallel_trials: 3
    """


def cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "VTRAIN_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "vtrain", "local", *args], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


@pytest.mark.slow
def test_cli_grid_runs_four_trials_two_at_a_time_and_names_the_best(tmp_path: Path, cache: Path) -> None:
    done = cli(str(job(tmp_path, GRID)), "--output-dir", str(tmp_path / "out"), cache=cache)
    assert done.returncode == 0, done.stderr
    assert "best trial 4, score 1.03 with --x=3 --y=b" in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["TRIAL", "STATE", "x", "y", "score", "STEP"]
    assert [line.split()[:5] for line in lines[1:]] == [
        ["1", "SUCCEEDED", "1", "a", "-3.97"], ["2", "SUCCEEDED", "1", "b", "-2.97"],
        ["3", "SUCCEEDED", "3", "a", "0.03"], ["4*", "SUCCEEDED", "3", "b", "1.03"]]
    summary = json.loads((tmp_path / "out" / "vtrain-tuning.json").read_text())
    assert summary["best_trial"] == "4" and summary["state"] == SUCCEEDED
    for trial in summary["trials"]:  # Vertex's layout: the trial's AIP_* dirs under OUTPUT/<trial id>/
        log = (tmp_path / "out" / trial["id"] / "vtrain-local" / "latest" / "chief-0.log").read_text()
        assert f"trial {trial['id']} " in log and f"model_dir={tmp_path / 'out' / trial['id'] / 'model'}" in log
    assert "2 at a time" in done.stderr


@pytest.mark.slow
def test_json_output_and_max_parallel(tmp_path: Path, cache: Path) -> None:
    done = cli(str(job(tmp_path, GRID)), "--output-dir", str(tmp_path / "o"), "--max-parallel", "1", "-o", "json",
               cache=cache)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [t["state"] for t in result["trials"]] == ["SUCCEEDED"] * 4
    assert "1 at a time" in done.stderr


@pytest.mark.slow
def test_random_search_with_a_seed_is_reproducible(tmp_path: Path, cache: Path) -> None:
    def params(seed: str, where: str) -> list[dict]:
        done = cli(str(job(tmp_path, RANDOM)), "--output-dir", str(tmp_path / where), "--seed", seed, "-o", "json",
                   cache=cache)
        assert done.returncode == 0, done.stderr
        return [t["parameters"] for t in json.loads(done.stdout)["trials"]]

    first = params("11", "a")
    assert len(first) == 3
    assert sorted(map(json.dumps, first)) == sorted(map(json.dumps, params("11", "b")))
    assert sorted(map(json.dumps, first)) != sorted(map(json.dumps, params("12", "c")))


@pytest.mark.slow
def test_failed_trials_count_against_the_budget(tmp_path: Path, cache: Path) -> None:
    path = job(tmp_path, GRID.rstrip(" ") + "    max_failed_trials: 1\n", "[--fail-if-y=b]")
    study = run_local_tuning(path, output_dir=tmp_path / "out", cache_dir=cache, max_parallel=1)
    assert study.wait() == FAILED
    assert "2 trials failed, more than max_failed_trials (1)" in (study.error or "")
    assert [t.state for t in study.trials] == ["SUCCEEDED", "INFEASIBLE", "SUCCEEDED", "INFEASIBLE"]
    assert "failing on purpose" in (study.trials[1].error or "")
    assert study.exit_code == 10
    with pytest.raises(JobFailed) as info:
        study.result()  # issue 30, class 7: the handle's method, no longer hidden by the summary dict
    assert info.value.exit_code == 10 and study.summary["state"] == FAILED


@pytest.mark.slow
def test_a_study_s_result_and_wait_hooks_are_the_handle_s(tmp_path: Path, cache: Path) -> None:
    """Issue 30, class 7: `study.result()` waits and returns the state; `wait` takes the handle's hooks
    (on_state, on_log) like every other handle; the summary is `study.summary`, as its JSON file has it."""
    path = job(tmp_path, GRID.replace("max_trials: 4", "max_trials: 2"))
    study = run_local_tuning(path, output_dir=tmp_path / "out", cache_dir=cache)
    states: list[str] = []
    lines: list[str] = []
    assert study.wait(timeout=120, on_state=lambda state, elapsed: states.append(state), on_log=lines.append) \
        == SUCCEEDED
    assert states[-1] == SUCCEEDED and any("trial 1" in line for line in lines)
    assert study.result() == SUCCEEDED
    assert study.summary["state"] == SUCCEEDED
    assert json.loads((tmp_path / "out" / "vtrain-tuning.json").read_text(encoding="utf-8")) == study.summary


@pytest.mark.slow
def test_a_trial_that_reports_nothing_is_infeasible(tmp_path: Path, cache: Path) -> None:
    path = job(tmp_path, GRID.replace("max_trials: 4", "max_trials: 2"), "[--no-report]")
    done = cli(str(path), "--output-dir", str(tmp_path / "out"), cache=cache)
    assert done.returncode == 10
    assert "reported no 'score'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_median_rule_stops_a_trial_worse_than_the_completed_ones(tmp_path: Path, cache: Path) -> None:
    tuning = """\
        metric: {name: score, goal: maximize}
        parameters:
          x: {type: categorical, values: ['3', '2.5', '2.8', '0']}  # grid keeps this order
        algorithm: grid
        max_trials: 4
        parallel_trials: 1
        early_stopping: median
        """
    path = job(tmp_path, tuning, "[--steps=40, --sleep=0.05, --slow-if-x-below=1]")
    study = run_local_tuning(path, output_dir=tmp_path / "out", cache_dir=cache)
    assert study.wait() == SUCCEEDED
    last = study.trials[-1]
    assert last.params["x"] == "0" and last.stopped_early and last.state == "SUCCEEDED"
    assert last.reports[-1][0] < 40  # it stopped long before its 40 slow steps
    assert not any(t.stopped_early for t in study.trials[:3])
    assert study.best is not None and study.best.id == "1"


def test_cancel_leaves_no_process(tmp_path: Path, cache: Path) -> None:
    path = job(tmp_path, GRID, "[--sleep=30]")
    study = run_local_tuning(path, output_dir=tmp_path / "out", cache_dir=cache)
    for _ in range(400):
        if sum(bool(t.job is not None and t.job.pids) for t in list(study.trials)) == 2:
            break
        study._finished.wait(0.05)
    pids = [pid for t in study.trials if t.job is not None for pid in t.job.pids.values()]
    assert len(pids) == 2
    study.cancel()
    assert study.wait(timeout=60) == CANCELLED
    assert not any(alive(pid) for pid in pids)
    assert study.exit_code == 11



@pytest.mark.slow
def test_keras_template_grid_two_trials_in_parallel(tmp_path: Path, cache: Path) -> None:
    tuning = """\
        metric: {name: loss, goal: minimize}
        parameters:
          learning-rate: {type: discrete, values: [0.01, 0.05]}
          batch-size: {type: discrete, values: [16]}
        algorithm: grid
        max_trials: 2
        parallel_trials: 2
        """
    path = job(tmp_path, tuning, "[--epochs=2, --steps-per-epoch=3, --num-features=4]", package=KERAS)
    study = run_local_tuning(path, output_dir=tmp_path / "out", cache_dir=cache, max_parallel=2)
    assert study.wait(timeout=800) == SUCCEEDED, study.error
    assert [t.state for t in study.trials] == ["SUCCEEDED"] * 2
    for t in study.trials:
        assert [step for step, _ in t.reports] == [1, 2]  # the template's metric_reporter, once per epoch
        reported = json.loads((t.metric_file).read_text().splitlines()[-1])
        assert float(reported["loss"]) == t.final and reported["trial"] == t.id
        lr, batch = t.params["learning-rate"], int(t.params["batch-size"])
        assert t.args == [f"--learning-rate={lr:g}", f"--batch-size={batch}"]
        pids = t.job.pids.values() if t.job else []
        assert not any(alive(pid) for pid in pids)
    best = study.best
    assert best is not None and best.final == min(t.final for t in study.trials if t.final is not None)


def test_run_local_of_a_tuning_file_points_at_run_local_tuning_and_the_reverse() -> None:
    """One dispatch (request.build.kind_of): each SDK entry refuses the other kind before anything starts."""
    import vtrain
    from vtrain.errors import BackendError, UsageError

    study = vtrain.load_config(REPO / "configs" / "tuning" / "grid-keras.yaml")
    with pytest.raises(UsageError, match="run_local_tuning runs its study"):
        vtrain.run_local(study)
    with pytest.raises(BackendError, match="no tuning: block"):
        vtrain.run_local_tuning(vtrain.load_config(REPO / "configs" / "quickstart.yaml"))
