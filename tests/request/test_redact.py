"""Secrets never reach rendered output (issue 10, class 9): by env or argument name, by key format
and by entropy, in `render` (every format), `submit --dry-run` and `status -o json`; ordinary
values (paths, gs:// URIs, numbers, model names, hashes) are never hidden; --show-secrets shows all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from google.cloud import aiplatform_v1 as v1

from tests.helpers import write_job
from vtrain.cli import cli
from vtrain.emulator import Emulator, sleep_runner
from vtrain.request.redact import REDACTED, is_secret_name, looks_random, redact, redact_args, redact_text

BASIC = Path(__file__).resolve().parents[1] / "data" / "trainers" / "basic"

# Fabricated values in the shapes of real keys (none of them is live).
GOOGLE_API_KEY = "AIza" + "SyD3moFakeKey_0123456789-abcdefghij"
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SLACK = "xoxb-" + "123456789012-abcdefGHIJKL"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\n-----END RSA PRIVATE KEY-----"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
RANDOM = [
    "29bA7-Jue-PjFUf1rTW1KH6w",
    "Ur6E4WfaEryMUEO538iPuC0Eee_MjktXVtom4vyS",
    "62QtEPez9doL3FLlfnKu9sUZySxky2AmN725AIUo",
    "eUK98iEG8IR3YvDzy012TccHIFEVmg+J8sbayuNE",
    "15FJswpI6Mvww9SP3CafQOFkH5ZuX_EI9_iv-7Zr1SX-v4m1ea4igSltn6-r635R",
]
SHAPED = [GOOGLE_API_KEY, AWS_KEY_ID, GITHUB, SLACK, JWT, PEM, HF, *RANDOM]

ORDINARY = [
    "/home/alice/projects/my-model/checkpoints",
    "/Users/AliceSmith/Data2024/Run12/Model3",
    "gs://my-bucket/data/train-*.tfrecord",
    "gs://stage-bkt/s/vtrain/trainer-0.1.0+3f2a9c1b7d.tar.gz",
    "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
    "gcr.io/p/img@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "3f2a9c1b7d3f2a9c1b7d3f2a9c1b7d3f2a9c1b7d",
    "0.0003",
    "3e-4",
    "1024",
    "meta-llama/Meta-Llama-3-8B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "TensorFlowMultiWorkerMirroredStrategy2",
    "ResNet50V2ImageNet1k",
    "sentence-transformers/all-MiniLM-L6-v2",
    "bert_base_uncased_L-12_H-768_A-12",
    "run-20240115-143000-a1b2c3",
    "2024-01-01T00:00:00Z",
    "https://example.com/api/v1/data?page=2",
    "tf.distribute.experimental.ParameterServerStrategy",
]
ORDINARY_ARGS = [
    "--epochs", "3", "--model=meta-llama/Meta-Llama-3-8B-Instruct", "--max_tokens=512", "--max-tokens", "2048",
    "--tokenizer=bert-base-uncased", "--key-file=/secrets/key.json", "--token-file", "/run/secrets/hf",
    "--password-file=/etc/pw", "--sort-key", "date", "--revision=3f2a9c1b7d3f2a9c1b7d3f2a9c1b7d3f2a9c1b7d",
    "--data", "gs://my-bucket/data", "--use-auth=false", "--credentials-file", "/var/run/creds.json",
]  # fmt: skip


def test_secret_names() -> None:
    secret = ["API_TOKEN", "db_password", "MY_SECRET", "SSH_KEY", "GCP_CREDENTIALS", "AWS_SECRET_ACCESS_KEY",
              "apiKey", "HF_TOKEN", "hftoken", "PGPASSWORD", "db.password", "auth", "KEY", "x-api-key",
              "MYSQL_PWD"]  # fmt: skip
    plain = ["BATCH", "EPOCHS", "MODEL_DIR", "max_tokens", "tokenizer", "TOKEN_FILE", "KEY_PATH", "sort_key",
             "MONKEY", "AUTHOR", "primary-key", "GOOGLE_APPLICATION_CREDENTIALS_FILE", "keyboard"]  # fmt: skip
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in plain if is_secret_name(n)] == []


@pytest.mark.parametrize("value", SHAPED, ids=range(len(SHAPED)))
def test_secret_shapes_are_hidden_inside_any_text(value: str) -> None:
    text = f"Authorization: Bearer {value} (and more)"
    out = redact_text(text)
    assert value not in out and REDACTED in out
    assert out.startswith("Authorization: Bearer ") and out.endswith(" (and more)")


def test_url_passwords_are_hidden_and_the_rest_kept() -> None:
    assert redact_text("postgres://trainer:hunter2@db.internal:5432/runs") == (
        f"postgres://trainer:{REDACTED}@db.internal:5432/runs"
    )
    assert redact_text("https://user:p%40ss@example.com/x", entropy=False) == f"https://user:{REDACTED}@example.com/x"


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_values_are_kept(value: str) -> None:
    assert not looks_random(value)
    assert redact_text(value) == value
    assert redact_args(["--x", value, f"--y={value}"]) == ["--x", value, f"--y={value}"]


def test_arguments_by_name() -> None:
    args = ["--token=abc123", "--password", "hunter2", "db.password=hunter2", "--api-key=short1", "-auth", "letmein",
            "--epochs", "3", "--config=postgres://u:pw@h/db", "--pass=", "--token", "--epochs"]  # fmt: skip
    assert redact_args(args) == [
        f"--token={REDACTED}", "--password", REDACTED, f"db.password={REDACTED}", f"--api-key={REDACTED}", "-auth",
        REDACTED, "--epochs", "3", f"--config=postgres://u:{REDACTED}@h/db", "--pass=", "--token", "--epochs",
    ]  # fmt: skip
    assert redact_args(ORDINARY_ARGS) == ORDINARY_ARGS


def _body(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {
            "imageUri": "gcr.io/p/img:1",
            "command": ["python", "-m", "trainer", f"--hf-token={HF}"],
            "args": args,
            "env": [{"name": k, "value": v} for k, v in env.items()],
        },
    }
    return {"displayName": "demo", "jobSpec": {"workerPoolSpecs": [pool]}}


def test_redact_covers_env_args_and_command_and_does_not_mutate() -> None:
    env = {"CONFIG": GOOGLE_API_KEY, "DB_PASSWORD": "hunter2", "DSN": "mysql://root:toor@db/x", "CERT": PEM,
           "MODEL": "meta-llama/Meta-Llama-3-8B-Instruct", "HF_HOME": "/cache/hf", "PASSWORD_FILE": "/run/pw",
           "API_TOKEN": "", "EPOCHS": "3", "AWS_SECRET_ACCESS_KEY": RANDOM[2]}  # fmt: skip
    body = _body(["--token=abc", RANDOM[0], *ORDINARY_ARGS], env)
    before = json.dumps(body)
    out = redact(body)
    assert json.dumps(body) == before
    spec = out["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert {e["name"]: e["value"] for e in spec["env"]} == {
        "CONFIG": REDACTED, "DB_PASSWORD": REDACTED, "DSN": f"mysql://root:{REDACTED}@db/x", "CERT": REDACTED,
        "MODEL": "meta-llama/Meta-Llama-3-8B-Instruct", "HF_HOME": "/cache/hf", "PASSWORD_FILE": "/run/pw",
        "API_TOKEN": "", "EPOCHS": "3", "AWS_SECRET_ACCESS_KEY": REDACTED,
    }  # fmt: skip
    assert spec["args"] == [f"--token={REDACTED}", REDACTED, *ORDINARY_ARGS]
    assert spec["command"] == ["python", "-m", "trainer", f"--hf-token={REDACTED}"]


# ---- through the commands ---------------------------------------------------------------------
SECRET_ARGS = ["--token=abc123", "--password", "hunter2", GITHUB, "--db=postgres://u:hunter2@h/db", RANDOM[1]]


def _job(tmp_path: Path) -> Path:
    env = {"DB_URL": "postgres://u:hunter2@h/db", "SETTINGS": JWT, "HF_TOKEN": HF, "MODEL": ORDINARY[10]}
    text = f"""
name: secretive
region: us-central1
staging_bucket: gs://stage-bkt/s
trainer:
  package: {BASIC}
  module: trainer.task
  image: tf-cpu.2-17
  args: {json.dumps(SECRET_ARGS + ORDINARY_ARGS)}
  env: {json.dumps(env)}
cluster:
  chief: {{machine_type: n1-standard-4}}
"""
    return write_job(tmp_path, text)


def _leaks(text: str) -> list[str]:
    return [s for s in ("hunter2", "abc123", GITHUB, RANDOM[1], JWT, HF) if s in text]


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"VTRAIN_PROJECT": "p-project"})
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("fmt", ["json", "yaml", "gcloud"])
def test_render_hides_secrets_and_keeps_ordinary_values(tmp_path: Path, fmt: str) -> None:
    job = _job(tmp_path)
    out = _invoke("render", str(job), "-o", fmt).stdout
    assert _leaks(out) == []
    for value in ORDINARY_ARGS + ["meta-llama/Meta-Llama-3-8B-Instruct"]:
        assert value in out
    shown = _invoke("render", str(job), "-o", fmt, "--show-secrets").stdout
    assert sorted(_leaks(shown)) == sorted(["hunter2", "abc123", GITHUB, RANDOM[1], JWT, HF])
    if fmt == "yaml":
        assert yaml.safe_load(out)["displayName"] == "secretive"


@pytest.mark.slow
def test_submit_dry_run_hides_secrets(tmp_path: Path) -> None:
    job = _job(tmp_path)
    for extra in ([], ["-o", "json"]):
        out = _invoke("submit", str(job), "--dry-run", *extra).stdout
        assert _leaks(out) == [] and "--sort-key" in out
    shown = _invoke("submit", str(job), "--dry-run", "-o", "json", "--show-secrets").stdout
    assert "hunter2" in shown and GITHUB in shown


pytestmark = pytest.mark.emulator(runner=sleep_runner(0.1), pending_seconds=0, cancel_seconds=0.2)


def test_status_json_hides_secrets(emu: Emulator) -> None:
    pool = v1.WorkerPoolSpec(
        machine_spec=v1.MachineSpec(machine_type="n1-standard-4"),
        replica_count=1,
        container_spec=v1.ContainerSpec(
            image_uri="gcr.io/p/trainer:1",
            args=SECRET_ARGS + ORDINARY_ARGS,
            env=[v1.EnvVar(name="SETTINGS", value=JWT), v1.EnvVar(name="HF_TOKEN", value=HF)],
        ),
    )
    job = v1.CustomJob(display_name="s", job_spec=v1.CustomJobSpec(worker_pool_specs=[pool]))
    created = emu.client().create_custom_job(parent="projects/p-project/locations/us-central1", custom_job=job)
    result = CliRunner().invoke(
        cli, ["status", created.name, "-o", "json", "--api-endpoint", emu.url, "--project", "p-project"]
    )
    assert "Traceback" not in result.output
    data = json.loads(result.stdout)
    assert _leaks(result.stdout) == []
    assert data["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"][len(SECRET_ARGS) :] == ORDINARY_ARGS
