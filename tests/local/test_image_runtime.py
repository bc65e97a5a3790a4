"""`vtrain local --runtime image`: a Python package job's replicas in Vertex's own prebuilt image.

The prebuilt image here is a stand-in (tests/trainer/image_helpers.py: this machine's python3.11 with its
standard library, pip and setuptools, and an /etc/os-release of its own) pushed to a real docker-registry on
127.0.0.1 under Vertex's repository path; VTRAIN_REGISTRY_MIRRORS sends vtrain's pull of
us-docker.pkg.dev there, as a registry mirror serves containerd or docker. Each replica runs in a runc
container on it, the trainer installed inside by the image's pip, then `python -m trainer.task`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import write_job
from tests.trainer.image_helpers import Registry, make_trainer, prebuilt_standin_entries, push_base
from vtrain.cli import cli
from vtrain.errors import PackagingError
from vtrain.local.containers import find_runtime
from vtrain.local.prebuilt import cpu_variant
from vtrain.trainer.image.mirrors import mirrors, pull_client

REPOSITORY = "vertex-ai/training/tf-cpu.2-15.py310"
REPORT = """\
import json, os, sys
import trainer
task = json.loads(os.environ["TF_CONFIG"])["task"]
print("REPORT " + json.dumps({"os_release": open("/etc/os-release").read(), "exe": sys.executable,
                              "trainer": trainer.__file__, "task": task, "args": sys.argv[1:]}), flush=True)
"""


def test_mirrors_are_read_from_the_variable_and_a_bad_one_is_one_line() -> None:
    env = {"VTRAIN_REGISTRY_MIRRORS": "us-docker.pkg.dev=127.0.0.1:5000, europe-docker.pkg.dev=http://mirror.example:443/"}
    assert mirrors(env) == {"us-docker.pkg.dev": "127.0.0.1:5000", "europe-docker.pkg.dev": "mirror.example:443"}
    client = pull_client("us-docker.pkg.dev", env=env)
    assert client.registry == "127.0.0.1:5000" and client.mirror_of == "us-docker.pkg.dev"
    assert client.url == "http://127.0.0.1:5000"  # the mirror's own address (loopback: plain http)
    assert pull_client("asia-docker.pkg.dev", env=env).registry == "asia-docker.pkg.dev"
    with pytest.raises(PackagingError, match="VTRAIN_REGISTRY_MIRRORS: 'us-docker.pkg.dev' is not HOST=MIRROR"):
        mirrors({"VTRAIN_REGISTRY_MIRRORS": "us-docker.pkg.dev"})
    assert cpu_variant("us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-15.py310:latest", gpu_here=False) \
        == "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest"
    assert cpu_variant("us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-15.py310:latest", gpu_here=True).count("gpu")


@pytest.fixture
def standin(registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Registry:
    for tool in ("runc", "umoci"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt-get install runc umoci; .ci/run does)")
    runtime, why = find_runtime(tmp_path / "probe-cache")
    if runtime is None:
        pytest.skip(f"no container runs here: {why}")
    entries = prebuilt_standin_entries()
    if entries is None:
        pytest.skip("no /usr/bin/python3.11 (and ldd) to make a stand-in prebuilt image from")
    push_base(registry.client(), REPOSITORY, entries, tmp_path, tag="latest",
              env=["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"])
    monkeypatch.setenv("VTRAIN_REGISTRY_MIRRORS", f"us-docker.pkg.dev={registry.host}")
    return registry


@pytest.mark.slow
def test_runtime_image_runs_each_replica_in_the_prebuilt_image_with_the_trainer_installed_by_its_pip(
        tmp_path: Path, standin: Registry) -> None:
    make_trainer(tmp_path / "t", body=REPORT)
    path = write_job(tmp_path, f"""
        name: in-the-image
        region: us-central1
        base_output_dir: {tmp_path / 'out'}
        trainer:
          package: t
          module: trainer.task
          image: tf-cpu.2-15
          args: [--epochs=1]
        cluster:
          chief: {{machine_type: n1-standard-4}}
          workers: {{replicas: 1}}
        """)
    cache = tmp_path / "cache"
    result = CliRunner().invoke(cli, ["local", str(path), "--plain", "--runtime", "image", "--timeout", "5m"],
                                env={"VTRAIN_CACHE_DIR": str(cache)})
    assert result.exit_code == 0, result.output
    assert "runtime: image: --runtime image: each replica runs in " \
        "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest itself" in result.output
    assert "runc containers" in result.output and "pulling 1 layer(s) of us-docker.pkg.dev/" in result.output
    run = next((tmp_path / "out" / "vtrain-local").iterdir())
    for label, task in (("chief-0", {"type": "chief", "index": 0}), ("worker-0", {"type": "worker", "index": 0})):
        line = next(x for x in (run / f"{label}.log").read_text().splitlines() if x.startswith("REPORT "))
        seen = json.loads(line[len("REPORT "):])
        assert "ID=vtrain-standin" in seen["os_release"]  # the image's file system, not this machine's
        assert seen["exe"] == "/usr/bin/python3"  # the image's interpreter
        assert "/site-packages/trainer/" in seen["trainer"] or "/dist-packages/trainer/" in seen["trainer"], seen
        assert seen["task"] == task and seen["args"] == ["--epochs=1"]
    assert not (Path("/usr/lib/python3/dist-packages/trainer")).exists()  # installed in the container, not here
    assert os.path.isdir(cache / "containers" / "rootfs")
