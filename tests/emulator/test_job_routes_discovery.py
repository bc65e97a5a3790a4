"""The JobService routes the emulator serves (CustomJobs, HyperparameterTuningJobs, a trial's CustomJob),
driven over plain HTTP, each answer checked against the aiplatform v1 Discovery document, as the
Metadata, TensorBoard and Model routes are (issue 31 item 3: every route, true to the published reference)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests

from tests.emulator.discovery import check_answer
from tests.emulator.test_answers import job, tuning
from vtrain.emulator import Emulator, sleep_runner

PARENT = "projects/test-project/locations/us-central1"

pytestmark = pytest.mark.emulator(runner=sleep_runner(30), pending_seconds=0, cancel_seconds=0)


def call(emu: Emulator, verb: str, path: str, body: Any = None, **query: Any) -> Any:
    path = path if path.startswith("/v1/") else f"/v1/{PARENT}/{path}"
    answer = requests.request(verb, emu.url + path, json=body, params=query, timeout=30)
    assert answer.status_code == 200, (verb, path, answer.text[:300])
    doc = answer.json()
    check_answer(verb, path, doc)
    return doc


def test_every_job_route_answers_what_the_discovery_document_declares(emu: Emulator) -> None:
    made = call(emu, "POST", "customJobs", job(baseOutputDirectory={"outputUriPrefix": "gs://b/out"}))
    name = made["name"]
    assert made["state"] in ("JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING")
    assert call(emu, "GET", f"/v1/{name}")["name"] == name
    listed = call(emu, "GET", "customJobs", pageSize=1)
    assert [j["name"] for j in listed["customJobs"]] == [name]
    call(emu, "GET", "customJobs", filter='state="JOB_STATE_RUNNING" OR display_name="j"', readMask="name,state")
    call(emu, "POST", f"/v1/{name}:cancel", {})
    study = call(emu, "POST", "hyperparameterTuningJobs", tuning())
    deadline = time.monotonic() + 20
    while not (got := call(emu, "GET", f"/v1/{study['name']}")).get("trials"):
        assert time.monotonic() < deadline, got
        time.sleep(0.1)
    trial_job = got["trials"][0]["customJob"]
    assert call(emu, "GET", f"/v1/{trial_job}")["name"] == trial_job  # a trial's CustomJob is a job too
    assert call(emu, "GET", "hyperparameterTuningJobs")["hyperparameterTuningJobs"][0]["name"] == study["name"]
    call(emu, "POST", f"/v1/{study['name']}:cancel", {})
