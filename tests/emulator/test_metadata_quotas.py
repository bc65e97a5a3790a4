"""The emulator's TensorboardService, MetadataService (Experiments) and Cloud Quotas routes, through the real
aiplatform_v1 clients (REST) and google-auth's AuthorizedSession, as vtrain calls them."""

from __future__ import annotations

import time
from typing import Any

import pytest
from click.testing import CliRunner
from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials
from google.auth.transport.requests import AuthorizedSession
from google.cloud import aiplatform_v1 as v1

from tests.emulator.test_emulator import make_job
from vtrain.cli import cli
from vtrain.cloud import quota
from vtrain.emulator import DENIED_PROJECT, Emulator, sleep_runner
from vtrain.emulator.quotas import DEFAULT_LIMIT, parse_quota

pytestmark = pytest.mark.emulator(runner=sleep_runner(30), pending_seconds=0.0, cancel_seconds=0.2)


def client(emu: Emulator, kind: str) -> Any:
    return getattr(v1, kind)(transport="rest", credentials=AnonymousCredentials(),
                             client_options={"api_endpoint": emu.url})  # fmt: skip


def test_tensorboards_are_created_by_operation_listed_by_display_name_and_read(emu: Emulator) -> None:
    boards = client(emu, "TensorboardServiceClient")
    parent = emu.parent("my-project")
    operation = boards.create_tensorboard(parent=parent, tensorboard=v1.Tensorboard(display_name="a"))
    made = operation.result(timeout=10)
    assert made.name.startswith(f"projects/{emu.project_number('my-project')}/locations/us-central1/tensorboards/")
    boards.create_tensorboard(parent=parent, tensorboard=v1.Tensorboard(display_name='b "quoted"')).result()
    assert boards.get_tensorboard(name=made.name).display_name == "a"
    listed = boards.list_tensorboards(request={"parent": parent, "filter": 'display_name="b \\"quoted\\""'})
    assert [b.display_name for b in listed] == ['b "quoted"']
    assert len(list(boards.list_tensorboards(request={"parent": parent, "page_size": 1}))) == 2  # paged
    assert list(boards.list_tensorboards(parent=emu.parent("other-project"))) == []
    with pytest.raises(gexc.BadRequest):
        list(boards.list_tensorboards(request={"parent": parent, "filter": "run_count>1"}))
    with pytest.raises(gexc.BadRequest, match="display_name is required"):
        boards.create_tensorboard(parent=parent, tensorboard=v1.Tensorboard()).result()
    with pytest.raises(gexc.NotFound):
        boards.get_tensorboard(name=f"{parent}/tensorboards/1")
    with pytest.raises(gexc.Forbidden, match="aiplatform.tensorboards.list"):
        list(boards.list_tensorboards(parent=emu.parent(DENIED_PROJECT)))


def test_experiment_contexts_need_the_store_and_exist_once(emu: Emulator) -> None:
    meta = client(emu, "MetadataServiceClient")
    parent = emu.parent("my-project")
    store = f"{parent}/metadataStores/default"
    context = v1.Context(display_name="exp", schema_title="system.Experiment", schema_version="0.0.1")
    with pytest.raises(gexc.NotFound):  # a new project has no metadata store
        meta.create_context(parent=store, context=context, context_id="exp")
    with pytest.raises(gexc.NotFound):
        meta.get_metadata_store(name=store)
    meta.create_metadata_store(parent=parent, metadata_store=v1.MetadataStore(), metadata_store_id="default").result()
    made = meta.create_context(parent=store, context=context, context_id="exp")
    number = emu.project_number("my-project")
    assert made.name == f"projects/{number}/locations/us-central1/metadataStores/default/contexts/exp"
    assert meta.get_context(name=f"{store}/contexts/exp").schema_title == "system.Experiment"
    with pytest.raises(gexc.Conflict):
        meta.create_context(parent=store, context=context, context_id="exp")
    with pytest.raises(gexc.BadRequest, match="Invalid context ID"):
        meta.create_context(parent=store, context=context, context_id="Bad_ID")
    emu.deny_permissions("aiplatform.contexts.create")
    with pytest.raises(gexc.Forbidden, match="aiplatform.contexts.create"):
        meta.create_context(parent=store, context=context, context_id="exp2")


def test_quota_infos_have_cloud_quotas_shape_and_follow_set_quota(emu: Emulator) -> None:
    session = AuthorizedSession(AnonymousCredentials())
    t4 = quota.metric("nvidia_t4_gpus")
    emu.set_quota(t4, 4, region="us-central1")
    url = f"{emu.url}/v1/projects/my-project/locations/global/services/{quota.SERVICE}/quotaInfos"
    first = session.get(url, params={"pageSize": "5"}).json()
    assert len(first["quotaInfos"]) == 5 and first["nextPageToken"]
    wanted = [t4, quota.metric("cpus"), quota.metric("x")]
    limits = quota.read_limits(session, emu.url, "my-project", "us-central1", wanted)
    assert limits == {t4: 4, quota.metric("cpus"): DEFAULT_LIMIT, quota.metric("x"): None}
    assert quota.read_limits(session, emu.url, "my-project", "europe-west4", [t4]) == {t4: DEFAULT_LIMIT}
    info = session.get(f"{url}/CustomModelTrainingNvidiaT4GpusPerProjectPerRegion").json()
    assert info["metric"] == t4 and info["dimensions"] == ["region"] and info["containerType"] == "PROJECT"
    assert info["dimensionsInfos"][0] == {"dimensions": {"region": "us-central1"}, "details": {"value": "4"},
                                          "applicableLocations": ["us-central1"]}  # fmt: skip
    denied = session.get(url.replace("/projects/my-project/", f"/projects/{DENIED_PROJECT}/"))
    assert denied.status_code == 403 and "cloudquotas.quotas.get" in denied.json()["error"]["message"]
    with pytest.raises(quota.Unreadable, match="no cloudquotas.quotas.get"):
        quota.read_limits(session, emu.url, DENIED_PROJECT, "us-central1", [t4])


def _running(emu: Emulator, job: v1.CustomJob) -> v1.CustomJob:
    made = emu.client().create_custom_job(parent=emu.parent("my-project"), custom_job=job)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = emu.client().get_custom_job(name=made.name)
        if got.state == v1.JobState.JOB_STATE_RUNNING:
            return got
        time.sleep(0.05)
    raise AssertionError("the job never ran")


def test_web_access_uris_appear_once_the_replicas_run(emu: Emulator) -> None:
    job = make_job(pools=2)  # chief + 3 workers
    job.job_spec.enable_web_access = True
    shells = _running(emu, job).web_access_uris
    assert sorted(shells) == ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2"]
    assert all(u.endswith("-dot-us-central1.aiplatform-training.googleusercontent.com/") for u in shells.values())
    dash = make_job(pools=2)
    dash.job_spec.enable_dashboard_access = True
    assert list(_running(emu, dash).web_access_uris) == ["workerpool0-0"]
    assert dict(_running(emu, make_job()).web_access_uris) == {}


def test_quota_specs_for_the_emulator_command() -> None:
    assert parse_quota("nvidia_t4_gpus@us-central1=4") == (quota.metric("nvidia_t4_gpus"), "us-central1", 4)
    assert parse_quota(f"{quota.metric('cpus')}=-1") == (quota.metric("cpus"), None, -1)
    for bad in ("cpus", "cpus=many", "cpus@Mars=1", "cpus=-2"):
        with pytest.raises(ValueError):
            parse_quota(bad)
    result = CliRunner().invoke(cli, ["emulator", "--port", "0", "--quota", "t4=lots"])
    assert result.exit_code == 2 and "'t4=lots' is not METRIC[@REGION]=N" in result.stderr
