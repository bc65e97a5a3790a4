"""Issue 30, class 4: answers vtrain did not expect, through the real CLI: no traceback, one line, a stated fallback.

- a trainer's step line with unusable numbers (``{"vtrain":"step","step":1e999}``): `status --watch`
  and `submit --wait` ignore it with one note per replica and keep watching to the job's end;
- a Cloud Quotas answer that is HTML, an array, a string, 1e999 where a limit belongs: preflight's
  quota check is the warning the docs promise ("cannot read the limits: …"), the job still goes.
"""

from __future__ import annotations

import http.client
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.cloud.test_submit import job_text
from tests.commands.test_cli_vertex import PROJECT, _point_at, run
from tests.helpers import write_job
from vtrain.cloud import quota
from vtrain.emulator import Emulator
from vtrain.emulator.runner import RunContext, RunResult
from vtrain.runtime.steplog import line

HOSTILE_STEPS = ['{"vtrain":"step","step":1e999}', '{"vtrain":"step","step":true}', '{"vtrain":"step","step":-4}',
                 '{"vtrain":"step","step":NaN,"time":1e999}', '{"vtrain": "step", "step": 5, "since": "x"}']


def stepping(job: Any, ctx: RunContext) -> RunResult:
    """A chief that logs hostile step lines around good ones, then succeeds."""
    ctx.log(line({"step": 2, "first": 1, "since": 100.0, "time": 101.0}))
    for text in HOSTILE_STEPS:
        ctx.log(text)
        ctx.log(text, task="workerpool1-0")
    ctx.log(line({"step": 7, "first": 1, "since": 100.0, "time": 103.0}))
    ctx.sleep(0.3)
    return RunResult()


pytestmark = [pytest.mark.emulator(runner=stepping, point_at=PROJECT), pytest.mark.usefixtures("fast_retries")]


def test_a_hostile_step_line_is_ignored_with_a_note_and_the_watch_goes_on(emu: Emulator) -> None:
    from google.cloud.aiplatform_v1 import WorkerPoolSpec

    from tests.emulator.test_emulator import make_job

    job = make_job()
    job.job_spec.worker_pool_specs.append(WorkerPoolSpec(
        machine_spec={"machine_type": "n1-standard-4"}, replica_count=1, container_spec={"image_uri": "gcr.io/p/t:1"}))
    made = emu.client().create_custom_job(parent=emu.parent(PROJECT), custom_job=job)
    job_id = made.name.rsplit("/", 1)[-1]
    code, out, err = run("status", job_id, "--watch", "--plain", "--poll", "0.05", "--progress-every", "1s")
    assert code == 0, err
    assert "Traceback" not in err and "\x1b" not in err
    notes = [ln for ln in err.splitlines() if ln.startswith("[vtrain] note: ")]
    assert notes == [
        "[vtrain] note: chief-0 logged an unreadable step line (step is inf; allowed: a whole number from 0 to "
        "2^53); ignored, its row keeps the last good step (later ones are ignored without a note)",
        "[vtrain] note: worker-0 logged an unreadable step line (step is inf; allowed: a whole number from 0 to "
        "2^53); ignored, its row keeps the last good step (later ones are ignored without a note)",
    ], err
    progress = re.findall(r"^\[vtrain\] progress \S+: (.*)$", err, re.M)
    assert progress and progress[-1].startswith("chief-0 succeeded step 7"), err  # watched to the end
    assert re.search(r"^state\s+JOB_STATE_SUCCEEDED$", out, re.M), out


def test_submit_wait_ignores_a_hostile_step_line_and_watches_to_the_end(emu: Emulator, tmp_path: Path) -> None:
    job = write_job(tmp_path, "name: stepping\ntrainer:\n  container: {image_uri: us-docker.pkg.dev/p/r/t:1}\n"
                              "cluster:\n  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 1}\n")
    code, out, err = run("submit", str(job), "--wait", "--plain", "--no-preflight", "--poll", "0.05",
                         "--progress-every", "1s")
    assert code == 0, err
    assert "Traceback" not in err
    note = "[vtrain] note: chief-0 logged an unreadable step line"
    assert len([ln for ln in err.splitlines() if ln.startswith(note)]) == 1, err
    progress = re.findall(r"^\[vtrain\] progress \S+: (.*)$", err, re.M)
    assert progress and progress[-1].startswith("chief-0 succeeded step 7"), err
    assert "ended JOB_STATE_SUCCEEDED" in out, out


# ---- quota answers --------------------------------------------------------------------------------
def _info(value: str) -> str:
    return (f'{{"quotaInfos": [{{"metric": "{quota.metric("cpus")}", "dimensionsInfos": [{{"dimensions": '
            f'{{"region": "us-central1"}}, "details": {{"value": {value}}}}}]}}]}}')


MAX_ANSWER_BYTES = 8 * 1024 * 1024  # vtrain.cloud.quota's cap (not imported: the test runs on older code too)
HOSTILE_QUOTAS = {
    "html": (b"<!doctype html><html><body>Sign in</body></html>", "an HTML page, not JSON"),
    "array": (b"[1, 2, 3]", "the document is an array; allowed: an object"),
    "string": (b'"quota"', "the document is a string; allowed: an object"),
    "infinite limit": (_info("1e999").encode(), "quotaInfos[0].dimensionsInfos[0].details.value is inf"),
    "boolean limit": (_info("true").encode(), "details.value is a boolean (true)"),
    "text limit": (_info('"lots"').encode(), "details.value is a string"),
    "infos as object": (b'{"quotaInfos": {"a": 1}}', "quotaInfos is an object; allowed: an array"),
    "deep": (b"[" * 100_000 + b"]" * 100_000, "JSON nested deeper than 100 levels"),
    "binary": (b"\xff\xfe\x00\x01" * 64, "not UTF-8 text"),
    "huge": (b" " * (MAX_ANSWER_BYTES + 1), f"more than {MAX_ANSWER_BYTES:,} bytes"),
}


class _Proxy(BaseHTTPRequestHandler):
    """Forwards every call to the emulator but the Cloud Quotas one, which it answers with `hostile`."""

    upstream = ""
    hostile = b""
    target = "/quotaInfos"

    def log_message(self, *args: Any) -> None:
        pass

    def _any(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.target in self.path:
            status, kind, answer = 200, "application/json", self.hostile
        else:
            target = urlsplit(self.upstream)
            conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            got = conn.getresponse()
            status, kind, answer = got.status, got.getheader("Content-Type", "application/json"), got.read()
            conn.close()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_GET = do_POST = do_DELETE = do_PATCH = _any


@pytest.fixture
def quota_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Proxy]]:
    from tests.cloud.test_submit import runner

    with Emulator(runner=runner, pending_seconds=0.05, cancel_seconds=0.05) as emulator:
        handler = type("Proxy", (_Proxy,), {"upstream": emulator.url})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            _point_at(monkeypatch, emulator)
            monkeypatch.setenv("VTRAIN_API_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
            yield handler
        finally:
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("name", list(HOSTILE_QUOTAS))
def test_a_hostile_quota_answer_is_the_promised_warning(name: str, tmp_path: Path, quota_proxy: type[_Proxy],
                                                         gcs: Any) -> None:  # fmt: skip
    quota_proxy.hostile, said = HOSTILE_QUOTAS[name]
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    code, out, err = run("doctor", str(write_job(tmp_path, job_text())))
    assert "Traceback" not in out + err and "Sign in" not in out + err
    assert code == 0, out + err
    line = next(ln for ln in out.splitlines() if ln.startswith("warn  quota: "))
    assert line.startswith("warn  quota: cannot read the limits: the Cloud Quotas API's answer: unreadable: "), line
    assert said in line and line.endswith(f"{quota.metric('cpus')})"), line


@pytest.mark.parametrize(("body", "said"), [
    (b"<html>proxy login</html>", "not JSON at line 1 column 1"),
    (b'{"permissions": "iam.serviceAccounts.actAs"}', "permissions is a string; allowed: an array"),
    (b'{"permissions": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "JSON nested deeper than 100 levels"),
])  # fmt: skip
def test_a_hostile_iam_answer_is_a_warning_not_a_traceback(body: bytes, said: str, tmp_path: Path,
                                                           quota_proxy: type[_Proxy], gcs: Any) -> None:  # fmt: skip
    quota_proxy.hostile, quota_proxy.target = body, ":testIamPermissions"
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    sa = "trainer@test-project.iam.gserviceaccount.com"
    code, out, err = run("doctor", str(write_job(tmp_path, job_text(extra=f"service_account: {sa}\n"))))
    assert "Traceback" not in out + err and "proxy login" not in out + err
    line = next(ln for ln in out.splitlines() if ln.startswith(("warn  service account", "FAIL  service account")))
    assert line == (f"warn  service account: IAM's testIamPermissions answer: unreadable: {said}; whether you may "
                    f"act as {sa} (iam.serviceAccounts.actAs) is not checked, and a job running as it fails at "
                    "create if you may not"), line
    assert code == 0, out + err
