"""The image's stack (issue 42): its first build, a warm rehearsal on it against --runtime host, and --runtime image's
start overhead per replica.

    .venv/bin/python benchmarks/image_stack.py [--uv-cache-empty]

1. First build of tf-cpu.2-17's stack into a fresh VTRAIN_CACHE_DIR: seconds, MB downloaded (as the installer
   said; 0 when uv's cache already holds the wheels: --uv-cache-empty points UV_CACHE_DIR at an empty folder),
   MB on disk.
2. The quickstart (chief + 2 workers, tf-cpu.2-17) rehearsed warm on the stack, then with --runtime host: wall
   seconds of `vtrain local` each (the goal: stack <= 1.1x host).
3. --runtime image's start overhead per replica: the stand-in prebuilt image of tests/trainer/image_helpers.py on
   a local docker-registry, a one-replica job whose trainer exits at once, run with --runtime image and with
   --runtime host: the difference is the container plus the pip install each replica does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
VTRAIN = str(Path(sys.executable).parent / "vtrain")


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def first_build(work: Path, uv_empty: bool) -> None:
    from vtrain.local.stacks import prepare_stack, stack_for

    if uv_empty:
        os.environ["UV_CACHE_DIR"] = str(work / "uv-cache")
    stack = stack_for("us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest")
    assert stack is not None
    said: list[str] = []
    start, cpu = time.perf_counter(), os.times()
    built, lease = prepare_stack(stack, work / "cache", said.append)
    end = os.times()
    lease.release()
    children = (end.children_user - cpu.children_user) + (end.children_system - cpu.children_system)
    from vtrain.local.stacks import _du

    print(f"first build of {stack.label}: {time.perf_counter() - start:.1f} s, {children:.1f} CPU-s (installer and "
          f"warm-up import), {built.downloaded_mb:,.0f} MB downloaded, {_du(built.venv) / 1e6:,.0f} MB on disk")


def warm_rehearsal(work: Path) -> None:
    env = {**os.environ, "VTRAIN_CACHE_DIR": str(work / "cache")}
    job = str(REPO / "configs" / "quickstart.yaml")
    timed([VTRAIN, "local", job, "--plain", "--output-dir", str(work / "warmup")], env)  # the trainer env, built
    timed([VTRAIN, "local", job, "--plain", "--runtime", "host", "--output-dir", str(work / "warmup-h")], env)
    stack = [timed([VTRAIN, "local", job, "--plain", "--output-dir", str(work / f"s{i}")], env) for i in range(2)]
    host = [timed([VTRAIN, "local", job, "--plain", "--runtime", "host", "--output-dir", str(work / f"h{i}")], env)
            for i in range(2)]
    print(f"quickstart warm: stack {min(stack):.1f} s, host {min(host):.1f} s ({min(stack) / min(host):.2f}x), "
          "best of 2")


def image_overhead(work: Path) -> None:
    from tests.helpers import write_job
    from tests.trainer.image_helpers import (
        make_trainer,
        prebuilt_standin_entries,
        push_base,
        start_registry,
        stop_registry,
    )
    from vtrain.trainer.image.registry import RegistryClient

    entries = prebuilt_standin_entries()
    if entries is None:
        print("--runtime image: no /usr/bin/python3.11 to make a stand-in image from; skipped")
        return
    registry = start_registry(work / "registry")
    try:
        push_base(RegistryClient(registry.host), "vertex-ai/training/tf-cpu.2-15.py310", entries, work, tag="latest",
                  env=["PATH=/usr/local/bin:/usr/bin:/bin"])
        make_trainer(work / "t", body="print('started')\n")
        job = write_job(work, """
            name: start
            region: us-central1
            trainer: {package: t, module: trainer.task, image: tf-cpu.2-15}
            cluster: {chief: {machine_type: n1-standard-4}}
            """)
        env = {**os.environ, "VTRAIN_CACHE_DIR": str(work / "cache"),
               "VTRAIN_REGISTRY_MIRRORS": f"us-docker.pkg.dev={registry.host}"}
        timed([VTRAIN, "local", str(job), "--plain", "--runtime", "image"], env)  # pulled and unpacked once
        timed([VTRAIN, "local", str(job), "--plain", "--runtime", "host"], env)
        image = min(timed([VTRAIN, "local", str(job), "--plain", "--runtime", "image"], env) for _ in range(3))
        host = min(timed([VTRAIN, "local", str(job), "--plain", "--runtime", "host"], env) for _ in range(3))
        print(f"--runtime image start overhead per replica: {image - host:.1f} s ({image:.1f} s against host's "
              f"{host:.1f} s, a one-replica job, best of 3, the image already unpacked)")
    finally:
        stop_registry(registry)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uv-cache-empty", action="store_true")
    parser.add_argument("--skip", action="append", default=[], choices=["build", "warm", "image"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vtrain-bench-stack-") as tmp:
        work = Path(tmp)
        os.environ.pop("VTRAIN_RUNTIME", None)
        os.environ["VTRAIN_CACHE_DIR"] = str(work / "cache")
        if "build" not in args.skip:
            first_build(work, args.uv_cache_empty)
        if "warm" not in args.skip:
            warm_rehearsal(work)
        if "image" not in args.skip:
            image_overhead(work)


if __name__ == "__main__":
    main()
