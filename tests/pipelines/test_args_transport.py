"""Issue 46, class 6: a pipeline's args reach the trainer exactly as written, whatever characters they hold.

The args travelled as JSON (ASCII-escaped) inside a `--set` that YAML reads: a character outside Unicode's basic
plane (an emoji) became two lone surrogates and the job was refused for "a lone surrogate (from a \\u escape)"
nobody wrote; U+0085 and U+2028 would have become line breaks. The `--set` items are now YAML that reads back
as exactly the list they were made of (vtrain.jobfile.load.override); what no process argument can hold (NUL,
a lone surrogate) is one clear line at compile time and when the step runs, never a traceback."""

# No `from __future__ import annotations`: KFP reads pipeline annotations as types.

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import write_job
from vtrain.cli import cli
from vtrain.errors import UsageError
from vtrain.jobfile.load import load_config, override
from vtrain.pipelines.step import args_overrides, load_step

EMOJI = ["--note", "hi 😀", "--lang=日本語", "\U0001f680\U000e0001", "a\u0085b\u2028c\ufeffd\x7f\t\n", 'q"\\']
#: Any text a process argument can hold: every code point but NUL and the surrogates.
ARG = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job whose trainer has args, and whose workers have their own (each gets the extra args)."""
    return write_job(tmp_path_factory.mktemp("transport"), """
        name: transport
        region: us-central1
        staging_bucket: gs://my-bucket/staging
        trainer:
          package_uris: [gs://my-bucket/trainer-0.1.tar.gz]
          module: trainer.task
          image: tf-cpu.2-17
          args: ["--epochs", "3"]
        cluster:
          chief: {machine_type: n1-standard-4}
          workers: {machine_type: n1-standard-4, replicas: 1, args: ["--role=worker"]}
        """)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.lists(ARG, max_size=6))
def test_any_args_list_reaches_every_pool_exactly(job: Path, extra: list[str]) -> None:
    config = load_config(job)
    sets = args_overrides(config, extra)
    assert all(item.isascii() for item in sets)  # one argv item each, whatever the terminal or locale
    again = load_config(job, sets)
    assert again.trainer.args == ("--epochs", "3", *extra)
    assert again.workers is not None and again.workers.args == ("--role=worker", *extra)


@given(value=st.recursive(st.none() | st.booleans() | st.integers() | ARG,
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ARG, inner, max_size=4),
                          max_leaves=12))
@settings(max_examples=150, deadline=None)
def test_an_override_reads_back_as_the_value_it_was_made_of(value: Any) -> None:
    from vtrain.jobfile.load import _override_value

    key, _, raw = override("x.y", value).partition("=")
    assert key == "x.y" and _override_value(raw)[0] == value


def test_the_cli_reads_the_step_overrides_as_submit_will(job: Path) -> None:
    """`launch` hands these items to `vtrain submit --set`: `render` reads them with the same loader."""
    sets = args_overrides(load_config(job), EMOJI)
    done = CliRunner().invoke(cli, ["render", str(job), *(a for s in sets for a in ("--set", s))])
    assert done.exit_code == 0, done.output
    pools = json.loads(done.stdout)["jobSpec"]["workerPoolSpecs"]
    assert pools[0]["pythonPackageSpec"]["args"] == ["--epochs", "3", *EMOJI]
    assert pools[1]["pythonPackageSpec"]["args"] == ["--role=worker", *EMOJI]


def test_compiled_ops_carry_the_args_exactly(job: Path, tmp_path: Path) -> None:
    pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
    pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is missing")
    from kfp import dsl

    from tests.pipelines.compiled import compile_to_spec, custom_jobs
    from vtrain.pipelines import launcher_op, training_op

    assert load_step(job, EMOJI).body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["args"][2:] == EMOJI

    @dsl.pipeline(name="train")
    def pipeline() -> None:
        training_op(job, EMOJI)
        launcher_op(job, EMOJI)

    spec = compile_to_spec(pipeline, tmp_path)
    (compiled,) = custom_jobs(spec).values()
    assert [p["pythonPackageSpec"]["args"] for p in compiled["jobSpec"]["workerPoolSpecs"]] == [
        ["--epochs", "3", *EMOJI], ["--role=worker", *EMOJI]]
    launcher = next(t for name, t in spec["root"]["dag"]["tasks"].items() if name.startswith("vtrain-launcher"))
    assert launcher["inputs"]["parameters"]["args"]["runtimeValue"]["constant"] == EMOJI


@pytest.mark.parametrize(("arg", "said"), [("a\x00b", "holds a NUL character at character 2"),
                                           ("x\ud83d", "holds a lone surrogate (\\ud83d) at character 2")])
def test_what_no_process_argument_can_hold_is_one_line_at_compile_and_at_run_time(
        job: Path, arg: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match=r"^args\[1\] " + said.replace("(", r"\(").replace(")", r"\)")
                       .replace("\\u", "\\\\u")):
        load_step(job, ["--note", arg])
    pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
    pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is missing")
    from vtrain.pipelines.launcher import launch

    with pytest.raises(SystemExit) as ended:  # the step: vtrain's exit code and line, no process started
        launch(str(job), ["--note", arg], 0, None, None)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert f"vtrain launcher: the step failed: args[1] {said}" in err and "Traceback" not in err
