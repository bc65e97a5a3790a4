"""A create whose answer is lost never ends in a second paid job (issue 10, class 2).

The emulator creates the job and then loses the answer (a 5xx, a dropped connection, a garbled
200), and the look-ups that follow may fail too. Whatever the mix: exactly one job exists; the
create returns it when it can find it; otherwise the one-line error says the job may exist and
how to find it, and the next `vtrain submit` of the same file finds it instead of creating one.
All through the real aiplatform_v1 REST client."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.cloud.test_backend_vertex import make_job
from tests.cloud.test_submit import job_text
from tests.helpers import FAST_RETRY, MakeEmulator, write_job
from vtrain.cli import cli
from vtrain.cloud.vertex import SUBMIT_LABEL
from vtrain.cloud.vertex import pending as pending_mod
from vtrain.emulator import Emulator, sleep_runner
from vtrain.errors import CreateOutcomeUnknown

SUBMIT = importlib.import_module("vtrain.cloud.submit")
AFTER = ["after", "reset-after", "garble"]


@pytest.fixture
def emu(make_emulator: MakeEmulator, fast_retries: None) -> Emulator:
    return make_emulator(sleep_runner(0.2), pending_seconds=0.05, cancel_seconds=0.2, point_at="test-project")


def posts(emu: Emulator) -> int:
    return sum(r["method"] == "POST" and r["path"].endswith("/customJobs") for r in emu.requests)


# ---- the backend: every way of losing the answer --------------------------------------------------
@pytest.mark.parametrize("lost", AFTER)
@pytest.mark.parametrize("lookups_fail", [0, 1, 2])
def test_the_job_made_by_a_lost_create_is_returned(emu: Emulator, lost: str, lookups_fail: int) -> None:
    emu.fail_next(1, mode=lost)
    emu.fail_next(lookups_fail, mode="reset")
    job = emu_backend(emu).create(make_job())
    assert [j.name for j in emu.jobs()] == [job.name] and posts(emu) == 1


def test_a_lost_answer_and_no_lookup_is_an_error_that_says_the_job_may_exist(emu: Emulator) -> None:
    emu.fail_next(1, mode="garble")
    emu.fail_next(20, mode="reset")  # every look-up fails, the last one too
    with pytest.raises(CreateOutcomeUnknown) as err:
        emu_backend(emu).create(make_job("lost"))
    message = str(err.value)
    assert "\n" not in message and message.startswith("cannot create job 'lost': ")
    assert "the job may exist (vtrain could not look for it); find it with " in message
    [job] = emu.jobs()
    assert job.labels[SUBMIT_LABEL] == err.value.submit_id
    assert f"`vtrain list --label {SUBMIT_LABEL}={err.value.submit_id} --project test-project" in message
    assert f"--api-endpoint {emu.url}`" in message


def test_a_refusal_before_the_work_is_not_a_maybe(emu: Emulator) -> None:
    emu.fail_next(1, code=429)  # 429: refused before any work
    job = emu_backend(emu).create(make_job())
    assert [j.name for j in emu.jobs()] == [job.name]
    assert [r["method"] for r in emu.requests] == ["POST", "POST"]  # no look-up needed


def emu_backend(emu: Emulator) -> Any:
    from vtrain.cloud.vertex import VertexBackend

    backend = VertexBackend.from_endpoint("test-project", "us-central1", emu.url, retry=FAST_RETRY)
    assert backend.api_endpoint == emu.url
    return backend


# ---- the command: the next submit of the same file finds the job ---------------------------------
def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("lost", AFTER)
@pytest.mark.slow
def test_resubmitting_after_a_lost_answer_finds_the_job(
    tmp_path: Path, emu: Emulator, bucket: Any, lost: str
) -> None:
    job_file = str(write_job(tmp_path, job_text()))
    emu.fail_next(1, mode=lost)
    emu.fail_next(20, mode="reset")
    code, out, err = run("submit", job_file, "--no-preflight")  # the next requests fail: the create first
    assert code == 1 and out == ""
    [line] = [x for x in err.splitlines() if x.startswith("error: ")]
    assert "Traceback" not in err and err.rstrip().endswith(line)
    assert "the job may exist" in line
    assert line.endswith("; `vtrain submit` of this job looks for it before creating another")
    submit_id = re.search(rf"--label {SUBMIT_LABEL}=([0-9a-f]+)", line).group(1)  # type: ignore[union-attr]
    [created] = emu.jobs()
    assert created.labels[SUBMIT_LABEL] == submit_id

    # The command the message gives finds it.
    while emu.faults.pending():  # the network is back
        emu.faults.take()
    code, out, _ = run("list", "--label", f"{SUBMIT_LABEL}={submit_id}", "-o", "json")
    assert code == 0 and [j["name"] for j in json.loads(out)] == [created.name]

    # Submitting the same file again returns it instead of paying for a second job ...
    code, out, err = run("submit", job_file)
    assert code == 0, err
    assert out.splitlines()[0].startswith(
        f"Not submitted again: {created.name} (tiny) was created by an earlier submit of this job whose "
        "answer was lost; it is JOB_STATE_"
    )
    assert len(emu.jobs()) == 1 and posts(emu) == 1
    # ... once: the record is settled, so a deliberate resubmit creates a new job.
    code, out, err = run("submit", job_file, "-o", "json")
    assert code == 0, err
    assert len(emu.jobs()) == 2 and json.loads(out)["name"] != created.name


def test_a_definite_answer_leaves_no_record(tmp_path: Path, emu: Emulator, bucket: Any) -> None:
    job_file = str(write_job(tmp_path, job_text()))
    code, _, err = run("submit", job_file, "--project", "quota-project")  # 429 quota: nothing created
    assert code == 1 and "quota" in err
    assert run("submit", job_file)[0] == 0
    folder = pending_mod.state_dir() / "pending-creates"
    assert not folder.exists() or [p for p in folder.iterdir()] == []


def test_an_unwritable_state_dir_does_not_stop_a_submit(
    tmp_path: Path, emu: Emulator, bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv(pending_mod.STATE_ENV, str(blocker))
    code, _, err = run("submit", str(write_job(tmp_path, job_text())))
    assert code == 0, err
    assert len(emu.jobs()) == 1


def test_list_label_must_be_key_equals_value() -> None:
    for bad in ("novalue", "Upper=x", "k=Bad Value", "=x"):
        code, _, err = run("list", "--label", bad, "--api-endpoint", "http://127.0.0.1:9")
        assert code == 2 and "is not KEY=VALUE with a label key" in err, err


@pytest.mark.alone
def test_the_emulator_command_loses_answers_on_request() -> None:
    import os
    import subprocess
    import sys

    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1 as v1
    from google.protobuf.json_format import ParseError

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "VTRAIN_"))}
    env["PYTHONPATH"] = str(root)
    argv = [sys.executable, "-m", "vtrain", "emulator", "--port", "0", "-q"]
    argv += ["--fail-next", "1", "--fail-mode", "garble"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=root)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        client = v1.JobServiceClient(
            transport="rest", client_options={"api_endpoint": url}, credentials=AnonymousCredentials()
        )
        with pytest.raises(ParseError):
            client.create_custom_job(parent="projects/test-project/locations/us-central1", custom_job=make_job())
        assert len(list(client.list_custom_jobs(parent="projects/test-project/locations/us-central1"))) == 1
    finally:
        proc.terminate()
        proc.wait(10)
    bad = subprocess.run([*argv[:4], "--fail-mode", "sideways"], capture_output=True, text=True, env=env, cwd=root)
    assert bad.returncode == 2 and "Invalid value for '--fail-mode'" in bad.stderr
