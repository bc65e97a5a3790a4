"""The one 2-rank Horovod job the tests of this folder read (made once for the whole test run, xdist workers
included): a chief and a worker under `vtrain local`, as a 2-replica job runs, each rank running in one process the
Horovod-written examples (their import line changed, as the guide says), the API check and, last, the project's own
checks of what Horovod's TF2 tests check (trainer/conformance.py), whose last phase ends the ring."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import once, write_job
from vtrain.handle import SUCCEEDED

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "trainers" / "horovod"
ONE_LINE = {"import horovod.tensorflow.keras as hvd": "import vtrain.horovod.keras as hvd",
            "import horovod.tensorflow as hvd": "import vtrain.horovod.tensorflow as hvd"}
#: The scripts written for real Horovod, and so migrated by their import line.
HOROVOD_SCRIPTS = ("keras_mnist.py", "tape_mnist.py", "api_check.py")
#: What the shared job runs in each rank, in this order (conformance last: it ends the ring).
RING_SCRIPTS = "keras_mnist,tape_mnist,api_check,conformance"


def migrate(root: Path) -> Path:
    """The examples under `root`, with the Horovod import line of each Horovod script changed, and nothing else."""
    shutil.copytree(EXAMPLES, root)
    for name in HOROVOD_SCRIPTS:
        path = root / "trainer" / name
        before = path.read_text().splitlines()
        after = [ONE_LINE.get(line, line) for line in before]
        assert sum(a != b for a, b in zip(before, after, strict=True)) == 1, name
        path.write_text("\n".join(after) + "\n")
    return root


def run_job(tmp_path: Path, cache: Path, package: Path, script: str, strategy: str,
            env: dict[str, str] | None = None, restart_policy: str = "vertex",
            runtime: str = "host") -> tuple[Any, str]:
    """A chief and a worker running trainer.harness on `script`; its handle once ended, and what it printed."""
    from vtrain.local.runner import run_local

    env_yaml = "{" + ", ".join(f"{k}: '{v}'" for k, v in (env or {}).items()) + "}"
    job = write_job(tmp_path, f"""
        name: hvd
        trainer:
          package: {package}
          module: trainer.harness
          args: ["{script}"]
          env: {env_yaml}
        distribution_strategy: {strategy}
        cluster:
          chief: {{machine_type: n1-standard-4}}
          workers: {{replicas: 1}}
        scheduling: {{restart_job_on_worker_restart: true}}
    """)
    out = io.StringIO()
    # runtime: this machine's TensorFlow by default, as the suite's other jobs (a session fixture starts before
    # the autouse one that sets VTRAIN_RUNTIME=host); "stack" is tf-cpu.2-17's TensorFlow, the job's image's
    handle = run_local(job, output_dir=tmp_path / "out", cache_dir=cache, out=out, restart_policy=restart_policy,
                       runtime=runtime)
    handle.wait(900)
    return handle, out.getvalue()


def run(tmp_path: Path, cache: Path, package: Path, script: str, strategy: str) -> Path:
    handle, printed = run_job(tmp_path, cache, package, script, strategy)
    assert handle.state == SUCCEEDED, printed[-6000:]
    return tmp_path / "out" / "model"


@pytest.fixture(scope="session")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The examples with their Horovod import lines changed, and nothing else."""
    return migrate(tmp_path_factory.mktemp("hvd") / "examples")


@pytest.fixture(scope="session")
def horovod_run(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> Path:
    """The model folder of the shared Horovod job (RING_SCRIPTS in each of its 2 ranks)."""

    def make(folder: Path) -> None:
        run(folder, cache, migrate(folder / "examples"), RING_SCRIPTS, "horovod")

    return once(tmp_path_factory, "horovod-ring", make) / "out" / "model"


@pytest.fixture(scope="session")
def conformance(horovod_run: Path) -> list[dict[str, Any]]:
    """Each rank's report of the conformance checks, in rank order."""
    return [json.loads((horovod_run / f"conformance-rank{r}.json").read_text()) for r in (0, 1)]
