"""TensorBoard and Experiment lifecycle at submit, and the quota check in preflight, through the CLI against
vtrain's Vertex emulator (TensorboardService, MetadataService, Cloud Quotas, IAM) and gcp-storage-emulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cloud.test_submit import job_text, runner
from tests.commands.test_cli_vertex import PROJECT, _point_at, run
from tests.helpers import write_job
from vtrain.cloud import quota
from vtrain.emulator import Emulator

SA = "trainer@test-project.iam.gserviceaccount.com"
LINKED = f"service_account: {SA}\nbase_output_dir: gs://stage-bkt/out\n"
T4 = quota.metric("nvidia_t4_gpus")
CPUS = quota.metric("cpus")


pytestmark = [pytest.mark.emulator(runner=runner, point_at=PROJECT), pytest.mark.usefixtures("fast_retries")]


def creates(emu: Emulator, collection: str = "/customJobs") -> list[dict[str, Any]]:
    return [r for r in emu.requests if r["method"] == "POST" and r["path"].endswith(collection)]


def checks(err: str) -> dict[str, str]:
    out = {}
    for line in err.splitlines():
        text = line.removeprefix("preflight: ")
        if text[:4] in ("ok  ", "warn", "FAIL", "skip"):
            out[text[6:].split(":")[0]] = text
    return out


# ---- TensorBoard and Experiment -----------------------------------------------------------------
@pytest.mark.slow
def test_create_makes_the_tensorboard_and_experiment_once_and_the_job_links_them(
    tmp_path: Path, emu: Emulator, gcs: Any
) -> None:
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    job = write_job(tmp_path, job_text(extra=LINKED + "tensorboard: create\nexperiment: churn\n"))
    code, out, err = run("submit", str(job))
    assert code == 0, err
    boards, contexts = emu.tensorboards(), emu.contexts()
    number = emu.project_number(PROJECT)
    assert [b["displayName"] for b in boards] == ["vtrain"]
    board = boards[0]["name"]
    assert board.startswith(f"projects/{number}/locations/us-central1/tensorboards/")
    experiment = f"projects/{number}/locations/us-central1/metadataStores/default/contexts/churn"
    assert [(c["name"], c["schemaTitle"], c["metadata"]) for c in contexts] == [
        (experiment, "system.Experiment", {"experiment_deleted": False, "backing_tensorboard_resource": board})
    ]
    assert f"tensorboard 'vtrain' created: {board}" in err and f"experiment 'churn' created: {experiment}" in err
    (sent,) = emu.jobs()
    as_rendered = f"projects/{PROJECT}/locations/us-central1/metadataStores/default/contexts/churn"
    assert (sent.job_spec.tensorboard, sent.job_spec.experiment) == (board, as_rendered)  # what render shows

    # the same file again (another job): both are found, nothing new is made
    code, out, err = run("submit", str(job))
    assert code == 0, err
    assert len(emu.tensorboards()) == 1 and len(emu.contexts()) == 1
    assert f"tensorboard 'vtrain' found: {board}" in err and f"experiment 'churn' found: {experiment}" in err
    assert len(creates(emu, "/tensorboards")) == 1 and len(creates(emu, "/contexts")) == 1
    assert {j.job_spec.tensorboard for j in emu.jobs()} == {board}
    code, out, err = run("diff", str(job), "--last")  # the job's resource names are the file's spelling
    assert code == 0, out + err
    code, out, err = run("diff", str(job), "--last", "--set", "experiment=other")
    other = f"projects/{PROJECT}/locations/us-central1/metadataStores/default/contexts/other"
    assert code == 1 and f'~ jobSpec.experiment: "{as_rendered}" -> "{other}"' in out  # submit would make it


@pytest.mark.slow
def test_submit_makes_the_experiment_run_as_the_sdk_does_once(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    """issue 31: `experiment_run: r1` is the SDK's run: a system.ExperimentRun context churn-r1, child of
    the experiment, backed by a TensorBoard run; the SDK lists it; a second submit finds it all."""
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    job = write_job(tmp_path, job_text(extra=LINKED + "tensorboard: create\nexperiment: churn\nexperiment_run: r1\n"))
    code, out, err = run("submit", str(job))
    assert code == 0, err
    number = emu.project_number(PROJECT)
    store = f"projects/{number}/locations/us-central1/metadataStores/default"
    contexts = {c["name"]: c for c in emu.contexts()}
    run_context = contexts[f"{store}/contexts/churn-r1"]
    assert (run_context["schemaTitle"], run_context["displayName"], run_context["parentContexts"]) == (
        "system.ExperimentRun", "r1", [f"{store}/contexts/churn"])
    assert f"experiment run 'r1' created: {store}/contexts/churn-r1" in err
    (sent,) = emu.jobs()
    assert sent.job_spec.experiment_run == f"projects/{PROJECT}/locations/us-central1/metadataStores/default/" \
                                          "contexts/churn-r1"
    code, out, err = run("submit", str(job))
    assert code == 0 and f"experiment run 'r1' found: {store}/contexts/churn-r1" in err, err
    assert len(emu.contexts()) == 2 and len(creates(emu, "/artifacts")) == 1 and len(creates(emu, "/runs")) == 1

    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(project=PROJECT, location="us-central1", api_transport="rest", api_endpoint=emu.url,
                    credentials=AnonymousCredentials())  # fmt: skip
    (row,) = aiplatform.get_experiment_df("churn").to_dict("records")
    assert (row["run_name"], row["run_type"], row["state"]) == ("r1", "system.ExperimentRun", "RUNNING")
    backing = aiplatform.ExperimentRun("r1", experiment="churn")._lookup_tensorboard_run_artifact()
    assert backing is not None and backing.resource.resource_name.endswith("/experiments/churn/runs/r1")

@pytest.mark.slow
def test_an_existing_instance_is_found_by_its_display_name(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import Tensorboard, TensorboardServiceClient

    client = TensorboardServiceClient(transport="rest", credentials=AnonymousCredentials(),
                                      client_options={"api_endpoint": emu.url})  # fmt: skip
    parent = emu.parent(PROJECT)
    client.create_tensorboard(parent=parent, tensorboard=Tensorboard(display_name="other")).result()
    made = client.create_tensorboard(parent=parent, tensorboard=Tensorboard(display_name="team board")).result()
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    job = write_job(tmp_path, job_text(extra=LINKED + 'tensorboard: "team board"\n'))
    code, out, err = run("doctor", str(job))
    assert code == 0, err
    assert checks(out)["tensorboard"] == (f"ok    tensorboard: 'team board' is {made.name}; Vertex uploads "
                                          f"AIP_TENSORBOARD_LOG_DIR as {SA} (it needs roles/aiplatform.user)")
    code, out, err = run("submit", str(job))
    assert code == 0, err
    assert len(emu.tensorboards()) == 2 and emu.jobs()[0].job_spec.tensorboard == made.name


def test_no_permission_to_create_the_tensorboard_is_refused_before_anything_is_uploaded(
    tmp_path: Path, emu: Emulator, gcs: Any
) -> None:
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    emu.deny_permissions("aiplatform.tensorboards.create")
    job = write_job(tmp_path, job_text(extra=LINKED + "tensorboard: create\n"))
    code, out, err = run("submit", str(job))
    assert code == 1 and "Traceback" not in err
    (line,) = [e for e in err.splitlines() if e.startswith("error: ")]
    assert line.startswith("error: cannot create the TensorBoard 'vtrain': ")
    assert "aiplatform.tensorboards.create" in line
    assert emu.tensorboards() == [] and emu.jobs() == [] and gcs.object_names("stage-bkt") == []


def test_no_permission_to_list_tensorboards_fails_preflight(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    emu.deny_permissions("aiplatform.tensorboards.list", "aiplatform.contexts.get")
    job = write_job(tmp_path, job_text(extra=LINKED + "tensorboard: create\nexperiment: churn\n"))
    code, out, err = run("doctor", str(job))
    assert code == 1
    found = checks(out)
    assert found["tensorboard"].startswith("FAIL  tensorboard: cannot look up the TensorBoard 'vtrain'")
    assert "aiplatform.tensorboards.list" in found["tensorboard"]
    assert found["experiment"].startswith("FAIL  experiment: ") and "aiplatform.contexts.get" in found["experiment"]
    assert out.splitlines()[-1] == f"2 of {len(found)} checks failed"


def test_a_full_tensorboard_name_that_does_not_exist_fails_preflight(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    name = f"projects/{PROJECT}/locations/us-central1/tensorboards/42"
    job = write_job(tmp_path, job_text(extra=LINKED + f"tensorboard: {name}\n"))
    code, out, err = run("submit", str(job))
    assert code == 1
    assert f"tensorboard: {name} does not exist; give a display name (or `create`)" in err
    assert gcs.object_names("stage-bkt") == [] and emu.jobs() == []


def test_a_bad_experiment_name_is_refused_with_a_fix(tmp_path: Path) -> None:
    job = write_job(tmp_path, job_text(extra=LINKED + "experiment: Churn_Model\n"))
    code, out, err = run("validate", str(job))
    assert code == 2
    assert ("experiment: an experiment name is lowercase letters, digits and '-' (at most 128, not starting with "
            "'-'), as Vertex requires; got 'Churn_Model', try 'churn-model'") in err  # fmt: skip


@pytest.mark.slow
def test_dry_run_says_what_submit_fills_in(tmp_path: Path) -> None:
    job = write_job(tmp_path, job_text(extra=LINKED + "tensorboard: create\nexperiment: churn\n"))
    code, out, err = run("submit", str(job), "--dry-run", "-o", "json", "--project", PROJECT)
    assert code == 0, err
    assert json.loads(out)["resolvedAtSubmit"] == {
        "jobSpec.tensorboard": "the TensorBoard named 'vtrain' in us-central1 (created if missing)",
        "jobSpec.experiment": "the experiment 'churn' in us-central1 (created if missing)",
    }


@pytest.mark.slow
def test_status_prints_the_tensorboard_experiment_and_web_access_links(tmp_path: Path, emu: Emulator,
                                                                      gcs: Any) -> None:  # fmt: skip
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    job = write_job(tmp_path, job_text(extra=LINKED + "tensorboard: create\nexperiment: churn\n"
                                       "enable_web_access: true\n"))  # fmt: skip
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.1")
    assert code == 0, err
    (sent,) = emu.jobs()
    job_id = sent.name.rsplit("/", 1)[-1]
    code, out, err = run("status", job_id)
    assert code == 0, err
    rows = dict(line.split(None, 1) if not line.startswith(("tensorboard console", "shell ")) else
                (" ".join(line.split()[:2]), line.split(None, 2)[2]) for line in out.splitlines())  # fmt: skip
    board = sent.job_spec.tensorboard
    board_id = board.rsplit("/", 1)[-1]
    assert rows["tensorboard"] == (f"https://us-central1.tensorboard.googleusercontent.com/experiment/"
                                   f"{board.replace('/', '+')}+experiments+{job_id}")  # fmt: skip
    assert rows["tensorboard console"] == (f"https://console.cloud.google.com/vertex-ai/experiments/tensorboard-instances"
                                           f"/regions/us-central1/{board_id}?project={PROJECT}")  # fmt: skip
    assert rows["experiment"] == (f"https://console.cloud.google.com/vertex-ai/experiments/locations/us-central1/"
                                  f"experiments/churn/runs?project={PROJECT}")  # fmt: skip
    shells = {k: v for k, v in rows.items() if k.startswith("shell ")}
    assert sorted(shells) == ["shell workerpool0-0", "shell workerpool1-0"]
    assert all(v.startswith("https://") and v.endswith("-dot-us-central1.aiplatform-training.googleusercontent.com/")
               for v in shells.values())  # fmt: skip
    assert dict(sent.web_access_uris) == {k.removeprefix("shell "): v for k, v in shells.items()}


# ---- quota --------------------------------------------------------------------------------------
def test_quota_too_low_is_refused_before_staging_with_the_numbers(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    emu.set_quota(T4, 4, region="us-central1")
    extra = "cluster:\n  chief: {machine_type: n1-standard-8, accelerator: NVIDIA_TESLA_T4, accelerator_count: 2}\n" \
            "  workers: {replicas: 2}\n"  # fmt: skip
    text = job_text(extra=extra).replace("cluster:\n  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 1}\n",
                                         "")  # fmt: skip
    job = write_job(tmp_path, text.replace("image: tf-cpu.2-17", "image: tf-gpu.2-17"))
    code, out, err = run("submit", str(job))
    assert code == 1 and "Traceback" not in err
    page = f"https://console.cloud.google.com/iam-admin/quotas?project={PROJECT}&metric={T4}"
    assert err.splitlines()[0] == (
        f"error: preflight: quota: needs 6 NVIDIA_TESLA_T4 accelerators ({T4}) in us-central1, the limit is 4 with "
        f"0 in use: no job of this size can run until it is raised at {page}"
    )
    assert gcs.object_names("stage-bkt") == [] and creates(emu) == [] and emu.jobs() == []


def test_quota_held_by_running_jobs_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gcs: Any) -> None:
    from tests.emulator.test_emulator import make_job
    from vtrain.emulator import sleep_runner

    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    with Emulator(runner=sleep_runner(60), pending_seconds=0.0) as emu:  # the held job stays RUNNING
        _point_at(monkeypatch, emu)
        emu.set_quota(CPUS, 16)  # the default for every region
        held = make_job()  # n1-standard-8: 8 vCPUs, 1 T4
        held.job_spec.scheduling.strategy = "STANDARD"
        emu.client().create_custom_job(parent=emu.parent(PROJECT), custom_job=held)
        job = write_job(tmp_path, job_text())  # chief + 1 worker, n1-standard-4: 8 vCPUs; 8 + 8 held = 16 fits
        code, out, err = run("doctor", str(job))
        assert code == 0, out
        assert checks(out)["quota"] == "ok    quota: fits in us-central1: 8 of 16 custom_model_training_cpus (8 in use)"
        emu.set_quota(CPUS, 12, region="us-central1")
        code, out, err = run("doctor", str(job))
        assert code == 1
    page = f"https://console.cloud.google.com/iam-admin/quotas?project={PROJECT}&metric={CPUS}"
    assert checks(out)["quota"] == (
        f"FAIL  quota: needs 8 N1 vCPUs ({CPUS}) in us-central1, the limit is 12 with 8 in use by 1 running or "
        f"pending job: wait for those jobs, or raise it at {page}"
    )


@pytest.mark.slow
def test_unreadable_quota_is_a_warning_and_the_job_goes(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    emu.deny_permissions("cloudquotas.quotas.get")
    code, out, err = run("submit", str(write_job(tmp_path, job_text())))
    assert code == 0, err
    page = f"https://console.cloud.google.com/iam-admin/quotas?project={PROJECT}&metric={CPUS}"
    assert checks(err)["quota"] == (
        "warn  quota: cannot read the limits: you may not read them (no cloudquotas.quotas.get; "
        "roles/cloudquotas.viewer has it); the job needs 8 custom_model_training_cpus in us-central1, which Vertex "
        f"refuses at create if over quota (see {page})"
    )
    assert len(emu.jobs()) == 1


def test_spot_jobs_count_against_the_preemptible_quota() -> None:
    body = {"jobSpec": {"scheduling": {"strategy": "SPOT"}, "workerPoolSpecs": [
        {"machineSpec": {"machineType": "a2-highgpu-2g", "acceleratorType": "NVIDIA_TESLA_A100",
                         "acceleratorCount": 2}, "replicaCount": "1"},
        {}, {"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCount": "2"}]}}  # fmt: skip
    assert [(n.metric, n.amount) for n in quota.needs(body)] == [
        (quota.metric("preemptible_nvidia_a100_gpus"), 2),  # an A2 machine counts its GPUs only
        (quota.metric("preemptible_cpus"), 32),
    ]
    tuning = {"parallelTrialCount": 3, "trialJobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}]}}  # fmt: skip
    assert [(n.metric, n.amount) for n in quota.needs(tuning)] == [(CPUS, 12)]


def test_the_region_entry_wins_over_the_default() -> None:
    info = {"dimensionsInfos": [{"dimensions": {"region": "us-central1"}, "details": {"value": "8"}},
                                {"details": {"value": "2"}}]}  # fmt: skip
    assert quota.region_limit(info, "us-central1") == 8
    assert quota.region_limit(info, "europe-west4") == 2
    assert quota.region_limit({"dimensionsInfos": []}, "us-central1") is None


def test_a_quota_the_api_does_not_name_is_a_warning_not_a_failure() -> None:
    needed = quota.needs({"jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                         "acceleratorCount": 1}, "replicaCount": "1"}]}})  # fmt: skip
    status, line = quota.verdict(needed, {T4: None, CPUS: 24}, {CPUS: 4}, 1, "us-central1", PROJECT)
    assert (status, line) == ("warn", "the Cloud Quotas API names no quota custom_model_training_nvidia_t4_gpus (1 "
                              "NVIDIA_TESLA_T4 accelerators), so it is not checked; fits: 4 of 24 "
                              "custom_model_training_cpus (4 in use)")  # fmt: skip
    assert quota.verdict(needed, {T4: -1, CPUS: 24}, {}, 0, "us-central1", PROJECT)[0] == "ok"


def test_linked_names_replace_the_spelling_in_either_kind_of_body() -> None:
    from vtrain.cloud.vertex.resources import Linked

    board = "projects/1/locations/us-central1/tensorboards/7"
    linked = Linked(board, "projects/1/locations/us-central1/metadataStores/default/contexts/churn")
    custom = {"displayName": "x", "jobSpec": {"tensorboard": "create", "workerPoolSpecs": []}}
    assert linked.apply(custom)["jobSpec"] == {"tensorboard": board, "workerPoolSpecs": [],
                                               "experiment": linked.experiment}  # fmt: skip
    assert custom["jobSpec"]["tensorboard"] == "create"  # the caller's body is not changed
    tuning = {"displayName": "x", "trialJobSpec": {"tensorboard": "team"}, "parallelTrialCount": 2}
    assert linked.apply(tuning)["trialJobSpec"]["tensorboard"] == board
    assert Linked().apply(custom) is custom


def test_a_tensorboard_value_with_a_slash_must_be_a_full_name(tmp_path: Path) -> None:
    job = write_job(tmp_path, job_text(extra=LINKED + "tensorboard: tensorboards/123\n"))
    code, out, err = run("validate", str(job))
    assert code == 2
    assert ("tensorboard: a full tensorboard name looks like projects/P/locations/L/tensorboards/ID; or give a "
            "display name (no '/'), or `create`") in err  # fmt: skip
