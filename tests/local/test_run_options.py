"""RunOptions: one value for a local run's options, equal by default to the keywords `run_local` took,
and the one layer that still accepts those keywords. No process is started here."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import vtrain
from tests.local.test_tuning_local import GRID, job
from vtrain.emulator.local_jobs import EMULATED, EmulatedRunner
from vtrain.emulator.local_studies import TuningRunner
from vtrain.errors import BackendError, UsageError
from vtrain.local import runner
from vtrain.local.faults import parse_fault
from vtrain.local.options import FIELDS, RunOptions, run_options
from vtrain.local.study_run import run_local_tuning

#: The keyword defaults of run_local before RunOptions (vtrain 0.1.0's signature).
BEFORE = {"output_dir": None, "max_replicas": None, "timeout": None, "keep": True, "cache_dir": None,
          "allow_credentials": False, "startup_timeout": 120.0, "worker_grace": 30.0, "kill_grace": 5.0,
          "restart_policy": "vertex", "faults": (), "preempt_grace": 30.0,
          "containers": "auto",  # new since: image jobs in containers where this machine can run them
          "runtime": "auto",  # new since: a prebuilt-image job on the image's stack (vtrain.local.runtimes)
          "check_output": None}  # new since: what the output must be (`model:`'s SavedModel check), none by default


def container_job(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text("name: t\ntrainer: {container: {image_uri: example.com/i:1}}\n"
                    "cluster:\n  chief: {machine_type: n1-standard-4}\n")
    return path


def test_the_defaults_are_the_keyword_defaults_of_before() -> None:
    assert dataclasses.asdict(RunOptions()) == BEFORE
    assert vtrain.RunOptions is RunOptions


def test_keywords_build_the_options_in_one_place() -> None:
    fault = parse_fault("worker-0:kill@5s")
    built = run_options(None, {"timeout": 60.0, "faults": [fault]}, "run_local")
    assert built == RunOptions(timeout=60.0, faults=(fault,))
    assert built.faults == (fault,)  # a list given becomes a tuple: the value stays frozen
    given = RunOptions(kill_grace=1.0, keep=False)
    assert run_options(given, {}, "run_local") is given
    assert run_options(given, {"keep": True}, "run_local") == RunOptions(kill_grace=1.0, keep=True)  # keywords win
    assert run_options(None, {}, "x", base=EMULATED) is EMULATED
    with pytest.raises(TypeError, match=r"run_local\(\) got an unexpected keyword argument 'timout'"):
        run_options(None, {"timout": 60}, "run_local")


def test_every_entry_point_takes_options_and_no_longer_lists_each_one() -> None:
    for fn in (runner.run_local, runner.run_job, run_local_tuning):
        params = inspect.signature(fn).parameters
        assert "options" in params and not set(FIELDS) & set(params), fn.__name__


def test_the_typed_keywords_are_the_options_fields() -> None:
    """RunKeywords (what a type checker reads of run_local's **keywords) has RunOptions' names and types."""
    import typing

    from vtrain.local import options

    hints = typing.get_type_hints(options.RunOptions, vars(options))
    assert typing.get_type_hints(options.RunKeywords, vars(options)) == {name: hints[name] for name in FIELDS}
    for fn in (runner.run_local, runner.run_job, run_local_tuning):
        assert str(inspect.signature(fn).parameters["keywords"].annotation) == "Unpack[RunKeywords]", fn.__name__


def test_run_local_keeps_taking_the_old_keywords(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_run_job(job: Any, **kw: Any) -> Any:
        seen.update(kw)
        raise BackendError("stop here")

    monkeypatch.setattr(runner, "prepare_trainer", lambda *a: (None, None, {}))
    monkeypatch.setattr(runner, "prepare_images", lambda *a: {})  # no registry to pull example.com/i:1 from
    monkeypatch.setattr(runner, "run_job", fake_run_job)
    path = container_job(tmp_path)
    with pytest.raises(BackendError):
        runner.run_local(path, timeout=60.0, keep=False, restart_policy="never")
    assert seen["options"] == RunOptions(timeout=60.0, keep=False, restart_policy="never")
    with pytest.raises(TypeError, match="unexpected keyword argument 'kepp'"):
        runner.run_local(path, kepp=False)


def test_the_cli_builds_one_run_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vtrain.cli import cli

    seen: dict[str, Any] = {}

    def fake_run_local(config: Any, **kw: Any) -> Any:
        seen.update(kw)
        raise BackendError("stop here")

    monkeypatch.setattr(runner, "run_local", fake_run_local)
    path = container_job(tmp_path)
    result = CliRunner().invoke(cli, ["local", str(path), "--timeout", "10m", "--keep", "--restart-policy", "never",
                                      "--fault", "chief-0:preempt@step:3", "--preempt-grace", "5s"])
    assert result.exit_code != 0 and "stop here" in result.output
    assert seen["options"] == RunOptions(timeout=600.0, keep=True, restart_policy="never", preempt_grace=5.0,
                                         faults=(parse_fault("chief-0:preempt@step:3"),))


def test_a_study_refuses_faults_before_packaging(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="faults apply to a single job"):
        run_local_tuning(job(tmp_path, GRID), faults=[parse_fault("chief-0:kill@1s")])


def test_the_emulator_runners_keep_their_defaults_and_keywords() -> None:
    runner_ = EmulatedRunner()
    assert runner_.options == RunOptions(keep=False, kill_grace=3.0)
    assert EmulatedRunner(kill_grace=2, cache_dir="/c").options == RunOptions(keep=False, kill_grace=2, cache_dir="/c")
    assert TuningRunner(kill_grace=2).options == RunOptions(keep=False, kill_grace=2)
    assert TuningRunner(options=RunOptions(restart_policy="never")).options.restart_policy == "never"
