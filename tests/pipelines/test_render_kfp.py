"""`vtrain render -o kfp`: the job as a reusable Vertex AI Pipelines component; the CLI never imports kfp unasked."""

# No `from __future__ import annotations`: KFP reads pipeline annotations as types.

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import REPO
from tests.helpers import write_job
from vtrain.cli import cli

QUICKSTART = REPO / "configs" / "quickstart.yaml"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_the_cli_imports_no_kfp_until_asked(tmp_path: Path) -> None:
    """Every command module loads, and render runs (json), with kfp and Google's components never imported."""
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, json, pkgutil, importlib, vtrain.cli, vtrain.commands\n"
         "for m in pkgutil.iter_modules(vtrain.commands.__path__):\n"
         "    importlib.import_module('vtrain.commands.' + m.name)\n"
         "from click.testing import CliRunner\n"
         f"r = CliRunner().invoke(vtrain.cli.cli, ['render', {str(QUICKSTART)!r}]); assert r.exit_code == 0, r.output\n"
         "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
         "('kfp', 'google_cloud_pipeline_components', 'vtrain') and m.startswith(('kfp', 'google_cloud_pip', "
         "'vtrain.pipelines')))))"],
        capture_output=True, text=True, cwd=REPO, check=True,
    )  # fmt: skip
    assert json.loads(probe.stdout) == []


def test_render_kfp_refuses_a_bad_job_file_in_one_line_before_kfp(tmp_path: Path) -> None:
    bad = write_job(tmp_path, """
        name: bad
        trainer: {package_uris: [gs://my-bkt/t.tar.gz], module: trainer.task, image: tf-cpu.2-17}
        cluster: {chief: {machine_type: n1-standard-4, replicaz: 2}}
        """)
    code, out, err = run("render", str(bad), "-o", "kfp")
    assert code == 2 and out == ""
    assert "job.yaml:3:" in err and "cluster.chief.replicaz" in err and "Traceback" not in err


@pytest.mark.parametrize("missing", ["kfp", "google_cloud_pipeline_components"])
def test_render_kfp_without_the_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    if missing != "kfp":
        pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed: it is named first")
    monkeypatch.setitem(sys.modules, missing, None)  # as if not installed: importing it raises ImportError
    code, out, err = run("render", str(QUICKSTART), "-o", "kfp")
    assert (code, out) == (2, "")
    assert err == (f"error: -o kfp needs the pipelines extra ({missing} is not installed): pip install "
                   "'vtrain[pipelines]' and pip install --no-deps google-cloud-pipeline-components==2.22.0 (docs: "
                   "Pipelines guide)\n")


def test_render_kfp_refuses_model_and_tuning_and_unasked_secrets(tmp_path: Path) -> None:
    pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
    code, out, err = run("render", str(QUICKSTART), "-o", "kfp", "--model")
    assert (code, out) == (2, "") and "error: --model renders the UploadModel request as json or yaml, not kfp" in err
    tuning = REPO / "configs" / "tuning" / "grid-keras.yaml"
    code, out, err = run("render", str(tuning), "-o", "kfp")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].startswith("error: ")
    assert "a job file with `tuning:` makes a HyperparameterTuningJob" in err
    code, out, err = run("render", str(QUICKSTART), "-o", "kfp", "--set", "trainer.env.API_TOKEN=abcd1234efgh")
    assert (code, out) == (2, "") and "secret-looking values" in err and "abcd1234efgh" not in err
    code, out, _ = run("render", str(QUICKSTART), "-o", "kfp", "--set", "trainer.env.API_TOKEN=abcd1234efgh",
                       "--show-secrets")
    assert code == 0 and "abcd1234efgh" in out


def test_render_kfp_writes_a_component_that_loads_and_runs_renders_job(tmp_path: Path) -> None:
    pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
    pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is missing")
    from kfp import components, dsl

    from tests.pipelines.compiled import compile_to_spec, custom_jobs, with_op_defaults
    from vtrain.jobfile.artifacts import plan_artifacts
    from vtrain.jobfile.load import load_config
    from vtrain.request.build import build_request

    code, out, err = run("render", str(QUICKSTART), "-o", "kfp", "--region", "europe-west4")
    assert code == 0, err
    assert "`vtrain package` builds and stages them" in err
    (tmp_path / "quickstart.yaml").write_text(out, encoding="utf-8")
    op = components.load_component_from_file(str(tmp_path / "quickstart.yaml"))
    assert op.name == "quickstart-keras"

    @dsl.pipeline(name="outer")
    def outer() -> None:
        op()

    spec = compile_to_spec(outer, tmp_path)
    inner = {k: v for k, v in spec["components"].items() if "dag" in v}
    assert len(inner) == 1  # the component is a one-step pipeline: its CustomJob is render's
    config = load_config(QUICKSTART)
    body = build_request(config, plan_artifacts(config, region="europe-west4"), region="europe-west4").body
    (job,) = custom_jobs(yaml.safe_load(out)).values()
    assert job["_location"] == "europe-west4"
    assert job["jobSpec"] == with_op_defaults(body["jobSpec"])
