"""Issue 21 item 3: list calls read `filter` and `readMask` as Vertex documents them, through the real client.

The filter grammar is Vertex's ListCustomJobs doc (display_name, state, create_time, labels; AND, OR,
NOT and parentheses, OR binding tighter as AIP-160 says); undocumented fields are 400s. readMask
keeps only the named fields; a path the resource has not is a 400."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1 as v1
from google.protobuf.field_mask_pb2 import FieldMask

from vtrain.emulator import Emulator, GatedRunner
from vtrain.emulator.filters import MAX_NESTING, compile_filter

PARENT = "projects/test-project/locations/us-central1"


@pytest.fixture(scope="module")
def emu() -> Iterator[tuple[Emulator, list[str]]]:
    """Five jobs: job-0..job-4, team a/b alternating, job-0 cancelled, the others RUNNING (gated)."""
    with Emulator(runner=GatedRunner(honour_cancel=True), pending_seconds=0, cancel_seconds=0) as emulator:
        client = emulator.client()
        pool = v1.WorkerPoolSpec(machine_spec=v1.MachineSpec(machine_type="n1-standard-4"), replica_count=1,
                                 container_spec=v1.ContainerSpec(image_uri="gcr.io/p/t:1"))
        names = [client.create_custom_job(parent=PARENT, custom_job=v1.CustomJob(
            display_name=f"job-{i}", labels={"team": "ab"[i % 2]},
            job_spec=v1.CustomJobSpec(worker_pool_specs=[pool]))).name for i in range(5)]
        client.cancel_custom_job(name=names[0])
        deadline = time.monotonic() + 10
        while client.get_custom_job(name=names[0]).state.name != "JOB_STATE_CANCELLED":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        yield emulator, names


def listed(emu: tuple[Emulator, list[str]], text: str) -> list[int]:
    emulator, names = emu
    jobs = emulator.client().list_custom_jobs(request=v1.ListCustomJobsRequest(parent=PARENT, filter=text))
    return sorted(names.index(j.name) for j in jobs)


@pytest.mark.parametrize("text,expected", [
    ('state!="JOB_STATE_FAILED" OR display_name="my_job"', [0, 1, 2, 3, 4]),  # Vertex's own examples
    ('state="JOB_STATE_CANCELLED" AND display_name:"job-*"', [0]),
    ('NOT display_name="job-1"', [0, 2, 3, 4]),
    ("labels.team=a OR labels.team=b", [0, 1, 2, 3, 4]),
    ('display_name="job-1" OR display_name="job-2" AND labels.team=b', [1]),  # OR first: (1 OR 2) AND b
    ('(display_name="job-1" OR display_name="job-2") AND labels.team=a', [2]),
    ('display_name="job-1" OR (display_name="job-2" AND labels.team=a)', [1, 2]),
    ('NOT (labels.team=a OR state=JOB_STATE_CANCELLED)', [1, 3]),
    ('-(labels.team=a) AND -display_name="job-3"', [1]),
    ('((((labels.team=b))))', [1, 3]),
    ("NOT " * 1001 + "labels.team=b", [0, 2, 4]),
    ('create_time>"2000-01-01T00:00:00Z" AND labels.team:*', [0, 1, 2, 3, 4]),
])
def test_documented_filters(emu: tuple[Emulator, list[str]], text: str, expected: list[int]) -> None:
    assert listed(emu, text) == expected


@pytest.mark.parametrize("text", [
    'update_time>"2000-01-01T00:00:00Z"', 'start_time>"2000-01-01T00:00:00Z"', 'end_time<"2100-01-01T00:00:00Z"',
    'name="x"', "(labels.team=a", "labels.team=a)", "labels.team=a OR", "AND labels.team=a", "labels.team=a b=c",
    'display_name="unterminated', "(" * (MAX_NESTING + 1) + "labels.team=a" + ")" * (MAX_NESTING + 1),
    "labels.team=a AND " * 2000 + "labels.team=a", 'create_time>"yesterday"', "state=RUNNING",
])
def test_undocumented_or_malformed_filters_are_400s(emu: tuple[Emulator, list[str]], text: str) -> None:
    with pytest.raises(gexc.BadRequest):
        listed(emu, text)


def test_the_unit_parser_keeps_state_semantics() -> None:
    job = v1.CustomJob.pb(v1.CustomJob(display_name="x", labels={"k": "v"}, state="JOB_STATE_RUNNING"))
    assert compile_filter("state=JOB_STATE_RUNNING OR state=JOB_STATE_PENDING")(job)
    assert not compile_filter("NOT (labels:k)")(job)


def test_read_mask_keeps_only_the_named_fields(emu: tuple[Emulator, list[str]]) -> None:
    emulator, names = emu
    request = v1.ListCustomJobsRequest(parent=PARENT, read_mask=FieldMask(paths=["display_name", "state"]))
    jobs = list(emulator.client().list_custom_jobs(request=request))
    assert len(jobs) == 5 and all(j.display_name and not j.name and not j.job_spec.worker_pool_specs for j in jobs)
    raw = requests.get(f"{emulator.url}/v1/{PARENT}/customJobs",
                       params={"readMask": "displayName,jobSpec.workerPoolSpecs"}, timeout=10).json()
    assert {tuple(sorted(j)) for j in raw["customJobs"]} == {("displayName", "jobSpec")}


@pytest.mark.parametrize("mask", ["bogus", "displayName,bogus", "jobSpec.nope", "display_name,", "labels.team.x"])
def test_a_bogus_read_mask_is_a_400(emu: tuple[Emulator, list[str]], mask: str) -> None:
    emulator, _ = emu
    answer = requests.get(f"{emulator.url}/v1/{PARENT}/customJobs", params={"readMask": mask}, timeout=10)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_tuning_lists_take_the_same_filter_and_mask(emu: tuple[Emulator, list[str]]) -> None:
    emulator, _ = emu
    url = f"{emulator.url}/v1/{PARENT}/hyperparameterTuningJobs"
    ok: Any = requests.get(url, params={"filter": "labels.a=b OR labels.c=d", "readMask": "displayName"}, timeout=10)
    assert ok.status_code == 200 and ok.json() == {}
    assert requests.get(url, params={"readMask": "trialJobSpec.bogus"}, timeout=10).status_code == 400
