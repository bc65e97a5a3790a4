"""Small helpers for tests that write job files, and the types of the shared fixtures."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vtrain.cloud.vertex.retry import RetryPolicy

if TYPE_CHECKING:
    from collections.abc import Callable

    import pytest

    from tests.trainer.image_helpers import Registry
    from vtrain.emulator import Emulator


#: The retry policy of tests that retry (the `fast_retries` fixture sets it as submit's default).
FAST_RETRY = RetryPolicy(attempts=4, initial=0.01, maximum=0.02)


def planned(config: Any) -> tuple[Any, Any]:
    """(config, its artifacts planned from its files): the two first arguments of the pure request builders,
    `build_request(*planned(config))`, as a command passes them."""
    from vtrain.jobfile.artifacts import plan_artifacts

    return config, plan_artifacts(config)


def write_job(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def assert_equals_real_proto(body: dict) -> None:
    """The body parses strictly into CustomJob and MessageToDict gives it back unchanged.

    Key order is compared too, except inside map fields (labels), whose iteration order
    protobuf does not define.
    """
    import json

    from google.cloud.aiplatform_v1 import CustomJob
    from google.protobuf import json_format

    job = CustomJob()
    json_format.ParseDict(body, job._pb)  # strict: unknown fields raise
    back = json_format.MessageToDict(job._pb)
    assert back == body
    labels = back.pop("labels", None), body.get("labels")
    assert json.dumps(back, indent=2) == json.dumps({k: v for k, v in body.items() if k != "labels"}, indent=2)
    assert labels[0] == labels[1]


class MakeEmulator(Protocol):
    """The `make_emulator` fixture (tests/conftest.py)."""

    def __call__(self, runner: Any = None, *, point_at: str | None = None, **options: Any) -> Emulator: ...


class MakeRegistry(Protocol):
    """The `make_registry` fixture (tests/conftest.py)."""

    def __call__(self, name: str = "registry", *, auth: bool = False,
                 token: tuple[str, Path] | None = None) -> Registry: ...


@dataclass(frozen=True)
class QuickstartRun:
    """The quickstart page's ```bash blocks, run once in `folder` (laid out as a checkout): the `quickstart_run`
    fixture. The job's run is `folder/vtrain-out/quickstart/vtrain-local/latest`."""

    folder: Path
    script: str
    returncode: int
    stdout: str
    stderr: str

    @property
    def output_dir(self) -> Path:
        return self.folder / "vtrain-out" / "quickstart"

    @property
    def run_dir(self) -> Path:
        return self.output_dir / "vtrain-local" / "latest"

    def assert_succeeded(self) -> None:
        assert self.returncode == 0, (f"{self.script}\n--- stdout\n{self.stdout[-3000:]}\n"
                                      f"--- stderr\n{self.stderr[-3000:]}")


def run_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of the whole test run, which pytest-xdist workers share."""
    shared = tmp_path_factory.getbasetemp()
    return shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared  # workers' basetemps are in it


def run_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The environment cache of `vtrain local` and of the emulator's `--run-jobs` runner for the whole test
    run, shared by the pytest-xdist workers (vtrain's own locks make concurrent runs on one cache safe): each
    trainer is installed once (~10 CPU-s), by the first test that runs it."""
    cache = run_temp(tmp_path_factory) / "vtrain-cache"
    cache.mkdir(exist_ok=True)
    return cache


def assert_cache_accounted(cache: Path, *, clear: bool = True) -> dict[str, Any]:
    """What vtrain wrote under `cache` is all in the folders `vtrain cache info` lists (issue 46, class 1): no
    other entry, `info`'s total is every byte there, and `clear` (when asked) leaves the cache empty, freeing
    every byte. Returns `info`'s answer, for the caller to look into."""
    from vtrain.local import cacheadmin

    entries = sorted(p.name for p in cache.iterdir())
    assert set(entries) <= set(cacheadmin.PARTS), f"not a folder `vtrain cache` knows: {entries}"
    on_disk = 0
    for root, dirs, files in os.walk(cache):
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(root, d)))]:
            on_disk += os.lstat(os.path.join(root, name)).st_size
    info = cacheadmin.info(cache)
    assert (info["size"], info["other"]) == (on_disk, [])
    assert {name for name, part in info["folders"].items() if part["exists"]} == set(entries)
    if clear:
        done = cacheadmin.clear(cache)
        assert (done["kept"], sorted(p.name for p in cache.iterdir())) == ([], [])
        assert done["freed"] == on_disk
    return info


def once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """The folder `name` that `make` fills, made once for the whole test run: pytest-xdist workers share it
    through a lock in the run's common temporary folder (`quickstart_run`, the DTensor runs). Tests only read it."""
    shared = run_temp(tmp_path_factory)
    folder, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # what a worker that failed left half done
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


# --------------------------------------------------------------------------- a real 2-client DTensor run

MODEL_PARALLEL = Path(__file__).resolve().parents[1] / "trainer_templates" / "model-parallel"
DTENSOR_HIDDEN = 64
#: 8 steps of the model-parallel template, a global batch of 16 over mesh batch=2,model=2, a report every 2
#: (an epoch) and a sharded checkpoint every 3: steps 3, 6 and the last, 8, which is off that grid.
DTENSOR_ARGS = ["--epochs=4", "--steps-per-epoch=2", "--checkpoint-every=3", "--batch-size=8",
                f"--hidden={DTENSOR_HIDDEN}"]  # fmt: skip


def model_parallel_job(tmp_path: Path, mesh: str, workers: int, args: str = "--epochs=1", extra: str = "",
                       evaluator: str = "evaluator: {}") -> Path:  # fmt: skip
    """A job file of the model-parallel template: DTensor over a chief and `workers` workers."""
    return write_job(tmp_path, f"""
        name: mp
        trainer:
          package: {MODEL_PARALLEL}
          module: trainer.task
          args: [{args}]
        distribution_strategy: dtensor
        dtensor: {{mesh: {mesh}}}
        cluster:
          chief: {{machine_type: n1-standard-4}}
          workers: {{replicas: {workers}}}
          {evaluator}
        {extra}
    """)


def dtensor_local_run(folder: Path, cache: Path, fault: str | None = None,
                      extra: str = "") -> tuple[Any, str, list[dict[str, Any]]]:  # fmt: skip
    """The template with DTENSOR_ARGS as a chief and a worker (2 DTensor clients x 2 logical CPUs) through
    `vtrain local`, outputs in `folder`/out: (the job, its log, the chief's and the worker's weights.json)."""
    from vtrain.handle import SUCCEEDED
    from vtrain.local.faults import parse_fault
    from vtrain.local.runner import run_local

    out = io.StringIO()
    path = model_parallel_job(folder, "{batch: 2, model: 2}", 1, ", ".join(DTENSOR_ARGS), extra, evaluator="")
    job = run_local(path, output_dir=folder / "out", cache_dir=cache, out=out,
                    faults=[parse_fault(fault)] if fault else ())  # fmt: skip
    assert job.wait(600) == SUCCEEDED, out.getvalue()[-4000:]
    return job, out.getvalue(), dtensor_records(folder / "out")


def dtensor_records(out: Path, clients: int = 2) -> list[dict[str, Any]]:
    """weights.json of each client of a run with outputs in `out`: the chief's, then each worker's."""
    paths = [out / "model" / "weights.json"] + [out / "workertemp" / f"worker-{i}" / "weights.json"
                                                 for i in range(clients - 1)]  # fmt: skip
    return [json.loads(p.read_text()) for p in paths]


def dtensor_fault_free(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The outputs (model/, workertemp/, checkpoints/) of one fault-free `dtensor_local_run`, made once for the
    whole test run: the `vtrain local` DTensor tests and the runtime's DTensor tests read the same run."""
    cache = run_cache(tmp_path_factory)
    return once(tmp_path_factory, "dtensor-fault-free", lambda folder: dtensor_local_run(folder, cache)) / "out"
