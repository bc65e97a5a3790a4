"""Issue 43 part 1: `vtrain local` runs any CustomJob: a job on Vertex (the emulator) by name, a REST body file, a
gcloud --config file; its package fetched from Cloud Storage (gcp-storage-emulator).

The job is created with the raw v1 REST API (no vtrain labels, no vtrain runtime among its packages), its one
package the probe trainer's sdist staged by hand; the probe (tests/data/trainers/probe) dumps what each replica saw,
so one cheap run per form shows the chief and the worker ran from that package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.emulator.test_emulated_run import run
from tests.helpers import MakeEmulator
from vtrain.emulator.runner import GatedRunner

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "data" / "trainers" / "probe"
PROJECT = "test-project"
IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"


def pool(uri: str, args: list[str]) -> dict[str, Any]:
    return {"machineSpec": {"machineType": "n1-standard-4",
                            "reservationAffinity": {"reservationAffinityType": "ANY_RESERVATION"}},
            "replicaCount": "1",
            "pythonPackageSpec": {"executorImageUri": IMAGE, "packageUris": [uri], "pythonModule": "trainer.task",
                                  "args": args, "env": [{"name": "MY_VAR", "value": "from-the-request"}]}}


def staged_probe(gcs: Any, tmp_path: Path) -> str:
    """The probe's sdist, built by vtrain's builder and uploaded by hand, as any other tool would stage it."""
    from vtrain.trainer.packaging import build_sdist

    sdist = build_sdist(PROBE, tmp_path / "dist")
    gcs.create_bucket("stage-bkt")
    gcs.client().bucket("stage-bkt").blob(f"pkgs/{sdist.name}").upload_from_filename(str(sdist))
    return f"gs://stage-bkt/pkgs/{sdist.name}"



def seen(dump: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(dump.glob("*.json"))}


@pytest.mark.slow
def test_a_raw_rest_job_runs_here_by_name_as_a_body_file_and_as_a_gcloud_config(
        tmp_path: Path, cache: Path, gcs: Any, make_emulator: MakeEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(cache))
    uri = staged_probe(gcs, tmp_path)
    emu = make_emulator(GatedRunner(), point_at=PROJECT)  # stored, never run there: only read back
    runs = {}
    for form in ("name", "body", "gcloud", "proto"):
        dump = tmp_path / f"seen-{form}"
        body = {"displayName": "raw-job", "jobSpec": {"workerPoolSpecs": [
            pool(uri, ["--dump", str(dump), "--sleep=chief-0", "--seconds=0.5"]),
            pool(uri, ["--dump", str(dump)])], "scheduling": {"strategy": "SPOT"}}}  # fmt: skip
        made = requests.post(f"{emu.url}/v1/projects/{PROJECT}/locations/us-central1/customJobs", json=body, timeout=30)
        assert made.status_code == 200, made.text
        name = made.json()["name"]
        assert not made.json().get("labels")
        if form == "name":
            target = name
        elif form == "body":  # what `gcloud ai custom-jobs describe --format=json` gives
            described = requests.get(f"{emu.url}/v1/{name}", timeout=30).json()
            target = str(tmp_path / "described.json")
            Path(target).write_text(json.dumps(described))
        elif form == "gcloud":  # what `gcloud ai custom-jobs create --config` reads: the CustomJobSpec alone
            target = str(tmp_path / "config.yaml")
            Path(target).write_text(yaml.safe_dump(body["jobSpec"]))
        else:  # the SDK, given the API's own type
            import io

            from google.cloud.aiplatform_v1 import CustomJob
            from google.protobuf import json_format

            import vtrain

            proto = CustomJob()
            json_format.ParseDict(body, proto._pb)
            notices = io.StringIO()
            job = vtrain.run_local(proto, output_dir=tmp_path / "out-proto", notices=notices)
            assert job.wait(60) == "JOB_STATE_SUCCEEDED", job.error
            runs[form] = (dump, notices.getvalue())
            continue
        code, out, err = run("local", target, "--output-dir", str(tmp_path / f"out-{form}"), "--plain")
        assert code == 0, err
        runs[form] = (dump, err)
    for form, (dump, err) in runs.items():
        replicas = seen(dump)
        assert sorted(replicas) == ["chief-0", "worker-0"], form
        for label, replica in replicas.items():
            # the trainer ran from the package installed into vtrain's cache, with the request's env
            assert replica["trainer_file"].startswith(str(cache)), (form, replica["trainer_file"])
            assert replica["env"]["MY_VAR"] == "from-the-request"
            assert json.loads(replica["env"]["TF_CONFIG"])["task"]["type"] == label.split("-")[0]
        assert f"installing 1 package(s): {uri}" in err, form
        # what cannot be rehearsed here is said, once each (both pools reserve)
        assert err.count("[vtrain] machineSpec.reservationAffinity: machines come from a Compute Engine "
                         "reservation on Vertex; here from this machine\n") == 1, err
        assert err.count("[vtrain] scheduling.strategy SPOT: Spot VMs can be preempted on Vertex") == 1
    assert "running job projects/" in runs["name"][1] and "on Vertex AI" in runs["name"][1]
    assert "running a REST body in " in runs["body"][1]
    assert "running a gcloud --config file in " in runs["gcloud"][1]
    assert "running a CustomJob given to run_local" in runs["proto"][1]


def test_what_vtrain_local_refuses_of_a_job_it_did_not_write(tmp_path: Path, gcs: Any,
                                                             make_emulator: MakeEmulator) -> None:
    emu = make_emulator(GatedRunner(), point_at=PROJECT)
    body = {"displayName": "raw", "jobSpec": {"workerPoolSpecs": [pool("gs://b/t-0.1.tar.gz", [])]}}
    made = requests.post(f"{emu.url}/v1/projects/{PROJECT}/locations/us-central1/customJobs", json=body, timeout=30)
    name = made.json()["name"]
    job_id = name.rsplit("/", 1)[1]
    request = tmp_path / "job.json"
    request.write_text(json.dumps(body))
    for args, code, said in [
        ([name, "--set", "trainer.args=[]"], 2, "error: --set changes a job file; "),
        ([str(request), "--set", "x=1"], 2, "is a REST body: edit the request, or run a job file"),
        (["9" + job_id], 1, "not found"),
        ([f"projects/{PROJECT}/locations/europe-west4/customJobs/{job_id}", "--region", "us-central1"], 1,
         "is in region europe-west4, not us-central1"),
        ([job_id], 1, "error: trainer package gs://b/t-0.1.tar.gz not found"),  # nothing runs without it
    ]:  # fmt: skip
        got, _, err = run("local", *args)
        assert (got, said in err) == (code, True), err
        assert "Traceback" not in err
    code, _, err = run("replay", "9" + job_id)
    assert code == 1 and "not found" in err, err
