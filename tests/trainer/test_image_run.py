"""Run the pushed image: skopeo copies it to an OCI layout, umoci unpacks it, and the image's own
entry point runs in a chroot of its rootfs with the image's environment: `python3.11 -m trainer.task`
imports the trainer, vtrain's runtime and a requirement from their layers. The base is this
machine's python3.11 with the libraries ldd lists and the stdlib modules a start needs (~12 MB)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.trainer.image_helpers import (
    Registry,
    make_trainer,
    make_wheel,
    needs_registry,
    push_base,
    python_rootfs_entries,
    unpack_bundle,
)
from vtrain.trainer.image.build import build_and_push
from vtrain.trainer.image.config import ImageSpec

TASK = """\
import sys

import tinyreq
from vtrain import runtime

print("trainer ran", tinyreq.VALUE, runtime.__name__, sys.argv[1:], sys.version_info[:2])
"""


def _missing() -> str | None:
    for tool in ("skopeo", "umoci", "chroot"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install skopeo umoci; .ci/run does)"
    if os.geteuid() != 0:
        return "umoci unpack and chroot need root"
    return None


@pytest.mark.slow
@needs_registry
def test_the_image_runs_its_trainer_with_the_images_python(registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    if (why := _missing()) is not None:
        pytest.skip(why)
    entries = python_rootfs_entries()
    if entries is None:
        pytest.skip("no /usr/bin/python3.11 (and ldd) to make a runnable base image from")
    push_base(registry.client(), "base/python", entries, tmp_path,
              env=["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHON_VERSION=3.11"])
    root = make_trainer(tmp_path / "t", body=TASK)
    spec = ImageSpec(base=f"{registry.host}/base/python:base", repository=f"{registry.host}/team/trainer",
                     module="trainer.task", args=("--epochs", "1"), requirements=("tinyreq==1.0",),
                     index_args=("--no-index", "--find-links", str(make_wheel(tmp_path / "wheels").parent)),
                     python="python3.11")
    pushed = build_and_push(spec, root, cache=tmp_path / "cache")
    tag = pushed.image.split("@")[0].rsplit(":", 1)[1]
    layout, bundle = tmp_path / "layout", tmp_path / "bundle"
    subprocess.run(["skopeo", "copy", "--src-tls-verify=false", f"docker://{pushed.image.split('@')[0]}",
                    f"oci:{layout}:{tag}"], check=True, capture_output=True, timeout=120)
    rootfs = unpack_bundle(layout, tag, bundle, timeout=120)
    assert (rootfs / "opt/vtrain/trainer/trainer/task.py").is_file()
    assert (rootfs / "opt/vtrain/deps/lib/python3.11/site-packages/tinyreq.py").is_file()
    process = json.loads((bundle / "config.json").read_text())["process"]  # umoci's view of the image config
    env = dict(item.split("=", 1) for item in process["env"])
    assert process["args"] == ["python3.11", "-m", "trainer.task", "--epochs", "1"]
    done = subprocess.run(process["args"], env=env, capture_output=True, text=True, timeout=60, check=False,
                          preexec_fn=lambda: (os.chroot(rootfs), os.chdir(process["cwd"])))  # noqa: PLW1509
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "trainer ran 1.0 vtrain.runtime ['--epochs', '1'] (3, 11)"
