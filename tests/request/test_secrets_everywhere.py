"""Issue 20, class 4: one redaction for every output path. A secret under any common spelling of its
name, inside a larger string (JDBC/ODBC URLs, libpq DSNs, JSON arguments, one "--password x"
argument, user:password@host), or as a value that looks like a number or a path, never reaches
`render` (every format), `submit --dry-run`, `diff` (text and JSON, against saved renders with and
without secrets), `doctor`, or vtrain's own error and retry lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import write_job
from vtrain.cli import cli
from vtrain.request.redact import REDACTED, is_secret_name, redact_args, redact_text

BASIC = Path(__file__).resolve().parents[1] / "data" / "trainers" / "basic"

#: Each marker is a secret; none may appear in any output.
ENV = {
    "DB_PW": "pw-marker-1",
    "PW": "pw-marker-2",
    "ADMIN_PASSWORDS": "pw-marker-3",
    "X_AUTH_HEADER": "Bearer pw-marker-4",
    "API_TOKEN": "123456789",  # a numeric secret
    "DB_PASSWORD": "/pw-marker-5",  # a password that looks like a path
    "JDBC_URL": "jdbc:postgresql://db:5432/runs?user=trainer&password=pw-marker-6&ssl=true",
    "ODBC": "Driver={PostgreSQL};Server=db;Uid=trainer;Pwd=pw-marker-7;",
    "PG_DSN": "host=db user=trainer password='pw marker 8' dbname=runs",
    "REMOTE": "trainer:pw-marker-9@db.internal:5432",
    "MODEL": "meta-llama/Meta-Llama-3-8B-Instruct",
}
ARGS = ["--pw", "pw-marker-10", '--settings={"password": "pw-marker-11", "epochs": 3}', "--password pw-marker-12",
        "--basic=Basic dHJhaW5lcjpwdy1tYXJrZXItMTM=", "--epochs", "3"]
MARKERS = ["pw-marker-", "123456789", "pw marker 8", "dHJhaW5lcjpwdy1tYXJrZXItMTM"]
KEPT = ["meta-llama/Meta-Llama-3-8B-Instruct", "--epochs", "jdbc:postgresql://db:5432/runs?user=trainer&password=",
        "Bearer <redacted>"]


def _job(tmp_path: Path) -> Path:
    return write_job(tmp_path, f"""
name: leaky
region: us-central1
staging_bucket: gs://stage-bkt/s
trainer:
  package: {BASIC}
  module: trainer.task
  image: tf-cpu.2-17
  args: {json.dumps(ARGS)}
  env: {json.dumps(ENV)}
cluster:
  chief: {{machine_type: n1-standard-4}}
""")


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env={"VTRAIN_PROJECT": "p-project"})
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


def _leaks(text: str) -> list[str]:
    return [m for m in MARKERS if m in text]


def test_names_spelled_every_common_way_are_secret() -> None:
    assert [n for n in ("pw", "DB_PW", "db_pw", "--pw", "passwords", "ADMIN_PASSWORDS", "X_AUTH_HEADER",
                        "proxy-authorization") if not is_secret_name(n.lstrip("-"))] == []
    assert [n for n in ("AUTH_HEADER_NAME", "PASSWORD_FILE", "max_tokens", "PWD_DIR") if is_secret_name(n)] == []


@pytest.mark.parametrize("text", [ENV["JDBC_URL"], ENV["ODBC"], ENV["PG_DSN"], ENV["REMOTE"], ARGS[2], ARGS[3],
                                  ARGS[4], "Authorization: Bearer pw-marker-14"])
def test_a_password_inside_a_larger_string_is_hidden_and_the_rest_kept(text: str) -> None:
    out = redact_text(text, entropy=False)
    assert _leaks(out) == [] and REDACTED in out
    assert len(out) >= len(text) // 3  # the string around it stays


def test_values_under_secret_names_are_hidden_even_when_they_look_plain() -> None:
    assert redact_args(["--password", "1234", "--token=/run/x", "--credentials", "/var/creds.json", "--auth=false",
                        "--token-file", "/run/x"]) == [
        "--password", REDACTED, f"--token={REDACTED}", "--credentials", REDACTED, "--auth=false",
        "--token-file", "/run/x"]  # fmt: skip
    for ordinary in ("gcr.io/p/img:latest@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                     "git@github.com:org/repo.git", "Basic training for beginners", "worker-7:kill@1s",
                     "chief-0:preempt@step:3", "worker-1:stop@1.5s"):
        assert redact_text(ordinary) == ordinary


@pytest.mark.parametrize("fmt", ["json", "yaml", "gcloud"])
def test_render_in_every_format(tmp_path: Path, fmt: str) -> None:
    code, out = _run("render", str(_job(tmp_path)), "-o", fmt)
    assert code == 0, out
    assert _leaks(out) == []
    assert all(k in out for k in KEPT[:2]), out


def test_submit_dry_run(tmp_path: Path) -> None:
    code, out = _run("submit", str(_job(tmp_path)), "--dry-run", "-o", "json")
    assert code == 0, out
    assert _leaks(out) == []


@pytest.mark.parametrize("show_secrets_in_the_saved_render", [False, True])
@pytest.mark.parametrize("output", [[], ["-o", "json"]])
def test_diff_against_a_saved_render(tmp_path: Path, show_secrets_in_the_saved_render: bool,
                                     output: list[str]) -> None:
    job = _job(tmp_path)
    code, saved = _run("render", str(job), *(["--show-secrets"] if show_secrets_in_the_saved_render else []))
    assert code == 0
    (tmp_path / "saved.json").write_text(saved)
    changed = ["--set", 'trainer.env.DB_PW=pw-marker-20', "--set",
               'trainer.env.JDBC_URL=jdbc:postgresql://db/x?password=pw-marker-21']
    code, out = _run("diff", str(job), "--against", str(tmp_path / "saved.json"), *changed, *output)
    assert code == 1, out
    assert _leaks(out) == [], out
    assert "JDBC_URL" in out  # the change is still reported, without the password
    if show_secrets_in_the_saved_render:  # against a redacted render a changed secret cannot be seen
        assert "DB_PW" in out and "secret value changed" in out


@pytest.mark.slow
def test_doctor_and_error_lines_hide_an_endpoint_password() -> None:
    endpoint = "http://user:pw-marker-30@127.0.0.1:9"
    code, out = _run("doctor", "--api-endpoint", endpoint)
    assert code == 1 and "127.0.0.1:9" in out
    assert _leaks(out) == [], out
    code, out = _run("doctor", "--api-endpoint", endpoint, "-o", "json")
    assert _leaks(out) == [], out
