"""`vtrain diff`: the request a job file makes now against a saved render, a submitted job (through the
real client and the emulator) and the last job submitted from the file; exit 0/1/2 like diff(1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cloud.test_submit import BASIC, job_text, runner
from tests.commands.test_cli_vertex import PROJECT, run
from tests.helpers import write_job
from vtrain.cloud.diff import Change, compare, diff_values

pytestmark = [pytest.mark.emulator(runner=runner, point_at=PROJECT), pytest.mark.usefixtures("fast_retries")]
BODY = {"displayName": "x", "jobSpec": {"workerPoolSpecs": [{"replicaCount": "1"}, {"replicaCount": "2"}]}}


def render_to(tmp_path: Path, job: Path, fmt: str = "json", *extra: str) -> Path:
    code, out, err = run("render", str(job), "-o", fmt, *extra)
    assert code == 0, err
    saved = tmp_path / f"saved.{fmt}"
    saved.write_text(out)
    return saved


def test_field_paths_for_changes_additions_and_removals() -> None:
    new = json.loads(json.dumps(BODY))
    new["jobSpec"]["workerPoolSpecs"][1]["replicaCount"] = "4"
    new["jobSpec"]["scheduling"] = {"strategy": "SPOT"}
    new["labels"] = {"team": "ml"}
    del new["displayName"]
    assert diff_values(BODY, new) == [
        Change("displayName", "removed", old="x"),
        Change("jobSpec.workerPoolSpecs[1].replicaCount", "changed", old="2", new="4"),
        Change("jobSpec.scheduling", "added", new={"strategy": "SPOT"}),
        Change("labels", "added", new={"team": "ml"}),
    ]


def _pool_body(env: list[dict[str, str]], args: list[str] | None = None) -> dict[str, Any]:
    spec = {"imageUri": "gcr.io/p/i:1", "env": env, "args": args or []}
    return {"displayName": "x", "jobSpec": {"workerPoolSpecs": [{"replicaCount": "1", "containerSpec": spec}]}}


def test_env_entries_match_by_name_and_secrets_stay_hidden() -> None:
    old = _pool_body([{"name": "A", "value": "1"}, {"name": "API_TOKEN", "value": "s1"}])
    new = _pool_body([{"name": "B", "value": "2"}, {"name": "API_TOKEN", "value": "s2"}, {"name": "A", "value": "1"}])
    env = "jobSpec.workerPoolSpecs[0].containerSpec.env"
    assert [str(c) for c in compare(old, new)] == [
        f'~ {env}[name=API_TOKEN].value: "<redacted>" -> "<redacted>"  (secret value changed)',
        f'+ {env}[name=B]: {{"name": "B", "value": "2"}}',
    ]
    assert '"s1" -> "s2"' in str(compare(old, new, show_secrets=True)[0])


def test_server_fields_and_per_submission_labels_are_not_compared() -> None:
    job = {**BODY, "name": "projects/p/locations/l/customJobs/1", "state": "JOB_STATE_RUNNING",
           "createTime": "2024-01-01T00:00:00Z", "labels": {"vtrain-submit-id": "a", "vtrain-config-hash": "b"}}
    assert compare(job, BODY) == []


def test_against_a_saved_render_same_file_is_no_change_then_replicas_change(tmp_path: Path) -> None:
    job = write_job(tmp_path, job_text(extra="  evaluator: {replicas: 1}\n"))
    for fmt in ("json", "yaml", "gcloud"):
        saved = render_to(tmp_path, job, fmt)
        code, out, _ = run("diff", str(job), "--against", str(saved))
        assert code == 0 and out.splitlines()[-1] == "no changes", out
    saved = render_to(tmp_path, job)
    code, out, _ = run("diff", str(job), "--against", str(saved), "--set", "cluster.workers.replicas=4")
    assert code == 1
    assert out.splitlines() == [
        f"--- saved request {saved}",
        f"+++ {job} (the request submit would send)",
        '~ jobSpec.workerPoolSpecs[1].replicaCount: "1" -> "4"',
        "1 change",
    ]
    code, out, _ = run("diff", str(job), "--against", str(saved), "--set", "cluster.workers.replicas=4", "-o", "json")
    assert code == 1 and json.loads(out)["changes"] == [
        {"path": "jobSpec.workerPoolSpecs[1].replicaCount", "op": "changed", "old": "1", "new": "4"}
    ]


EXAMPLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "configs").rglob("*.yaml"))


@pytest.mark.parametrize("job", EXAMPLES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_example_against_its_own_saved_render_is_no_change(tmp_path: Path, job: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """CustomJobs and tuning jobs alike, in every format render writes (a tuning job's render once
    exited 2 here: `diff` built a CustomJob for it and read its saved body as "not a saved request")."""
    monkeypatch.delenv("VTRAIN_REGION", raising=False)
    for fmt in ("json", "yaml", "gcloud"):
        saved = render_to(tmp_path, job, fmt, "--region", "us-central1")
        code, out, err = run("diff", str(job), "--against", str(saved), "--region", "us-central1")
        assert (code, out.splitlines()[-1:]) == (0, ["no changes"]), (fmt, out, err)
    if "tuning" in job.parts:
        saved = render_to(tmp_path, job, "json", "--region", "us-central1")
        code, out, _ = run("diff", str(job), "--against", str(saved), "--region", "us-central1",
                           "--set", "tuning.max_trials=97")
        before = json.loads(saved.read_text())["maxTrialCount"]
        assert code == 1 and f"~ maxTrialCount: {before} -> 97" in out, out


@pytest.mark.parametrize("job", [p for p in EXAMPLES if p.stem in ("quickstart", "bayesian-multi-worker")],
                         ids=lambda p: p.stem)
def test_against_a_saved_submit_dry_run_is_no_change(tmp_path: Path, job: Path) -> None:
    """A saved plan carries the labels submit adds (vtrain-version): the request now gets them too,
    so the version label is not reported as removed on every CI run."""
    code, out, err = run("submit", str(job), "--dry-run", "-o", "json", "--project", "p-123456", "--region",
                         "us-central1")
    assert code == 0, err
    assert "vtrain-version" in json.loads(out)["request"]["body"]["labels"]
    saved = tmp_path / "plan.json"
    saved.write_text(out)
    code, out, err = run("diff", str(job), "--against", str(saved), "--project", "p-123456", "--region",
                         "us-central1")
    assert (code, out.splitlines()[-1:]) == (0, ["no changes"]), (out, err)
    body = json.loads(saved.read_text())
    body["request"]["body"]["labels"]["vtrain-version"] = "0-0-1"
    saved.write_text(json.dumps(body))
    code, out, _ = run("diff", str(job), "--against", str(saved), "--region", "us-central1")
    assert code == 1 and '~ labels.vtrain-version: "0-0-1" ->' in out, out


def test_trainer_code_change_shows_as_the_package_hash_changing(tmp_path: Path) -> None:
    trainer = tmp_path / "trainer-src"
    shutil.copytree(BASIC, trainer)
    job = write_job(tmp_path, job_text(trainer=trainer))
    saved = render_to(tmp_path, job)
    task = trainer / "trainer" / "task.py"
    task.write_text(task.read_text() + "\n# a change\n")
    code, out, _ = run("diff", str(job), "--against", str(saved))
    assert code == 1
    changed = [line for line in out.splitlines() if line.startswith("~ ")]
    assert changed and all("pythonPackageSpec.packageUris[0]" in line for line in changed)
    assert all(line.endswith("(package content changed)") for line in changed)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "compare with exactly one of: --against FILE, a JOB_ID, --last"),
        (["--against", "missing.json"], "--against missing.json: cannot read it"),
        (["--against", "{job}"], "not a saved request"),
    ],
)
def test_trouble_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    job = write_job(tmp_path, job_text())
    code, out, err = run("diff", str(job), *[a.replace("{job}", str(job)) for a in args])
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1


def test_invalid_job_file_exits_2(tmp_path: Path) -> None:
    job = write_job(tmp_path, "name: x\ncluster: {chief: {}}\n")
    saved = tmp_path / "s.json"
    saved.write_text(json.dumps(BODY))
    code, _, err = run("diff", str(job), "--against", str(saved))
    assert code == 2 and "missing required key 'trainer'" in err


@pytest.mark.usefixtures("emu", "bucket")
@pytest.mark.slow
def test_against_submitted_jobs_and_the_last_one(tmp_path: Path) -> None:
    job = write_job(tmp_path, job_text(extra="  evaluator: {replicas: 1}\n"))
    code, out, err = run("diff", str(job), "--last")
    assert code == 2 and "no job named 'tiny' submitted by vtrain" in err
    code, out, err = run("submit", str(job), "-o", "json")
    assert code == 0, err
    first = json.loads(out)["name"]
    code, out, err = run("diff", str(job), first.rsplit("/", 1)[1])
    assert code == 0, out + err
    assert out.splitlines()[0] == f"--- job {first}"
    code, out, _ = run("submit", str(job), "-o", "json", "--set", "cluster.workers.replicas=3")
    second = json.loads(out)["name"]
    code, out, _ = run("diff", str(job), "--last")
    assert code == 1 and out.splitlines()[0] == f"--- job {second}"
    assert '~ jobSpec.workerPoolSpecs[1].replicaCount: "3" -> "1"' in out
    code, out, _ = run("diff", str(job), first, "--set", "trainer.env.API_KEY=s")
    assert code == 1 and "env[name=API_KEY]" in out and '"s"' not in out
    code, _, err = run("diff", str(job), "999")
    assert code == 2 and err.startswith("error: cannot get job")


def test_a_built_images_change_shows_as_its_tag_changing(tmp_path: Path) -> None:
    """issue 23: with trainer.build, the trainer's code is in the image; its tag is the content hash."""
    trainer = tmp_path / "trainer-src"
    shutil.copytree(BASIC, trainer)
    job = write_job(tmp_path, job_text(trainer=trainer, extra="").replace(
        "  image: tf-cpu.2-17\n", "  image: tf-cpu.2-17\n  build: {repository: us-central1-docker.pkg.dev/p/r/t}\n"))
    saved = render_to(tmp_path, job)
    assert run("diff", str(job), "--against", str(saved))[0] == 0
    task = trainer / "trainer" / "task.py"
    task.write_text(task.read_text() + "\n# a change\n")
    code, out, _ = run("diff", str(job), "--against", str(saved))
    assert code == 1
    changed = [line for line in out.splitlines() if line.startswith("~ ")]
    assert [line.split(":", 1)[0] for line in changed] == [
        f"~ jobSpec.workerPoolSpecs[{i}].containerSpec.imageUri" for i in (0, 1)]
    assert all(line.endswith("(image content changed: its tag hashes the trainer, runtime and requirements)")
               for line in changed)
    assert all("us-central1-docker.pkg.dev/p/r/t:" in line for line in changed)


def test_a_render_names_the_experiment_and_run_in_full_as_submit_sends_them(tmp_path: Path) -> None:
    """issue 31: `experiment: e` and `experiment_run: r1` render as their full contexts (the project as
    render resolves it), so a saved render diffs clean against the request submit would send."""
    job = write_job(tmp_path, job_text(extra="experiment: e\nexperiment_run: r1\n"))
    saved = render_to(tmp_path, job, "json", "--project", PROJECT)
    spec = json.loads(saved.read_text())["jobSpec"]
    contexts = f"projects/{PROJECT}/locations/us-central1/metadataStores/default/contexts"
    assert (spec["experiment"], spec["experimentRun"]) == (f"{contexts}/e", f"{contexts}/e-r1")
    code, out, _ = run("diff", str(job), "--against", str(saved), "--project", PROJECT)
    assert code == 0 and out.splitlines()[-1] == "no changes", out
    code, out, _ = run("diff", str(job), "--against", str(saved), "--project", PROJECT, "--set", "experiment_run=r2")
    assert code == 1 and f'~ jobSpec.experimentRun: "{contexts}/e-r1" -> "{contexts}/e-r2"' in out
