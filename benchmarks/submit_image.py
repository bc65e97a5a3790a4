"""`vtrain submit` of a `trainer.build` job, end to end. Run by hand (not a test; needs docker-registry):

    PYTHONPATH=. python benchmarks/submit_image.py [--requirement SPEC | --offline]

A fresh docker-registry on 127.0.0.1 holds a runnable python3.11 base (this machine's interpreter, its
libraries and the stdlib it needs); the in-repo Vertex emulator takes the creates. The job file is
the keras template with ``trainer.build`` (requirement tf-keras==2.17.0 from the package index with
``dependencies: false``, or a local wheel with --offline). Reported for each `submit_job`: wall time
(validate, build, push, create) and the bytes each layer sent, for a cold submit (empty layer cache,
empty registry repository), the same files again, and a one-line change to the trainer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.trainer.image_helpers import make_wheel, push_base, python_rootfs_entries, start_registry, stop_registry  # noqa: E402
from vtrain.cloud.submit import submit_job  # noqa: E402
from vtrain.cloud.target import Where  # noqa: E402
from vtrain.emulator import Emulator, RunResult  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirement", default="tf-keras==2.17.0", help="a requirement from the package index")
    parser.add_argument("--offline", action="store_true", help="a local wheel instead (no package index)")
    opts = parser.parse_args()
    if shutil.which("docker-registry") is None:
        sys.exit("docker-registry is not installed: apt-get install docker-registry")
    entries = python_rootfs_entries()
    if entries is None:
        sys.exit("no /usr/bin/python3.11 to make a base image from")
    with tempfile.TemporaryDirectory(prefix="vtrain-bench-") as tmp_text:
        tmp = Path(tmp_text)
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")  # a cold layer cache
        shutil.copytree(REPO / "trainer_templates" / "keras", tmp / "trainer")
        if opts.offline:
            wheels = make_wheel(tmp / "wheels").parent
            (tmp / "requirements.txt").write_text(f"--no-index\n--find-links {wheels}\ntinyreq==1.0\n")
        else:
            (tmp / "requirements.txt").write_text(f"{opts.requirement}\n")
        registry = start_registry(tmp / "registry")
        try:
            push_base(registry.client(), "base/python", entries, tmp,
                      env=["PATH=/usr/bin:/bin", "PYTHON_VERSION=3.11"])
            job = tmp / "job.yaml"
            job.write_text(f"""name: bench-build
region: us-central1
trainer:
  package: trainer
  module: trainer.task
  image: {registry.host}/base/python:base
  build:
    repository: {registry.host}/team/keras
    requirements: requirements.txt
    dependencies: false
cluster:
  chief: {{machine_type: n1-standard-4}}
  workers: {{replicas: 2}}
""")
            task = tmp / "trainer" / "trainer" / "task.py"
            with Emulator(runner=lambda job, ctx: RunResult(), pending_seconds=0.05) as emu:
                where = Where(project="bench-project", api_endpoint=emu.url, env={}, gcloud=lambda prop: None)
                runs = [("cold submit", None), ("same files again", None),
                        ("one-line change", lambda: task.write_text(task.read_text() + "\n# one more line\n"))]
                for label, change in runs:
                    if change is not None:
                        change()
                    start = time.perf_counter()
                    result = submit_job(job, where=where)
                    seconds = time.perf_counter() - start
                    [pushed] = result.images
                    parts = ", ".join(f"{b['role']} {b['action']} {int(b['size']):,} B" for b in pushed.blobs)
                    print(f"{label}: {seconds:.2f} s, sent {pushed.sent:,} B; {parts}")
                    print(f"  job {result.job.name} runs {pushed.image}")
        finally:
            stop_registry(registry)


if __name__ == "__main__":
    main()
