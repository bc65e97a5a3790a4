"""Issue 46, class 14: lines that misled. A suggestion that breaks the rule it fixes ("try 'a'" for an alias,
"try '/http://x/y'" for a route); `render -o kfp`'s refusal with its own advice redacted; `model upload` of a
full job name blaming a --project nobody gave; `package --launcher` errors naming settings it does not have.

Each by its mechanism: every "try 'X'" the job file's rules print is put back in the job and must pass the
rule it was given for (a property over any text); no option of any vtrain command reads as a secret's name in
vtrain's own lines; where a job is looked for says where each value came from; the image builder's errors
name the settings of whatever builds the image."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers import write_job
from tests.trainer.image_helpers import FAKE_LIBC, Registry, push_base
from vtrain.cli import cli
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.load import load_config
from vtrain.request.redact import redact_strings

JOB: dict[str, Any] = {
    "name": "honest", "region": "us-central1", "base_output_dir": "gs://my-bucket/out",
    "trainer": {"package_uris": ["gs://my-bucket/t-0.1.tar.gz"], "module": "trainer.task", "image": "tf-cpu.2-15"},
    "cluster": {"chief": {"machine_type": "n1-standard-4"}},
}
_TRY = re.compile(r"try '(.*)'$", re.DOTALL)


def _with(**changes: Any) -> dict[str, Any]:
    return {**JOB, **changes}


def _chief(**changes: Any) -> dict[str, Any]:
    return {"chief": {"machine_type": "n1-standard-4", **changes}}


#: rule → (the job with a value in the place the rule reads, the key path prefix its problems are under)
RULES: dict[str, tuple[Callable[[str], dict[str, Any]], str]] = {
    "version alias": (lambda v: _with(model={"version_aliases": [v]}), "model.version_aliases"),
    "predict route": (lambda v: _with(model={"routes": {"predict": v}}), "model.routes"),
    "health route": (lambda v: _with(model={"routes": {"health": v}}), "model.routes"),
    "label key": (lambda v: _with(labels={v: "x"}), "labels"),
    "label value": (lambda v: _with(labels={"team": v}), "labels"),
    "model label key": (lambda v: _with(model={"labels": {v: "x"}}), "model.labels"),
    "model label value": (lambda v: _with(model={"labels": {"stage": v}}), "model.labels"),
    "env name": (lambda v: _with(trainer={**JOB["trainer"], "env": {v: "1"}}), "trainer.env"),
    "experiment": (lambda v: _with(experiment=v), "experiment"),
    "run name": (lambda v: _with(experiment="e" * 60, experiment_run=v), "experiment_run"),
    "tuning parameter": (lambda v: _with(tuning={"metric": {"name": "loss", "goal": "minimize"}, "max_trials": 2,
                                                 "parameters": {v: {"type": "discrete", "values": [1, 2]}}}),
                         "tuning.parameters"),
    "mount point": (lambda v: _with(network="projects/1/global/networks/v", cluster=_chief(
        nfs_mounts=[{"server": "10.0.0.2", "path": "/share", "mount_point": v}])), "cluster.chief.nfs_mounts"),
}


def _problems(data: dict[str, Any], under: str) -> list[Problem]:
    try:
        load_config(data)
    except ConfigError as err:
        return [p for p in err.problems if p.path == under or p.path.startswith((f"{under}.", f"{under}["))]
    return []


def _suggestions(data: dict[str, Any], under: str) -> list[str]:
    return [found[1] for p in _problems(data, under) if (found := _TRY.search(p.message))]


@pytest.mark.parametrize("rule", RULES)
@settings(max_examples=60, deadline=None)
@given(value=st.text(max_size=24) | st.sampled_from(["a", "relA", "_", "x-", "http://x/y", "predict", "/a b",
                                                      "Release", "A" * 200, "1abc", "İ", "..", "/data"]))
@example(value="a").via("the issue: an alias of one letter")
@example(value="http://x/y").via("the issue: a URL for a route")
def test_every_suggestion_passes_the_rule_it_fixes(rule: str, value: str) -> None:
    make, under = RULES[rule]
    for suggestion in _suggestions(make(value), under):
        assert _problems(make(suggestion), under) == [], (rule, value, suggestion)


def test_the_instances_of_the_issue_get_suggestions_that_hold() -> None:
    assert _suggestions(RULES["version alias"][0]("a"), "model.version_aliases") == ["a1"]
    assert _suggestions(RULES["predict route"][0]("http://x/y"), "model.routes") == ["/y"]
    assert _suggestions(RULES["predict route"][0]("predict"), "model.routes") == ["/predict"]
    assert _suggestions(RULES["version alias"][0]("relA"), "model.version_aliases") == ["rela"]
    assert _suggestions(RULES["label key"][0]("Vtrain-Job-Id"), "labels") == ["vtrain-job-id"]  # not reserved here
    assert _suggestions(RULES["model label key"][0]("Vtrain-Job-Id"), "model.labels") == ["x-vtrain-job-id"]


def _options() -> Iterator[tuple[str, str]]:
    """(command, option) for every long option of every vtrain command and subcommand."""
    ctx = click.Context(cli)

    def walk(group: click.Group, prefix: str) -> Iterator[tuple[str, str]]:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None:
                continue
            if isinstance(command, click.Group):
                yield from walk(command, f"{prefix}{name} ")
            for param in command.params:
                for opt in [*param.opts, *getattr(param, "secondary_opts", [])]:
                    if opt.startswith("--"):
                        yield f"{prefix}{name}", opt

    yield from walk(cli, "")


def test_no_option_of_vtrain_reads_as_a_secret_in_vtrains_own_lines() -> None:
    """vtrain's lines go through the redaction every output uses (a user's value may hold a secret): its own
    advice, "pass --show-secrets to write them", must come through whole."""
    options = list(_options())
    assert ("render", "--show-secrets") in options and ("package", "--allow-credentials") in options
    hidden = [(command, opt) for command, opt in options
              if redact_strings(f"pass {opt} to do it, or {opt} again") != f"pass {opt} to do it, or {opt} again"]
    assert hidden == [("emulator", "--token")]  # it takes a secret (the emulator's token): hiding what follows is right


def test_render_kfp_shows_its_refusal_whole(tmp_path: Path) -> None:
    pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
    job = write_job(tmp_path, """
        name: leaky
        trainer: {package_uris: [gs://my-bucket/t.tar.gz], module: trainer.task, image: tf-cpu.2-17,
                  env: {API_TOKEN: abcd1234efgh}}
        cluster: {chief: {machine_type: n1-standard-4}}
        """)
    done = CliRunner().invoke(cli, ["render", str(job), "-o", "kfp"])
    assert done.exit_code == 2 and done.stderr.endswith(
        "(env API_TOKEN), which the component would carry in clear: pass --show-secrets to write them, or have the "
        "trainer read them from Secret Manager\n")


def test_model_upload_of_a_full_name_says_where_each_value_came_from(tmp_path: Path) -> None:
    """The job file's project is where a bare ID is looked for; a full name says where the job is itself."""
    from tests.helpers import planned
    from vtrain.cloud.vertex import VertexBackend
    from vtrain.emulator import Emulator, RunResult
    from vtrain.request.build import build_request
    from vtrain.request.custom_job import to_proto

    path = write_job(tmp_path, """
        name: train
        project: file-project
        region: us-central1
        base_output_dir: gs://bkt/out
        trainer: {package_uris: [gs://bkt/t.tar.gz], module: trainer.task, image: tf-cpu.2-15}
        cluster: {chief: {machine_type: n1-standard-4}}
        model: {display_name: churn}
        """)
    with Emulator(runner=lambda job, ctx: RunResult(), pending_seconds=0.01, cancel_seconds=0.01) as emu:
        backend = VertexBackend.from_endpoint("other-project", "us-central1", emu.url)
        job = backend.create(to_proto(build_request(*planned(load_config(path))).body))
        job.wait(timeout=60, poll=0.02)
        name = f"projects/other-project/locations/us-central1/customJobs/{job.job_id}"
        done = CliRunner().invoke(cli, ["model", "upload", name, "-f", str(path), "--api-endpoint", emu.url])
        assert done.exit_code == 0, done.output
        assert done.stdout.startswith("model registered: projects/") and "?project=other-project" in done.stdout
        flag = CliRunner().invoke(cli, ["model", "upload", name, "-f", str(path), "--api-endpoint", emu.url,
                                        "--project", "flag-project"])
    assert flag.exit_code == 1 and flag.stderr == (
        f"error: job {name} is in project other-project, not flag-project (from --project)\n")


# ---- package --launcher names its own settings ----------------------------------------------------------


def _launcher_job(tmp_path: Path) -> Path:
    return write_job(tmp_path, """
        name: launched
        region: us-central1
        staging_bucket: gs://launcher-test/staging
        trainer: {package_uris: [gs://launcher-test/t-0.1.tar.gz], module: trainer.task, image: tf-cpu.2-17}
        cluster: {chief: {machine_type: n1-standard-4}}
        """)


@pytest.mark.parametrize(("argv", "said"), [
    (["--launcher-python", "3.11"], "error: --launcher-python needs --launcher REPOSITORY"),
    (["--launcher-platform", "x", "--launcher-base", "b"], "error: --launcher-base, --launcher-platform need "
                                                            "--launcher REPOSITORY"),
    (["--launcher", "127.0.0.1:9/t/l", "--launcher-python", "3"],
     "error: --launcher-python (python_version= in vtrain.pipelines.launcher_image): '3' is not a Python version"),
    (["--launcher", "127.0.0.1:9/t/l", "--launcher-platform", "linux_x86_64"],
     "error: --launcher-platform (platform= in vtrain.pipelines.launcher_image): 'linux_x86_64' is not a wheel "
     "platform tag"),
])
def test_launcher_settings_are_checked_before_any_registry_is_asked(tmp_path: Path, argv: list[str],
                                                                    said: str) -> None:
    pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is missing")
    done = CliRunner().invoke(cli, ["package", str(_launcher_job(tmp_path)), *argv])
    assert done.exit_code in (1, 2) and done.stderr.startswith(said), done.output
    assert len(done.output.splitlines()) == 1 and "trainer.build" not in done.output


def test_a_base_the_launcher_cannot_read_names_the_launchers_settings(registry: Registry, tmp_path: Path) -> None:
    pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is missing")
    client = registry.client()
    push_base(client, "base/nopython", [FAKE_LIBC], tmp_path, env=["PATH=/usr/bin:/bin"])
    push_base(client, "base/nolibc", [("etc/hostname", b"x\n", False)], tmp_path)
    job = _launcher_job(tmp_path)
    for base, said in (("nopython", "its config sets no PYTHON_VERSION and no python-version label; set "
                                    "--launcher-python (python_version= in vtrain.pipelines.launcher_image) (e.g. "
                                    "3.10)"),
                       ("nolibc", "so not which wheels it runs; set --launcher-platform (platform= in "
                                  "vtrain.pipelines.launcher_image), e.g. manylinux_2_35_x86_64")):
        done = CliRunner().invoke(cli, ["package", str(job), "--launcher", f"{registry.host}/team/launcher",
                                        "--launcher-base", f"{registry.host}/base/{base}:base"])
        assert done.exit_code == 1 and said in done.stderr, done.output
        assert "trainer.build" not in done.output and "Traceback" not in done.output


def test_pip_failures_name_the_settings_of_what_builds_the_image() -> None:
    from vtrain.trainer.image.launcher import SETTINGS
    from vtrain.trainer.image.wheels import pip_failure

    missing = "ERROR: Could not find a version that satisfies the requirement kfp==9.9 (from versions: none)\n"
    conflict = "ERROR: ResolutionImpossible\nThe conflict is caused by:\n    The user requested kfp==1\n"
    platforms = ["manylinux_2_36_x86_64"]
    assert "set trainer.build.platform" in pip_failure(missing, "3.11", platforms)
    assert "name tensorflow in trainer.build.requirements" in pip_failure(conflict, "3.11", platforms)
    launcher = [pip_failure(text, "3.11", platforms, SETTINGS) for text in (missing, conflict)]
    assert "set --launcher-platform (platform= in vtrain.pipelines.launcher_image)" in launcher[0]
    assert not any("trainer.build" in line for line in launcher), launcher


def test_a_switch_is_no_secret_name_and_a_services_key_still_is() -> None:
    from vtrain.request.redact import is_secret_name

    assert [n for n in ("show-secrets", "allow-credentials", "NO_AUTH", "SKIP_TOKEN", "hide_passwords",
                        "IGNORE_API_KEY") if is_secret_name(n)] == []
    assert [n for n in ("SCAN_API_KEY", "PRINT_TOKEN", "API_TOKEN", "show", "TOKEN") if not is_secret_name(n)] == [
        "show"]
    assert redact_strings("--no-auth --api-key abc123xyz") == "--no-auth --api-key <redacted>"
