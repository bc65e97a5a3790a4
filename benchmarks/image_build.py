"""Trainer image build + push vs today's sdists. Run by hand (not a test; needs docker-registry):

    PYTHONPATH=. python benchmarks/image_build.py [--requirement SPEC]

On a fresh docker-registry on 127.0.0.1, with the keras template as the trainer and a runnable
python3.11 base (this machine's interpreter, its libraries and the stdlib it needs, ~12 MB), it
reports time and bytes sent for: the trainer and runtime sdists as `vtrain package` builds them
today; a cold image build + push (empty layer cache); the same inputs again; a one-line change to
the trainer. The requirement is a local wheel (offline) unless --requirement names one from the
package index (e.g. absl-py==2.1.0), which makes the cold build fetch it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.trainer.image_helpers import (  # noqa: E402
    make_wheel,
    push_base,
    python_rootfs_entries,
    start_registry,
    stop_registry,
)
from vtrain.trainer.image.build import build_and_push  # noqa: E402
from vtrain.trainer.image.config import ImageSpec  # noqa: E402
from vtrain.trainer.packaging import build_sdist  # noqa: E402
from vtrain.trainer.runtime_sdist import build_runtime_sdist  # noqa: E402


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirement", help="a requirement from the package index instead of a local wheel")
    opts = parser.parse_args()
    if shutil.which("docker-registry") is None:
        sys.exit("docker-registry is not installed: apt-get install docker-registry")
    entries = python_rootfs_entries()
    if entries is None:
        sys.exit("no /usr/bin/python3.11 to make a base image from")
    with tempfile.TemporaryDirectory(prefix="vtrain-bench-") as tmp_text:
        tmp = Path(tmp_text)
        trainer = tmp / "trainer"
        shutil.copytree(REPO / "trainer_templates" / "keras", trainer)
        (sdist, sdist_s) = timed(lambda: build_sdist(trainer, tmp / "dist"))
        (runtime, runtime_s) = timed(lambda: build_runtime_sdist(tmp / "dist"))
        print(f"today: trainer sdist {sdist.stat().st_size:,} B in {sdist_s:.2f} s, runtime sdist "
              f"{runtime.stat().st_size:,} B in {runtime_s:.2f} s (then uploaded whole when changed)")
        registry = start_registry(tmp / "registry")
        try:
            base = push_base(registry.client(), "base/python", entries, tmp,
                             env=["PATH=/usr/bin:/bin", "PYTHON_VERSION=3.11"])
            print(f"base: {len(entries)} files, diff_id {base['rootfs']['diff_ids'][0][:19]}…")  # type: ignore[index]
            if opts.requirement:
                reqs, index = (opts.requirement,), ()
            else:
                reqs = ("tinyreq==1.0",)
                index = ("--no-index", "--find-links", str(make_wheel(tmp / "wheels").parent))
            spec = ImageSpec(base=f"{registry.host}/base/python:base", repository=f"{registry.host}/team/trainer",
                             module="trainer.task", requirements=reqs, index_args=index, python="python3.11")
            cache = tmp / "cache"
            task = trainer / "trainer" / "task.py"
            runs = [("cold build + push", None), ("same inputs again", None),
                    ("one-line change", lambda: task.write_text(task.read_text() + "\n# one more line\n"))]
            for label, change in runs:
                if change is not None:
                    change()
                pushed, seconds = timed(lambda: build_and_push(spec, trainer, cache=cache))
                parts = ", ".join(f"{b['role']} {b['action']} {int(b['size']):,} B ({str(b['digest'])[7:19]})"
                                 for b in pushed.blobs)
                print(f"{label}: {seconds:.2f} s, sent {pushed.sent:,} B; {parts}")
                print(f"  {pushed.image}")
        finally:
            stop_registry(registry)


if __name__ == "__main__":
    main()
