"""Issue 46, class 4: one secret policy for every artifact a job is written into (vtrain.request.secrets).

`render -o kfp` refused a job with a secret in its env, while `training_op` compiled the same job into the
pipeline YAML in clear and `package --launcher` pushed its job file; now the component, the compiled pipeline
(`training_op`, `launcher_op`) and the launcher image (`package --launcher`, `launcher_image`, and the image
`launcher_op(repository=...)` plans) give one verdict on one job, for every shape of secret `render` hides: by
name, by a key's shape, a URL's password, a random-looking run; in env, in the job file's args and in the
pipeline's own args. A refusal names the places, never the values; an opt-in writes the values exactly."""

# No `from __future__ import annotations`: KFP reads pipeline annotations as types.

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is not installed")

from kfp import dsl  # noqa: E402

from tests.helpers import write_job  # noqa: E402
from tests.pipelines.compiled import compile_to_spec, custom_jobs  # noqa: E402
from vtrain.cli import cli  # noqa: E402
from vtrain.errors import UsageError  # noqa: E402
from vtrain.pipelines import launcher_op, planned_launcher_image, training_op  # noqa: E402

REPOSITORY = "127.0.0.1:9/team/launcher"  # nothing listens: a refusal must come before any registry is asked
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
#: (env, job file args, the secret): each job has one secret, in a shape `render` hides.
SECRETS: list[tuple[dict[str, str], list[str], str]] = [
    ({"API_TOKEN": "abcd1234efgh"}, [], "abcd1234efgh"),  # by name, in env
    ({"DB_PW": "12345678"}, [], "12345678"),  # by name, a number
    ({"DB_URL": "postgres://trainer:hunter2x@db.example.com/runs"}, [], "hunter2x"),  # a URL's password
    ({"MAPS": "AIza" + "Sy9" + "x" * 32}, [], "AIzaSy9"),  # a Google API key, under an ordinary name
    ({"CERT": PEM}, [], "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"),  # a PEM private key
    ({"HEADER": "Bearer abcdef0123456789"}, [], "abcdef0123456789"),  # an HTTP credential
    ({"AWS_ID": "AKIA" + "ABCDEFGHIJKLMNOP"}, [], "AKIAABCDEFGHIJKLMNOP"),  # an AWS access key id
    ({}, ["--hf", "hf_" + "aB3" * 12], "hf_aB3aB3"),  # a Hugging Face token in args
    ({}, ["--token=s3cr3t-value"], "s3cr3t-value"),  # --name=value
    ({}, ["--password", "hunter2y"], "hunter2y"),  # --name value
    ({}, ['--settings={"password": "pw-json-1", "epochs": 3}'], "pw-json-1"),  # JSON in one argument
    ({}, ["--db=mysql://u:pw-url-2@10.0.0.5:3306/x"], "pw-url-2"),  # a URL password in args
    ({}, ["--seed", "q7Rf2LmZx9PwK4tBv8NcY3hJ5sDe1GaU"], "q7Rf2LmZx9PwK4tBv8NcY3hJ5sDe1GaU"),  # random-looking
]
#: Values under ordinary names that no output hides: every artifact takes them.
ORDINARY: list[tuple[dict[str, str], list[str]]] = [
    ({"MODEL": "meta-llama/Meta-Llama-3-8B-Instruct", "DATA": "gs://my-bucket/data/train-*.tfrecord"}, []),
    ({"COMMIT": "9f3c2b1a0e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b", "EPOCHS": "3"}, ["--epochs", "3"]),
    ({"HF_TOKEN_FILE": "/run/secrets/hf"}, ["--token-file", "/run/secrets/hf", "--no-auth", "--show-secrets"]),
]


def _job(folder: Path, env: dict[str, str], args: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_job(folder, f"""
        name: secretive
        region: us-central1
        staging_bucket: gs://my-bucket/staging
        trainer:
          package_uris: [gs://my-bucket/trainer-0.1.tar.gz]
          module: trainer.task
          image: tf-cpu.2-17
          env: {json.dumps(env)}
          args: {json.dumps(args)}
        cluster:
          chief: {{machine_type: n1-standard-4}}
        """)


def _compile(op: Any, tmp_path: Path, job: Path, args: list[str] | None = None, **kwargs: Any) -> str:
    """The pipeline with one `op` task, compiled; its YAML text."""
    @dsl.pipeline(name="train")
    def pipeline() -> None:
        op(job, args, **kwargs)

    tmp_path.mkdir(parents=True, exist_ok=True)
    compile_to_spec(pipeline, tmp_path)
    return (tmp_path / "pipeline.yaml").read_text(encoding="utf-8")


def _verdicts(tmp_path: Path, job: Path, args: list[str] | None = None) -> dict[str, str]:
    """Each artifact's verdict on `job` (with the pipeline's `args`): 'written', or the refusal's text."""
    said: dict[str, str] = {}
    sets = [f"trainer.args={json.dumps([*yaml.safe_load(job.read_text())['trainer']['args'], *(args or [])])}"]
    done = CliRunner().invoke(cli, ["render", str(job), "-o", "kfp", *(["--set", sets[0]] if args else [])])
    assert "Traceback" not in done.output and done.exit_code in (0, 2), done.output
    said["render -o kfp"] = "written" if done.exit_code == 0 else done.stderr
    for name, op in (("training_op", training_op), ("launcher_op", launcher_op)):
        try:
            _compile(op, tmp_path / name, job, args)
            said[name] = "written"
        except UsageError as err:
            said[name] = str(err)
    if not args:  # the launcher image holds the job file, not the pipeline's args
        try:
            planned_launcher_image(job, REPOSITORY)
            said["launcher image"] = "written"
        except UsageError as err:
            said["launcher image"] = str(err)
    return said


@pytest.mark.parametrize(("env", "args", "secret"), SECRETS, ids=[s[2][:12] for s in SECRETS])
def test_every_artifact_refuses_the_same_job_and_names_no_value(tmp_path: Path, env: dict[str, str],
                                                                 args: list[str], secret: str) -> None:
    job = _job(tmp_path / "job", env, args)
    said = _verdicts(tmp_path, job)
    assert "written" not in said.values(), said
    assert all("secret-looking values" in text and secret not in text for text in said.values()), said
    assert "pass --show-secrets to write them" in said["render -o kfp"]  # its own advice, shown whole
    assert "training_op(..., allow_credentials=True)" in said["training_op"]
    done = CliRunner().invoke(cli, ["package", str(job), "--launcher", REPOSITORY])
    assert done.exit_code == 2 and "secret-looking values" in done.stderr and secret not in done.output
    assert "pass --allow-credentials to ship them" in done.stderr and "127.0.0.1:9" not in done.output


@pytest.mark.parametrize("extra", [["--api-key", "sk-" + "Ab1" * 10], ["--dsn=host=db password=pw-dsn-3"]],
                         ids=["key", "dsn"])
def test_the_pipelines_own_args_are_judged_as_the_job_files_are(tmp_path: Path, extra: list[str]) -> None:
    job = _job(tmp_path / "job", {}, ["--epochs", "3"])
    said = _verdicts(tmp_path, job, extra)
    assert "written" not in said.values() and all(extra[-1][-8:] not in t for t in said.values()), said
    assert set(_verdicts(tmp_path, job, ["--epochs", "4"]).values()) == {"written"}


@pytest.mark.parametrize(("env", "args"), ORDINARY, ids=["model-and-data", "hash-and-numbers", "file-and-flags"])
def test_every_artifact_takes_ordinary_values(tmp_path: Path, env: dict[str, str], args: list[str]) -> None:
    assert set(_verdicts(tmp_path, _job(tmp_path / "job", env, args)).values()) == {"written"}


def test_an_opt_in_writes_the_values_exactly_and_a_refusal_writes_nothing(tmp_path: Path) -> None:
    env, args, secret = SECRETS[2]
    job = _job(tmp_path / "job", env, args)
    out = tmp_path / "refused"
    with pytest.raises(UsageError, match="env DB_URL"):
        _compile(training_op, out, job)
    assert not (out / "pipeline.yaml").exists()
    text = _compile(training_op, tmp_path / "allowed", job, allow_credentials=True)
    (compiled,) = custom_jobs(yaml.safe_load(text)).values()
    assert compiled["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["env"][0] == {
        "name": "DB_URL", "value": env["DB_URL"]}
    # the launcher step holds the job file's path and the args, not its env: the opt-in lets the job through
    assert secret not in _compile(launcher_op, tmp_path / "launcher", job, ["--lr", "0.1"], allow_credentials=True)
    assert planned_launcher_image(job, REPOSITORY, allow_credentials=True).startswith(f"{REPOSITORY}:")


def test_a_key_only_in_the_job_files_text_keeps_the_launcher_image_from_carrying_it(tmp_path: Path) -> None:
    """The image holds the job file itself: a key in a comment ships too, though no request carries it."""
    job = _job(tmp_path / "job", {"MODEL": "m"}, [])
    job.write_text(job.read_text() + "# old key: ghp_" + "a1B2" * 9 + "\n")
    with pytest.raises(UsageError, match=r"\(line 12\), which the launcher image would carry") as refused:
        planned_launcher_image(job, REPOSITORY)
    assert "ghp_" not in str(refused.value)
    assert planned_launcher_image(job, REPOSITORY, allow_credentials=True).startswith(f"{REPOSITORY}:")


def test_the_repository_launcher_op_plans_is_judged_as_its_push_will_be(tmp_path: Path) -> None:
    job = _job(tmp_path / "job", {"API_TOKEN": "abcd1234efgh"}, [])
    with pytest.raises(UsageError, match="the compiled pipeline and the launcher image"):
        _compile(launcher_op, tmp_path / "a", job, repository=REPOSITORY)
    text = _compile(launcher_op, tmp_path / "b", job, repository=REPOSITORY, allow_credentials=True)
    assert planned_launcher_image(job, REPOSITORY, allow_credentials=True) in text
