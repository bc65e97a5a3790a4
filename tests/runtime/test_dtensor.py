"""DTensor in replicas (issue 22): the mesh text, DTENSOR_* from the cluster, and real 2-client runs.

The first part needs no TensorFlow. The slow part runs the model-parallel template as 2 processes x 2
logical CPUs on 127.0.0.1 (mesh batch=2,model=2; the run tests/local/test_dtensor_local.py starts through
`vtrain local`) against the same model unsharded in one process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import DTENSOR_ARGS, DTENSOR_HIDDEN, dtensor_fault_free, once
from tests.helpers import dtensor_records as records
from vtrain.errors import RuntimeMismatch
from vtrain.local.ports import free_ports
from vtrain.runtime.decision import Decision, choose_strategy
from vtrain.runtime.dtensor_env import (
    Clients,
    as_mesh,
    check_size,
    clients,
    dtensor_env,
    format_mesh,
    local_devices,
    parse_mesh,
)

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "trainer_templates" / "model-parallel"


# --------------------------------------------------------------------------- the mesh text


@pytest.mark.parametrize(
    ("text", "mesh"),
    [
        ("batch=2,model=4", (("batch", 2), ("model", 4))),
        (" batch = 2 , model=4 ", (("batch", 2), ("model", 4))),
        ("batch=8", (("batch", 8),)),
        ("x=1,y_2=3,_z=1", (("x", 1), ("y_2", 3), ("_z", 1))),
    ],
)
def test_mesh_text_parses_in_order(text: str, mesh: tuple) -> None:
    assert parse_mesh(text) == mesh
    assert parse_mesh(format_mesh(mesh)) == mesh


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("batch", "'batch' is not name=size"),
        ("batch=2,", "'' is not name=size"),
        ("batch=2;model=2", "must be a whole number"),
        ("batch=0", "must be a whole number >= 1, got '0'"),
        ("batch=-1", "got '-1'"),
        ("batch=2.0", "got '2.0'"),
        ("batch=two", "got 'two'"),
        ("2d=2", "'2d' is not a dimension name"),
        ("=2", "'' is not a dimension name"),
        ("batch=2,batch=2", "'batch' appears twice"),
        ('{"batch": 2}', "is not name=size"),
    ],
)
def test_mesh_text_errors_name_the_part(text: str, says: str) -> None:
    with pytest.raises(RuntimeMismatch) as err:
        parse_mesh(text)
    assert says in str(err.value) and "VTRAIN_DTENSOR_MESH=" in str(err.value)


def test_mesh_from_a_mapping_or_pairs() -> None:
    assert as_mesh({"batch": 2, "model": 4}) == (("batch", 2), ("model", 4))
    assert as_mesh([("model", 4), ("batch", 2)]) == (("model", 4), ("batch", 2))
    assert as_mesh("batch=2") == (("batch", 2),)
    for bad in ({}, {"batch": True}, {"batch": "2"}, [("batch",)], {"batch": 0}):
        with pytest.raises(RuntimeMismatch):
            as_mesh(bad)


# --------------------------------------------------------------------------- DTENSOR_* from the cluster


def tf_config(cluster: dict, kind: str, index: int = 0) -> dict[str, str]:
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})}


def cluster_spec(cluster: dict, pool: str, index: int = 0) -> dict[str, str]:
    return {"CLUSTER_SPEC": json.dumps({"cluster": cluster, "environment": "cloud",
                                        "task": {"type": pool, "index": index}})}  # fmt: skip


C, W0, W1 = "cmle-chief:2222", "cmle-w0:2222", "cmle-w1:2222"
THREE = {"chief": [C], "worker": [W0, W1]}
POOLS = {"workerpool0": [C], "workerpool1": [W0, W1]}


@pytest.mark.parametrize(
    ("env", "client", "jobs"),
    [
        ({}, 0, ()),
        (tf_config({"chief": [C]}, "chief"), 0, ()),
        (tf_config(THREE, "chief"), 0, (C, W0, W1)),
        (tf_config(THREE, "worker", 0), 1, (C, W0, W1)),
        (tf_config(THREE, "worker", 1), 2, (C, W0, W1)),
        (tf_config({"master": [C], "worker": [W0]}, "master"), 0, (C, W0)),
        (tf_config({"worker": [W0, W1]}, "worker", 1), 1, (W0, W1)),  # no chief: worker 0 is client 0
        (tf_config({"chief": ["127.0.0.1:5001"], "worker": ["127.0.0.1:5002"]}, "worker"), 1,
         ("127.0.0.1:5001", "127.0.0.1:5002")),
        (tf_config({"chief": ["[::1]:5001"], "worker": ["[::1]:5002"]}, "chief"), 0, ("[::1]:5001", "[::1]:5002")),
        (cluster_spec(POOLS, "workerpool1", 1), 2, (C, W0, W1)),
        (cluster_spec({"workerpool0": [C]}, "workerpool0"), 0, ()),
        (cluster_spec({**POOLS, "workerpool3": ["cmle-eval:2222"]}, "workerpool0"), 0, (C, W0, W1)),  # evaluator
        ({**tf_config(THREE, "worker", 1), **cluster_spec(POOLS, "workerpool0")}, 2, (C, W0, W1)),  # TF_CONFIG wins
    ],
)
def test_clients_follow_chief_then_workers(env: dict[str, str], client: int, jobs: tuple) -> None:
    got = clients(env)
    assert (got.client_id, got.jobs, got.num_clients) == (client, jobs, max(1, len(jobs)))
    if jobs:
        assert dtensor_env(env) == {"DTENSOR_CLIENT_ID": str(client), "DTENSOR_NUM_CLIENTS": str(len(jobs)),
                                    "DTENSOR_JOB_NAME": "worker", "DTENSOR_JOBS": ",".join(jobs)}  # fmt: skip
    else:
        assert dtensor_env(env) == {}  # one client: DTensor's local mode, nothing to set


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (tf_config({**THREE, "ps": ["ps:2222"]}, "chief"), "lists ps tasks"),
        (cluster_spec({**POOLS, "workerpool2": ["ps:2222"]}, "workerpool1"), "CLUSTER_SPEC lists ps tasks"),
        (cluster_spec({**POOLS, "workerpool3": ["e:2222"]}, "workerpool3"), "this task is 'evaluator'"),
        (tf_config(THREE, "worker", 2), "worker-2 is not in its cluster"),
        (tf_config({"chief": ["no-port"], "worker": [W0]}, "chief"), "'no-port' are not host:port"),
        ({"TF_CONFIG": "{oops"}, "TF_CONFIG is not valid JSON"),
        ({"CLUSTER_SPEC": "[1]"}, "CLUSTER_SPEC must be a JSON object"),
    ],
)
def test_clients_refuse_what_a_mesh_cannot_use(env: dict[str, str], says: str) -> None:
    with pytest.raises(RuntimeMismatch) as err:
        clients(env)
    assert says in str(err.value)


def test_set_dtensor_variables_win() -> None:
    mine = {"DTENSOR_CLIENT_ID": "1", "DTENSOR_NUM_CLIENTS": "2", "DTENSOR_JOB_NAME": "w", "DTENSOR_JOBS": "a:1,b:2"}
    assert dtensor_env({**tf_config(THREE, "chief"), **mine}) == {}
    assert dtensor_env({**mine, "TF_CONFIG": "{broken"}) == {}  # all set: the cluster is not even read
    assert dtensor_env({"DTENSOR_JOB_NAME": "mine"}) == {}  # set for a cluster this env does not describe
    partial = dtensor_env({**tf_config(THREE, "worker", 0), "DTENSOR_JOB_NAME": "trainers"})
    assert partial == {"DTENSOR_CLIENT_ID": "1", "DTENSOR_NUM_CLIENTS": "3", "DTENSOR_JOBS": f"{C},{W0},{W1}"}
    with pytest.raises(RuntimeMismatch, match="DTENSOR_NUM_CLIENTS=2 is set but the cluster has 3"):
        dtensor_env({**tf_config(THREE, "chief"), "DTENSOR_NUM_CLIENTS": "2"})


def test_devices_per_client_and_the_size_check() -> None:
    mesh = parse_mesh("batch=2,model=4")
    assert local_devices({}, mesh, 2) == 4 and local_devices({}, mesh, 1) == 8
    assert local_devices({"VTRAIN_LOCAL_DEVICES": "3"}, mesh, 2) == 3
    with pytest.raises(RuntimeMismatch, match="8 devices, which 3 clients cannot split evenly"):
        local_devices({}, mesh, 3)
    with pytest.raises(RuntimeMismatch, match="VTRAIN_LOCAL_DEVICES='x'"):
        local_devices({"VTRAIN_LOCAL_DEVICES": "x"}, mesh, 2)
    check_size(mesh, 2, 4, "GPU")
    with pytest.raises(RuntimeMismatch) as err:
        check_size(mesh, 2, 2, "GPU")
    assert "mesh batch=2,model=4 has 8 devices, but 2 client(s) x 2 GPU device(s) per client = 4" in str(err.value)


def test_single_client_sets_nothing() -> None:
    assert Clients(0, 1, (), "x").env() == {}


def test_the_strategy_decision_knows_dtensor() -> None:
    env = {"VTRAIN_DISTRIBUTION_STRATEGY": "dtensor", **tf_config(THREE, "worker", 1)}
    d = choose_strategy(env, gpus=8, tpu=False)
    assert (d.strategy, d.task_type, d.task_index, d.is_chief, d.num_workers) == ("dtensor", "worker", 1, False, 3)
    assert "runtime.dtensor_mesh()" in d.reason
    with pytest.raises(RuntimeMismatch, match="dtensor but TF_CONFIG lists ps tasks"):
        choose_strategy({**env, **tf_config({**THREE, "ps": ["p:1"]}, "chief")}, gpus=0, tpu=False)
    auto = {**env, "VTRAIN_DISTRIBUTION_STRATEGY": "auto"}
    assert choose_strategy(auto, 0, False).strategy == "multi_worker_mirrored"  # the others are unchanged
    from vtrain.runtime.tfsetup import _build

    with pytest.raises(RuntimeMismatch, match=r"call runtime.dtensor_mesh\(\) instead of runtime.strategy\(\)"):
        _build(Decision("dtensor", "", "chief", 0, True, 1))


def test_dtensor_mesh_without_a_mesh_says_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from vtrain.runtime.dtensor import dtensor_mesh

    monkeypatch.delenv("VTRAIN_DTENSOR_MESH", raising=False)
    with pytest.raises(RuntimeMismatch, match=r"no mesh given and VTRAIN_DTENSOR_MESH is not set"):
        dtensor_mesh()
    with pytest.raises(RuntimeMismatch, match="appears twice"):
        dtensor_mesh("batch=2,batch=2")


# --------------------------------------------------------------------------- real runs (slow)
#
# Each TensorFlow process costs ~8 CPU-s before a step runs, so the runs below are shared. The one-client
# checks (the mesh made once, the layout helpers, one client refused on two clients' checkpoints) are one
# process; the killed job restarts from a copy of the 2-client run's checkpoints instead of training its own
# first part. The 2-client run (the `vtrain local` tests' fault-free run: the same training), the unsharded
# one and the one-client process are each made once for the whole test run (`tests.helpers.once`: under
# pytest-xdist the first worker to ask makes it, the other waits and reads it).

STEPS, HIDDEN = DTENSOR_ARGS, DTENSOR_HIDDEN  # N = 8 steps, global batch 16: saves 3, 6 and the last, 8


def _env(out: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("VTRAIN_", "AIP_", "TF_CONFIG", "CLUSTER_SPEC", "DTENSOR_"))}  # fmt: skip
    return {**keep, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TEMPLATE)]), "PYTHONUNBUFFERED": "1",
            "TF_CPP_MIN_LOG_LEVEL": "2", "AIP_MODEL_DIR": str(out / "model"),
            "AIP_CHECKPOINT_DIR": str(out / "checkpoints"), **extra}  # fmt: skip


def run_template(out: Path, args: list[str], clients_: int, timeout: float = 120) -> list[str]:
    """Run the template as `clients_` processes (chief + workers on 127.0.0.1); their logs."""
    out.mkdir(parents=True, exist_ok=True)
    cluster = {"chief": [], "worker": []}
    for i, port in enumerate(free_ports(clients_) if clients_ > 1 else []):
        cluster["chief" if i == 0 else "worker"].append(f"127.0.0.1:{port}")
    tasks = [("chief", 0)] + [("worker", i) for i in range(clients_ - 1)]
    procs = []
    for kind, index in tasks:
        extra = {"VTRAIN_STATUS_FILE": str(out / f"status-{kind}-{index}.json")}
        if clients_ > 1:
            extra["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})
        procs.append(subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=out, env=_env(out, **extra),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True))  # fmt: skip
    logs = []
    try:
        for p in procs:
            try:
                logs.append(p.communicate(timeout=timeout)[0])
            except subprocess.TimeoutExpired:
                pytest.fail("the DTensor trainer timed out")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.communicate()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]
    return logs


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """The template as a chief and a worker, 2 DTensor clients x 2 logical CPUs (mesh batch=2,model=2): the
    fault-free run tests/local/test_dtensor_local.py makes through `vtrain local` (one run for both files)."""
    out = dtensor_fault_free(tmp_path_factory)
    return out, records(out, 2)


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    args = ["--mesh=batch=1,model=1", *STEPS, "--batch-size=16"]  # the same global batch on one device
    out = once(tmp_path_factory, "dtensor-unsharded", lambda out: run_template(out, args, 1))
    return records(out, 1)[0]


@pytest.mark.slow
def test_tensor_parallel_loss_matches_the_unsharded_model(sharded: tuple[Path, list[dict]], unsharded: dict) -> None:
    """Same global batch of 16 at every step, 8 steps: every step's loss within 1e-4 relative."""
    _, (chief, worker) = sharded
    assert len(chief["losses"]) == len(unsharded["losses"]) == 8
    for mine, theirs in zip(chief["losses"], unsharded["losses"], strict=True):
        assert abs(mine - theirs) <= 1e-4 * abs(theirs), (chief["losses"], unsharded["losses"])
    assert chief["losses"] == worker["losses"] and chief["sha256"] == worker["sha256"]
    assert (chief["client"], worker["client"], chief["mesh"]) == (0, 1, "batch=2,model=2")
    # Each client holds only its pieces: 2 local devices, each half of the block's kernels.
    for record in (chief, worker):
        shapes = record["shard_shapes"]
        assert shapes["w1"] == [[8, HIDDEN // 2]] * 2 and shapes["b1"] == [[HIDDEN // 2]] * 2
        assert shapes["w2"] == [[HIDDEN // 2, 8]] * 2
        assert shapes["w3"] == [[8, 1]] * 2  # the head is replicated


@pytest.mark.slow
def test_weight_bytes_per_device_are_about_half(sharded: tuple[Path, list[dict]], unsharded: dict) -> None:
    _, (chief, worker) = sharded
    full = unsharded["full_bytes"]
    assert full == chief["full_bytes"] == 4 * (8 * HIDDEN + HIDDEN + HIDDEN * 8 + 8 + 8 + 1)
    assert max(unsharded["device_bytes"].values()) == full  # one device holds everything
    for record in (chief, worker):
        assert len(record["device_bytes"]) == 2
        assert max(record["device_bytes"].values()) <= 0.55 * full


@pytest.mark.slow
def test_a_killed_job_resumes_from_the_newest_complete_sharded_checkpoint(
    sharded: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    """The uninterrupted 8-step run saved steps 3, 6 and its last, 8 (off the every-3 grid). Leave step 8 as
    a client killed mid-save would: client 1's file missing, a temporary file beside client 0's. The restart
    resumes from step 6 and ends where the uninterrupted run ended."""
    out = tmp_path / "job"
    steps = out / "checkpoints" / "dtensor"
    shutil.copytree(sharded[0] / "checkpoints", out / "checkpoints")
    assert {"step-6", "step-8"} <= {p.name for p in steps.iterdir()}
    assert sorted(p.name for p in (steps / "step-8").iterdir()) == ["client-0-of-2.npz", "client-1-of-2.npz"]
    (steps / "step-8" / "client-1-of-2.npz").unlink()
    shutil.copy(steps / "step-8" / "client-0-of-2.npz", steps / "step-8" / "client-1-of-2.npz.tmp-999")
    logs = run_template(out, ["--mesh=batch=2,model=2", *STEPS], 2)
    assert all("resumed from step 6" in log for log in logs)
    status = json.loads((out / "status-worker-0.json").read_text())
    assert (status["step"], status["first"]) == (8, 7)
    chief, worker = records(out, 2)
    reference = sharded[1][0]
    assert chief["resumed_from"] == worker["resumed_from"] == 6
    assert chief["losses"] == pytest.approx(reference["losses"][6:], rel=1e-6)
    assert chief["sha256"] == worker["sha256"] == reference["sha256"]
    # The unfinished save was dropped on restore (its leftover temporary file with it), and step 8 saved anew.
    assert sorted(p.name for p in (steps / "step-8").iterdir()) == ["client-0-of-2.npz", "client-1-of-2.npz"]


@pytest.fixture(scope="module")
def one_client(sharded: tuple[Path, list[dict]],
               tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """One process, 4 logical CPUs, mesh batch=2,model=2 from VTRAIN_DTENSOR_MESH: the size check before DTensor
    starts, the same mesh again, another mesh refused; a sharded embedding lookup feeding a column- then
    row-sharded block; then the template as one client on the checkpoints of the 2-client run (it must fail)."""
    code = f"""if True:
        import os, runpy, sys
        import numpy as np
        from vtrain import runtime
        from vtrain.errors import RuntimeMismatch
        os.environ["VTRAIN_LOCAL_DEVICES"] = "1"
        try:
            runtime.dtensor_mesh("batch=2")
        except RuntimeMismatch as err:
            print("size:", err)
        del os.environ["VTRAIN_LOCAL_DEVICES"]
        os.environ["VTRAIN_DTENSOR_MESH"] = "batch=2,model=2"
        mesh = runtime.dtensor_mesh()
        same = runtime.dtensor_mesh("batch=2,model=2") is mesh
        print("mesh:", runtime.dtensor.mesh_dims(mesh), mesh.device_type(), same)
        try:
            runtime.dtensor_mesh("batch=2,model=1")
        except RuntimeMismatch as err:
            print("again:", err)
        from vtrain.runtime import dtensor_layouts as L
        import tensorflow as tf
        from tensorflow.experimental import dtensor
        rng = np.random.default_rng(0)
        table, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((10, 8), (8, 6), (6, 8)))
        ids = np.array([3, 1, 4, 1, 5, 9, 2, 6])
        t = L.variable(table, L.embedding_sharded(mesh))
        k1, k2 = L.variable(w1, L.column_sharded(mesh)), L.variable(w2, L.row_sharded(mesh))
        assert L.client_rows(mesh, 8) == (0, 8)
        x = tf.gather(t, L.pack_batch(ids, mesh, 8))
        y = tf.matmul(tf.nn.relu(tf.matmul(x, k1)), k2)
        want = np.maximum(table[ids] @ w1, 0) @ w2
        print("close", bool(np.allclose(L.gather(y), want, atol=1e-5)))
        print("pieces", [p.shape for p in L.local_shards(t)][0], [p.shape for p in L.local_shards(k1)][0],
              [p.shape for p in L.local_shards(k2)][0])
        print("y layout", dtensor.fetch_layout(y).sharding_specs)
        flat = dtensor.create_mesh([("batch", 4)], device_type="CPU")
        print("no model dim", L.column_sharded(flat).sharding_specs, L.batch_sharded(flat, 2).sharding_specs)
        sys.argv = ["trainer.task", "--mesh=batch=2,model=2", *{STEPS!r}]
        runpy.run_module("trainer.task", run_name="__main__", alter_sys=True)
    """

    def make(out: Path) -> None:
        shutil.copytree(sharded[0] / "checkpoints", out / "checkpoints")  # step 8, written by 2 clients
        done = subprocess.run([sys.executable, "-c", code], cwd=out, env=_env(out), capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        (out / "done.json").write_text(json.dumps([done.returncode, done.stdout, done.stderr]))

    folder = once(tmp_path_factory, "dtensor-one-client", make)
    returncode, stdout, stderr = json.loads((folder / "done.json").read_text())
    return subprocess.CompletedProcess(code, returncode, stdout, stderr)


@pytest.mark.slow
def test_one_client_on_two_clients_checkpoints_is_refused(one_client: subprocess.CompletedProcess[str]) -> None:
    """One replica instead of two on the same checkpoints: refused, not a silent fresh start."""
    assert one_client.returncode == 1, one_client.stderr[-3000:]
    assert "holds step 8 written by 2 DTensor client(s), but this job has 1" in one_client.stderr


@pytest.mark.slow
def test_dtensor_mesh_is_made_once_per_process(one_client: subprocess.CompletedProcess[str], tmp_path: Path) -> None:
    """Real TensorFlow, one process: the size check before DTensor starts, the same mesh again, another
    mesh refused, and a trainer that touched TensorFlow first told what to do."""
    out = one_client.stdout
    assert "size: mesh batch=2 has 2 devices, but 1 client(s) x 1 CPU device(s) per client = 1" in out, out
    assert "mesh: (('batch', 2), ('model', 2)) CPU True" in out, one_client.stderr[-3000:]
    assert "again: dtensor_mesh('batch=2,model=1'): this process already initialised DTensor for mesh " in out
    late = "import tensorflow as tf; tf.constant(1.0) + 1\nfrom vtrain import runtime\nruntime.dtensor_mesh('batch=2')"
    done = subprocess.run([sys.executable, "-c", late], env=_env(tmp_path), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 1 and "call runtime.dtensor_mesh() before any other TensorFlow work" in done.stderr


@pytest.mark.slow
def test_layout_helpers_compute_what_numpy_does(one_client: subprocess.CompletedProcess[str]) -> None:
    """One process, 4 logical CPUs, mesh batch=2,model=2: a sharded embedding lookup feeding a
    column- then row-sharded block gives numpy's answer; pieces have the shapes the layouts say."""
    out = one_client.stdout
    assert "close True" in out, one_client.stderr[-3000:]
    assert "pieces (10, 4) (8, 3) (3, 8)" in out
    assert "no model dim ['unsharded', 'unsharded'] ['batch', 'unsharded']" in out
