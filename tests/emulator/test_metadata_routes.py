"""Every TensorBoard and ML Metadata route the emulator serves, driven over plain HTTP, each answer checked
against the aiplatform v1 Discovery document (the method its verb and path are, that method's response
schema), plus the semantics the SDK's Experiments rely on (issue 31 item 3)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.emulator.discovery import check_answer, output_only
from vtrain.emulator import Emulator
from vtrain.emulator.metadata import KINDS, PAGE_SIZE


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with Emulator(pending_seconds=0.01) as e:
        yield e


class Api:
    def __init__(self, emu: Emulator) -> None:
        self.emu, self.session = emu, requests.Session()
        self.base = f"/v1/projects/{emu.project_number('my-project')}/locations/us-central1"
        self.answers = 0

    def call(self, verb: str, path: str, body: Any = None, status: int = 200, **query: Any) -> Any:
        path = path if path.startswith("/v1/") else self.base + path
        r = self.session.request(verb, self.emu.url + path, json=body, params=query)
        assert r.status_code == status, (verb, path, r.text)
        answer = r.json()
        if status == 200:
            check_answer(verb, path, answer)
            self.answers += 1
        return answer


def test_each_route_answers_what_the_discovery_document_declares(emu: Emulator) -> None:
    api = Api(emu)
    op = api.call("POST", "/metadataStores", {"state": {"diskUtilizationBytes": "9"}}, metadataStoreId="default")
    assert op["done"] and "state" not in op["response"]  # output-only: not kept
    api.call("GET", "/v1/" + op["name"])
    store = api.call("GET", "/metadataStores/default")["name"]
    assert api.call("GET", "/metadataStores")["metadataStores"][0]["name"] == store
    exp = api.call("POST", "/metadataStores/default/contexts",
                   {"schemaTitle": "system.Experiment", "parentContexts": [f"{store}/contexts/x"],
                    "createTime": "2000-01-01T00:00:00Z", "metadata": {"experiment_deleted": False}},
                   contextId="exp")  # fmt: skip
    assert "parentContexts" not in exp and exp["createTime"] != "2000-01-01T00:00:00Z"
    run = api.call("POST", "/metadataStores/default/contexts", {"schemaTitle": "system.ExperimentRun"},
                   contextId="exp-r1")  # fmt: skip
    api.call("POST", "/metadataStores/default/contexts/exp:addContextChildren", {"childContexts": [run["name"]]})
    api.call("POST", "/metadataStores/default/contexts/exp-r1:addContextChildren", {"childContexts": [exp["name"]]},
             status=400)  # a cycle  # fmt: skip
    assert api.call("GET", "/metadataStores/default/contexts/exp-r1")["parentContexts"] == [exp["name"]]
    listed = api.call("GET", "/metadataStores/default/contexts",
                      filter=f'(schema_title="system.ExperimentRun" OR schema_title="x") AND '
                      f'parent_contexts:"{exp["name"]}"')  # fmt: skip
    assert [c["name"] for c in listed["contexts"]] == [run["name"]]
    assert [c["name"] for c in api.call("GET", "/metadataStores/default/contexts",
                                        filter=f'child_contexts:"{run["name"]}"')["contexts"]] == [exp["name"]]
    patched = api.call("PATCH", "/metadataStores/default/contexts/exp-r1",
                       {"metadata": {"lr": 0.1}, "displayName": "ignored"}, updateMask="metadata")  # fmt: skip
    assert patched["metadata"] == {"lr": 0.1} and patched["displayName"] == "exp-r1" and patched["etag"] == "2"
    names = [c["displayName"] for c in api.call("GET", "/metadataStores/default/contexts",
                                                orderBy="display_name desc")["contexts"]]
    assert names == ["exp-r1", "exp"]
    assert api.call("GET", "/metadataStores/default/contexts", filter="metadata.lr.number_value = 0.1")[
        "contexts"][0]["name"] == run["name"]
    art = api.call("POST", "/metadataStores/default/artifacts", {"uri": "gs://b/m", "schemaTitle": "system.Model"},
                   artifactId="m1")  # fmt: skip
    api.call("GET", "/metadataStores/default/artifacts/m1")
    api.call("PATCH", "/metadataStores/default/artifacts/m1", {"state": "LIVE"})
    ex = api.call("POST", "/metadataStores/default/executions", {"schemaTitle": "system.Run"}, executionId="e1")
    api.call("GET", "/metadataStores/default/executions/e1")
    api.call("PATCH", "/metadataStores/default/executions/e1", {"state": "COMPLETE"})
    api.call("POST", "/metadataStores/default/executions/e1:addExecutionEvents",
             {"events": [{"artifact": art["name"], "type": "OUTPUT"}]})  # fmt: skip
    graph = api.call("GET", "/metadataStores/default/executions/e1:queryExecutionInputsAndOutputs")
    assert [(e["artifact"], e["execution"], e["type"]) for e in graph["events"]] == [(art["name"], ex["name"],
                                                                                      "OUTPUT")]
    assert [a["name"] for a in graph["artifacts"]] == [art["name"]]
    assert graph["executions"] == [api.call("GET", "/metadataStores/default/executions/e1")]
    api.call("POST", "/metadataStores/default/contexts/exp-r1:addContextArtifactsAndExecutions",
             {"artifacts": [art["name"]], "executions": [ex["name"]]})  # fmt: skip
    in_run = api.call("GET", "/metadataStores/default/artifacts", filter=f'in_context("{run["name"]}")')
    assert [a["uri"] for a in in_run["artifacts"]] == ["gs://b/m"]
    assert api.call("GET", "/metadataStores/default/executions", filter=f'in_context("{run["name"]}") AND '
                    'state=COMPLETE')["executions"][0]["name"] == ex["name"]  # fmt: skip
    api.call("POST", "/metadataStores/default/contexts/exp:removeContextChildren", {"childContexts": [run["name"]]})
    assert "parentContexts" not in api.call("GET", "/metadataStores/default/contexts/exp-r1")
    deleted = api.call("DELETE", "/metadataStores/default/artifacts/m1")
    assert deleted["done"] and api.call("GET", "/metadataStores/default/artifacts/m1", status=404)
    assert api.call("GET", "/metadataStores/default/executions/e1:queryExecutionInputsAndOutputs") == {
        "executions": [api.call("GET", "/metadataStores/default/executions/e1")]}  # a deleted artifact's event goes
    api.call("DELETE", "/metadataStores/default/executions/e1")
    api.call("DELETE", "/metadataStores/default/contexts/exp-r1")

    made = [api.call("POST", "/tensorboards", {"displayName": n, "runCount": "7", "satisfiesPzs": True,
                                               "isDefault": n == "a"}) for n in ("a", "b")]  # fmt: skip
    assert all("runCount" not in op["response"] and "satisfiesPzs" not in op["response"] for op in made)
    board = made[0]["response"]["name"]
    api.call("GET", "/v1/" + made[0]["name"])
    assert [b["displayName"] for b in api.call("GET", "/tensorboards", filter="is_default=true")["tensorboards"]] \
        == ["a"]
    api.call("PATCH", f"/{board.split('/', 4)[4]}", {"isDefault": False}, updateMask="is_default")
    api.call("PATCH", "/tensorboards/" + made[1]["response"]["name"].rsplit("/", 1)[1], {"isDefault": True},
             updateMask="isDefault")  # fmt: skip
    assert [b["displayName"] for b in api.call("GET", "/tensorboards", filter="is_default=true")["tensorboards"]] \
        == ["b"]
    masked = api.call("GET", "/tensorboards", orderBy="display_name desc", readMask="displayName")
    assert masked["tensorboards"] == [{"displayName": "b"}, {"displayName": "a"}]
    tb = "/" + board.split("/", 4)[4]
    api.call("GET", tb)
    api.call("POST", f"{tb}/experiments", {"displayName": "exp"}, tensorboardExperimentId="exp")
    api.call("GET", f"{tb}/experiments/exp")
    api.call("GET", f"{tb}/experiments", readMask="name")
    api.call("PATCH", f"{tb}/experiments/exp", {"description": "d"}, updateMask="description")
    api.call("POST", f"{tb}/experiments/exp/runs", {"displayName": "r1"}, tensorboardRunId="r1")
    batch = api.call("POST", f"{tb}/experiments/exp/runs:batchCreate",
                     {"requests": [{"parent": f"{board}/experiments/exp", "tensorboardRun": {"displayName": "r2"},
                                    "tensorboardRunId": "r2"}]})  # fmt: skip
    assert batch["tensorboardRuns"][0]["name"] == f"{board}/experiments/exp/runs/r2"
    api.call("GET", f"{tb}/experiments/exp/runs/r1")
    api.call("GET", f"{tb}/experiments/exp/runs", orderBy="create_time desc")
    api.call("PATCH", f"{tb}/experiments/exp/runs/r1", {"description": "d"}, updateMask="description")
    series = api.call("POST", f"{tb}/experiments/exp/runs/r1/timeSeries",
                      {"displayName": "loss", "valueType": "SCALAR", "metadata": {"maxStep": "99"}})  # fmt: skip
    assert "metadata" not in series
    sid = series["name"].rsplit("/", 1)[1]
    more = api.call("POST", f"{tb}/experiments/exp:batchCreate", {"requests": [
        {"parent": f"{board}/experiments/exp/runs/r2", "tensorboardTimeSeries": {"displayName": "acc",
                                                                                 "valueType": "SCALAR"}}]})
    api.call("GET", f"{tb}/experiments/exp/runs/r1/timeSeries/{sid}")
    api.call("GET", f"{tb}/experiments/exp/runs/r1/timeSeries", filter='display_name="loss"')
    point = {"step": "3", "wallTime": "2026-01-01T00:00:00Z", "scalar": {"value": 0.25}}
    api.call("POST", f"{tb}/experiments/exp/runs/r1:write",
             {"timeSeriesData": [{"tensorboardTimeSeriesId": sid, "valueType": "SCALAR", "values": [point]}]})
    acc = more["tensorboardTimeSeries"][0]["name"]
    api.call("POST", f"{tb}/experiments/exp:write", {"writeRunDataRequests": [{
        "tensorboardRun": f"{board}/experiments/exp/runs/r2",
        "timeSeriesData": [{"tensorboardTimeSeriesId": acc.rsplit("/", 1)[1], "valueType": "SCALAR",
                            "values": [{**point, "step": "4"}]}]}]})  # fmt: skip
    read = api.call("GET", f"{tb}:batchRead", timeSeries=[series["name"], acc])
    assert [d["values"][0]["step"] for d in read["timeSeriesData"]] == ["3", "4"]
    one = api.call("GET", f"{tb}/experiments/exp/runs/r1/timeSeries/{sid}:read", maxDataPoints=10)
    assert one["timeSeriesData"]["values"] == [point]
    assert api.call("GET", f"{tb}/experiments/exp/runs/r1/timeSeries/{sid}")["metadata"]["maxStep"] == "3"
    api.call("DELETE", f"{tb}/experiments/exp/runs/r1/timeSeries/{sid}")
    api.call("DELETE", f"{tb}/experiments/exp/runs/r2")
    api.call("DELETE", f"{tb}/experiments/exp")
    api.call("DELETE", tb)
    assert api.answers >= 55


def test_output_only_fields_are_the_references(emu: Emulator) -> None:
    for kind in KINDS.values():
        assert output_only(kind.kind) <= kind.output_only, kind.kind


def test_lists_page_by_100_at_most(emu: Emulator) -> None:
    api = Api(emu)
    api.call("POST", "/metadataStores", {}, metadataStoreId="default")
    for i in range(PAGE_SIZE + 3):
        api.call("POST", "/metadataStores/default/artifacts", {"uri": f"gs://b/{i}"})
    for size in (0, 500):
        first = api.call("GET", "/metadataStores/default/artifacts", pageSize=size)
        assert len(first["artifacts"]) == PAGE_SIZE and first["nextPageToken"]
        rest = api.call("GET", "/metadataStores/default/artifacts", pageSize=size, pageToken=first["nextPageToken"])
        assert len(rest["artifacts"]) == 3 and "nextPageToken" not in rest


@pytest.mark.parametrize(("path", "query", "why"), [
    ("/tensorboards", {"filter": "run_count>1"}, "unsupported field"),
    ("/tensorboards", {"orderBy": "run_count"}, "Invalid order_by"),
    ("/tensorboards", {"readMask": "nope"}, "Invalid field mask"),
    ("/metadataStores/default/contexts", {"filter": 'in_context("x")'}, "not supported here"),
    ("/metadataStores/default/artifacts", {"filter": "metadata.x.number_value=abc"}, "not a number"),
])  # fmt: skip
def test_bad_list_queries_are_a_400(emu: Emulator, path: str, query: dict[str, str], why: str) -> None:
    api = Api(emu)
    api.call("POST", "/metadataStores", {}, metadataStoreId="default")
    assert why in api.call("GET", path, status=400, **query)["error"]["message"]


def test_references_to_missing_resources_are_a_404(emu: Emulator) -> None:
    api = Api(emu)
    api.call("POST", "/metadataStores", {}, metadataStoreId="default")
    api.call("POST", "/metadataStores/default/contexts", {}, contextId="exp")
    api.call("POST", "/metadataStores/default/contexts/exp:addContextChildren",
             {"childContexts": [f"{api.base}/metadataStores/default/contexts/nope"]}, status=404)  # fmt: skip
    api.call("POST", "/metadataStores/default/contexts/nope:addContextChildren", {"childContexts": []}, status=404)
    api.call("POST", "/tensorboards/1/experiments", {}, tensorboardExperimentId="e", status=404)
    api.call("PATCH", "/metadataStores/default/contexts/nope", {"metadata": {}}, status=404)
    api.call("PATCH", "/metadataStores/default/contexts/exp", {}, updateMask="bogus", status=400)


def test_entries_list_takes_the_declared_project_ids(emu: Emulator) -> None:
    """ListLogEntriesRequest declares projectIds (deprecated, not removed): taken like resourceNames."""
    url = f"{emu.url}/v2/entries:list"
    body = {"projectIds": ["my-project"], "filter": 'resource.labels.job_id="1"'}
    assert requests.post(url, json=body).status_code == 200
    denied = requests.post(url, json={**body, "projectIds": ["denied-project"]})
    assert denied.status_code == 403 and "logging.logEntries.list" in denied.json()["error"]["message"]
    assert requests.post(url, json={**body, "projectIds": "my-project"}).status_code == 400  # a list, as declared
