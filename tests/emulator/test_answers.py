"""Issue 20, class 9: whatever a request holds, the emulator answers it with a Google-style JSON error.

The roots, one mechanism each (vtrain/emulator/wire.py, validation.negative_values):
- a body is read once, bounded (MAX_BODY) and parsed by one JSON parser (UTF-8, depth, an object)
  for every route: deep JSON, `null`, arrays, numbers and bad bytes are 400s, never a dropped
  connection or a Python message;
- hand-checked bodies (entries:list, testIamPermissions) have their field types checked;
- list query parameters are checked once (pageSize int32, pageToken one the emulator issued);
- negative integers and durations anywhere in a job are refused by one walk over the proto;
- every method is routed and every HTTP-layer error is JSON (404 for PUT/PATCH/..., no HTML);
- the request log keeps a bounded summary of what it refused, not the body.
"""

from __future__ import annotations

import json
import socket
import tracemalloc
from typing import Any

import pytest
import requests

from vtrain.emulator import Emulator, sleep_runner
from vtrain.emulator.wire import MAX_BODY, MAX_DEPTH

PARENT = "projects/test-project/locations/us-central1"
JOBS = f"/v1/{PARENT}/customJobs"
TUNING = f"/v1/{PARENT}/hyperparameterTuningJobs"
IAM = "/v1/projects/-/serviceAccounts/sa@test-project.iam.gserviceaccount.com:testIamPermissions"
LOGS = "/v2/entries:list"
MODELS = f"/v1/{PARENT}/models:upload"
POSTS = [JOBS, TUNING, IAM, LOGS, f"{JOBS}/123:cancel", MODELS]


pytestmark = pytest.mark.emulator(runner=sleep_runner(0.1), pending_seconds=0, cancel_seconds=0.2)


def job(**spec: Any) -> dict[str, Any]:
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
            "containerSpec": {"imageUri": "gcr.io/p/t:1"}}
    pool.update(spec.pop("pool", {}))
    return {"displayName": "j", "jobSpec": {"workerPoolSpecs": [pool], **spec}}


def tuning(**fields: Any) -> dict[str, Any]:
    body = {"displayName": "t", "maxTrialCount": 2, "parallelTrialCount": 1,
            "studySpec": {"metrics": [{"metricId": "loss", "goal": "MINIMIZE"}],
                          "parameters": [{"parameterId": "x",
                                          "integerValueSpec": {"minValue": "-5", "maxValue": "5"}}]},
            "trialJobSpec": job()["jobSpec"]}
    body.update(fields)
    return body


def post(emu: Emulator, path: str, data: bytes | str) -> requests.Response:
    return requests.post(emu.url + path, data=data, headers={"Content-Type": "application/json"}, timeout=30)


def assert_clean_400(answer: requests.Response) -> dict[str, Any]:
    assert answer.status_code == 400, answer.text[:300]
    assert answer.headers["Content-Type"].startswith("application/json")
    error = answer.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert not any(word in error["message"] for word in ("Error:", "NoneType", "Traceback", "object of type"))
    assert len(error["message"]) < 1000
    return error


# ---- bodies: one parser --------------------------------------------------------------------------
BAD_BODIES = {
    "null": b"null", "array": b"[]", "number": b"5", "string": b'"x"', "true": b"true",
    "deep arrays": b"[" * 5000 + b"]" * 5000, "deep objects": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "deep, unclosed": b"[" * 100000, "deep inside a field": b'{"displayName": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    "not json": b"{displayName: x}", "not utf-8": b'{"displayName": "\xff"}', "trailing garbage": b"{} {}",
    "nan": b'{"pageSize": NaN}',
}


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=list(BAD_BODIES))
def test_every_post_route_answers_a_bad_body_with_a_400(emu: Emulator, path: str, body: bytes) -> None:
    assert_clean_400(post(emu, path, body))
    assert emu.jobs() == [] and emu.tuning_jobs() == []


def test_nesting_up_to_the_limit_is_parsed(emu: Emulator) -> None:
    labels_deep = '{"displayName": "j", "x": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    error = assert_clean_400(post(emu, JOBS, labels_deep))
    assert 'Unknown name "x"' in error["message"]  # parsed, then refused for the field, not the depth


def test_a_null_body_says_what_is_wrong(emu: Emulator) -> None:
    error = assert_clean_400(post(emu, JOBS, b"null"))
    assert error["message"] == "Invalid JSON payload received. Expected an object for CustomJob, got null."


# ---- hand-checked bodies: field types ----------------------------------------------------------------
@pytest.mark.parametrize("body", [{"permissions": "iam.serviceAccounts.actAs"}, {"permissions": [1]},
                                  {"permissions": None}, {"permissions": {"a": 1}}, {"perms": []},
                                  {"permissions": [["iam.serviceAccounts.actAs"]]}])
def test_test_iam_permissions_checks_its_types(emu: Emulator, body: Any) -> None:
    assert_clean_400(post(emu, IAM, json.dumps(body)))


def test_test_iam_permissions_still_answers(emu: Emulator) -> None:
    answer = post(emu, IAM, json.dumps({"permissions": ["iam.serviceAccounts.actAs"]}))
    assert answer.json() == {"permissions": ["iam.serviceAccounts.actAs"]}


# ---- query parameters ----------------------------------------------------------------------------
BAD_QUERIES = [{"pageToken": "9" * 5000}, {"pageToken": "1" * 21}, {"pageToken": "٣"}, {"pageToken": "0"},
               {"pageToken": "-1"}, {"pageToken": "abc"}, {"pageSize": "9" * 5000}, {"pageSize": "2147483648"},
               {"pageSize": "-1"}, {"pageSize": "²"}, {"pageSize": "1.5"}]


@pytest.mark.parametrize("path", [JOBS, TUNING])
@pytest.mark.parametrize("query", BAD_QUERIES, ids=[json.dumps(q)[:30] for q in BAD_QUERIES])
def test_list_parameters_out_of_range_are_400s(emu: Emulator, path: str, query: dict[str, str]) -> None:
    assert_clean_400(requests.get(emu.url + path, params=query, timeout=30))


# ---- values the proto allows and Vertex refuses -----------------------------------------------------
NEGATIVE = {
    "scheduling.timeout": job(scheduling={"timeout": "-5s"}),
    "scheduling.max_wait_duration": job(scheduling={"maxWaitDuration": "-0.5s"}),
    "boot disk size": job(pool={"diskSpec": {"bootDiskSizeGb": -100}}),
    "accelerator count": job(pool={"machineSpec": {"machineType": "n1-standard-4", "acceleratorCount": -1}}),
    "replica count": job(pool={"replicaCount": "-3"}),
}


@pytest.mark.parametrize("body", NEGATIVE.values(), ids=list(NEGATIVE))
def test_negative_counts_and_durations_are_refused(emu: Emulator, body: dict[str, Any]) -> None:
    error = assert_clean_400(post(emu, JOBS, json.dumps(body)))
    assert "must not be negative" in json.dumps(error)
    trial = tuning(trialJobSpec=body["jobSpec"])
    assert_clean_400(post(emu, TUNING, json.dumps(trial)))


def test_negative_tuning_counts_are_refused_but_negative_parameter_bounds_are_not(emu: Emulator) -> None:
    assert_clean_400(post(emu, TUNING, json.dumps(tuning(maxFailedTrialCount=-1))))
    assert post(emu, TUNING, json.dumps(tuning())).status_code == 200  # integerValueSpec minValue -5


# ---- methods and the HTTP layer: JSON, never HTML --------------------------------------------------
@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS", "TRACE", "FROB"])
@pytest.mark.parametrize("path", [JOBS, f"{JOBS}/123", "/", "/nowhere"])
def test_unrouted_methods_get_googles_json_404(emu: Emulator, method: str, path: str) -> None:
    answer = requests.request(method, emu.url + path, json={}, timeout=30)
    assert answer.status_code == 404 and answer.headers["Content-Type"].startswith("application/json")
    assert answer.json()["error"]["status"] == "NOT_FOUND"


def test_head_gets_a_status_and_no_body(emu: Emulator) -> None:
    with requests.Session() as session:
        answer = session.head(emu.url + "/nowhere", timeout=30)
        assert answer.status_code == 404 and answer.content == b""
        assert session.get(emu.url + JOBS, timeout=30).status_code == 200  # the connection stayed in step


def _raw(emu: Emulator, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", emu.port), timeout=30) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


@pytest.mark.parametrize("raw,code", [
    (b"POST " + JOBS.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 411),
    (b"POST " + JOBS.encode() + b" HTTP/1.1\r\nContent-Length: " + str(MAX_BODY + 1).encode() + b"\r\n\r\n", 413),
    (b"POST " + JOBS.encode() + b" HTTP/1.1\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n", 413),
    (b"POST " + JOBS.encode() + b" HTTP/1.1\r\nContent-Length: \xd9\xa3\r\n\r\n", 400),
    (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431),
    (b"GARBAGE\r\n\r\n", 400),
])
def test_http_layer_errors_are_json(emu: Emulator, raw: bytes, code: int) -> None:
    answer = _raw(emu, raw)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == str(code).encode()
    assert b"application/json" in head and json.loads(body)["error"]["code"] == code


# ---- memory: what is refused is not kept --------------------------------------------------------------
def test_refused_bodies_are_not_retained(emu: Emulator) -> None:
    big = b'{"displayName": "' + b"x" * (MAX_BODY - 100) + b'", "bogus": 1}'
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with requests.Session() as session:
            for _ in range(10):
                answer = session.post(emu.url + JOBS, data=big, headers={"Content-Type": "application/json"},
                                      timeout=30)
                assert answer.status_code == 400
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 3 * MAX_BODY, f"{grown} bytes kept after 10 refused {len(big)}-byte requests"
    kept = emu.requests[-1]
    assert kept["body"] is None and kept["bytes"] == len(big) and kept["status"] == 400
    assert requests.post(emu.url + JOBS, data=b"x" * (MAX_BODY + 1), timeout=30).status_code == 413
