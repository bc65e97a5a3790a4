"""How does `vtrain emulator` hold up under many real clients? Run by hand (not a test):

    python benchmarks/emulator_load.py [--clients 500] [--requests 10000] [--workers 50]

Starts `vtrain emulator` as its own process (so its memory is its own) and drives it with the
real `aiplatform_v1.JobServiceClient` (REST, anonymous):

1. burst: `--clients` threads, each with its own client and connection, released at once by a
   barrier; each creates a job, gets it and lists a page of jobs. Counts connection resets and
   other errors, and the latency of each call (p50/p99).
2. steady: `--requests` get/list calls from `--workers` threads. The emulator's resident memory
   (VmRSS) is read after a warm-up and at the end: with a bounded request log it stays flat.

Targets (issue 10): 0 resets at 500 concurrent clients; memory flat across 10,000 requests.
Client and server share the machine, so latencies include the clients' own CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PARENT = "projects/bench-project/locations/us-central1"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def start_emulator() -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "VTRAIN_"))}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "vtrain", "emulator", "--port", "0", "-q", "--pending-seconds", "0",
            "--run-seconds", "2"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=REPO)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def client_for(url: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient

    return JobServiceClient(transport="rest", client_options={"api_endpoint": url}, credentials=AnonymousCredentials())


def job() -> Any:
    from google.cloud import aiplatform_v1 as v1

    pool = v1.WorkerPoolSpec(
        machine_spec=v1.MachineSpec(machine_type="n1-standard-4"),
        replica_count=1,
        container_spec=v1.ContainerSpec(image_uri="gcr.io/p/trainer:1", args=["--epochs", "3"]),
    )
    return v1.CustomJob(display_name="bench", job_spec=v1.CustomJobSpec(worker_pool_specs=[pool]))


def is_reset(err: BaseException) -> bool:
    text = f"{type(err).__name__} {err!r}".lower()
    return any(s in text for s in ("reset", "remotedisconnected", "connection aborted", "broken pipe"))


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = {}
        self.resets = 0
        self.errors: list[str] = []

    def timed(self, op: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            result = fn()
        except Exception as err:  # noqa: BLE001 - counted, the benchmark goes on
            with self.lock:
                if is_reset(err):
                    self.resets += 1
                else:
                    self.errors.append(f"{op}: {type(err).__name__}: {str(err)[:120]}")
            return None
        with self.lock:
            self.latency.setdefault(op, []).append(time.perf_counter() - start)
        return result

    def summary(self) -> dict[str, Any]:
        ops = {}
        for op, values in sorted(self.latency.items()):
            values.sort()
            ops[op] = {
                "n": len(values),
                "p50_ms": round(1000 * statistics.median(values), 1),
                "p99_ms": round(1000 * values[min(len(values) - 1, int(0.99 * len(values)))], 1),
            }
        return {"resets": self.resets, "errors": len(self.errors), "first_errors": self.errors[:5], "ops": ops}


def burst(url: str, clients: int) -> dict[str, Any]:
    tally = Tally()
    barrier = threading.Barrier(clients)
    from google.cloud.aiplatform_v1 import ListCustomJobsRequest

    def one() -> None:
        client = client_for(url)
        body = job()
        barrier.wait()
        created = tally.timed("create", lambda: client.create_custom_job(parent=PARENT, custom_job=body))
        if created is not None:
            tally.timed("get", lambda: client.get_custom_job(name=created.name))
        tally.timed("list", lambda: client.list_custom_jobs(request=ListCustomJobsRequest(parent=PARENT, page_size=10)))

    threads = [threading.Thread(target=one) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"clients": clients, "seconds": round(time.perf_counter() - start, 1), **tally.summary()}


def steady(url: str, requests: int, workers: int, names: list[str]) -> dict[str, Any]:
    from google.cloud.aiplatform_v1 import ListCustomJobsRequest

    tally = Tally()
    counter = iter(range(requests))
    lock = threading.Lock()

    def work() -> None:
        client = client_for(url)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            if i % 4 == 0:
                request = ListCustomJobsRequest(parent=PARENT, page_size=20)
                tally.timed("list", lambda r=request: client.list_custom_jobs(request=r))
            else:
                tally.timed("get", lambda i=i: client.get_custom_job(name=names[i % len(names)]))

    threads = [threading.Thread(target=work) for _ in range(workers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = round(time.perf_counter() - start, 1)
    return {"requests": requests, "workers": workers, "seconds": took, **tally.summary()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=50)
    args = parser.parse_args()
    proc, url = start_emulator()
    try:
        report: dict[str, Any] = {"emulator": url, "rss_kib_start": rss_kib(proc.pid)}
        report["burst"] = burst(url, args.clients)
        report["rss_kib_after_burst"] = rss_kib(proc.pid)
        names = [j.name for j in client_for(url).list_custom_jobs(parent=PARENT)][:200]
        time.sleep(3)  # the burst's jobs finish (run 2 s), their driver threads end
        steady(url, 1000, args.workers, names)  # warm-up: pools, caches, the request log fills
        report["rss_kib_before_steady"] = before = rss_kib(proc.pid)
        report["steady"] = steady(url, args.requests, args.workers, names)
        report["rss_kib_after_steady"] = after = rss_kib(proc.pid)
        report["rss_growth_over_steady_kib"] = after - before
    finally:
        proc.terminate()
        proc.wait(10)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
