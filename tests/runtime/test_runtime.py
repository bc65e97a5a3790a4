"""vtrain.runtime: the strategy decision for every branch, TPU detection, output dirs, real TF builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from vtrain import runtime
from vtrain.errors import VtrainError
from vtrain.runtime import RuntimeMismatch, choose_strategy, tfsetup

ROOT = Path(__file__).resolve().parents[2]
PREFIXES = ("GOOGLE_", "CLOUDSDK_", "VTRAIN_", "AIP_", "TPU_", "KUBE_GOOGLE_CLOUD_TPU")
EXACT = ("TF_CONFIG", "CLUSTER_SPEC", "CLOUD_ML_JOB_ID", "TF_USE_LEGACY_KERAS")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(PREFIXES) or key in EXACT:
            monkeypatch.delenv(key)


def tf_config(cluster: dict, task_type: str, index: int = 0) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}, "environment": "cloud"})


CW = {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]}
PS = {"chief": ["h0:2222"], "worker": ["h1:2222"], "ps": ["h2:2222"]}
MASTER = {"master": ["h0:2222"], "worker": ["h1:2222"]}
WORKERS_ONLY = {"worker": ["h0:2222", "h1:2222"]}

# (id, env, gpus, tpu) -> (strategy, communication, task_type, index, is_chief, num_workers)
AUTO_CASES = [
    ("bare", {}, 0, False, ("default", None, "chief", 0, True, 1)),
    ("one-gpu", {}, 1, False, ("default", None, "chief", 0, True, 1)),
    ("four-gpus", {}, 4, False, ("mirrored", None, "chief", 0, True, 1)),
    ("tpu-vm", {}, 0, True, ("tpu", None, "chief", 0, True, 1)),
    ("tpu-beats-gpus", {}, 8, True, ("tpu", None, "chief", 0, True, 1)),
    (
        "cluster-spec-only",
        {"CLUSTER_SPEC": json.dumps({"task": {"type": "workerpool0", "index": 0}})},
        0,
        False,
        ("default", None, "chief", 0, True, 1),
    ),
    (
        "mwms-chief-cpu",
        {"TF_CONFIG": tf_config(CW, "chief")},
        0,
        False,
        ("multi_worker_mirrored", "RING", "chief", 0, True, 3),
    ),
    (
        "mwms-worker-gpu",
        {"TF_CONFIG": tf_config(CW, "worker", 1)},
        2,
        False,
        ("multi_worker_mirrored", "NCCL", "worker", 1, False, 3),
    ),
    (
        "master-is-chief",
        {"TF_CONFIG": tf_config(MASTER, "master")},
        0,
        False,
        ("multi_worker_mirrored", "RING", "chief", 0, True, 2),
    ),
    (
        "worker0-is-chief",
        {"TF_CONFIG": tf_config(WORKERS_ONLY, "worker", 0)},
        0,
        False,
        ("multi_worker_mirrored", "RING", "worker", 0, True, 2),
    ),
    (
        "worker1-not-chief",
        {"TF_CONFIG": tf_config(WORKERS_ONLY, "worker", 1)},
        0,
        False,
        ("multi_worker_mirrored", "RING", "worker", 1, False, 2),
    ),
    (
        "ps-chief",
        {"TF_CONFIG": tf_config(PS, "chief")},
        0,
        False,
        ("parameter_server", None, "chief", 0, True, 2),
    ),
    ("ps-task", {"TF_CONFIG": tf_config(PS, "ps")}, 0, False, ("parameter_server", None, "ps", 0, False, 2)),
    (
        "ps-beats-gpus",
        {"TF_CONFIG": tf_config(PS, "worker")},
        4,
        False,
        ("parameter_server", None, "worker", 0, False, 2),
    ),
    (
        "evaluator",
        {"TF_CONFIG": tf_config(CW, "evaluator")},
        1,
        False,
        ("default", None, "evaluator", 0, False, 3),
    ),
    (
        "single-chief-tf-config",
        {"TF_CONFIG": tf_config({"chief": ["h0:1"]}, "chief")},
        2,
        False,
        ("mirrored", None, "chief", 0, True, 1),
    ),
]


@pytest.mark.parametrize("env,gpus,tpu,expected", [c[1:] for c in AUTO_CASES], ids=[c[0] for c in AUTO_CASES])
def test_auto_decision(env: dict, gpus: int, tpu: bool, expected: tuple) -> None:
    d = choose_strategy(env, gpus, tpu)
    assert (d.strategy, d.communication, d.task_type, d.task_index, d.is_chief, d.num_workers) == expected
    assert d.reason


EXPLICIT_OK = [
    ("one_device", {}, 2, False, "one_device"),
    ("mirrored", {}, 0, False, "mirrored"),
    ("multi_worker_mirrored", {}, 0, False, "multi_worker_mirrored"),  # one worker, no TF_CONFIG
    ("multi-worker-mirrored", {"TF_CONFIG": tf_config(CW, "chief")}, 0, False, "multi_worker_mirrored"),
    ("MIRRORED", {}, 2, True, "mirrored"),  # explicit beats the TPU auto would pick
    ("parameter_server", {"TF_CONFIG": tf_config(PS, "chief")}, 0, False, "parameter_server"),
    ("tpu", {}, 0, True, "tpu"),
    ("horovod", {"TF_CONFIG": tf_config(CW, "worker")}, 0, False, "horovod"),
    ("horovod", {}, 0, False, "horovod"),
    ("auto", {}, 0, False, "default"),
    ("", {}, 0, False, "default"),
]


@pytest.mark.parametrize("asked,env,gpus,tpu,strategy", EXPLICIT_OK, ids=[c[0] or "empty" for c in EXPLICIT_OK])
def test_explicit_strategy_wins(asked: str, env: dict, gpus: int, tpu: bool, strategy: str) -> None:
    d = choose_strategy({**env, "VTRAIN_DISTRIBUTION_STRATEGY": asked}, gpus, tpu)
    assert d.strategy == strategy


EXPLICIT_BAD = [
    ("one_device", {"TF_CONFIG": tf_config(CW, "worker")}, False, "each replica would train its own copy"),
    ("mirrored", {"TF_CONFIG": tf_config(CW, "chief")}, False, "use multi_worker_mirrored"),
    ("parameter_server", {"TF_CONFIG": tf_config(CW, "chief")}, False, "lists no ps tasks"),
    ("parameter_server", {}, False, "lists no ps tasks"),
    ("multi_worker_mirrored", {"TF_CONFIG": tf_config(PS, "chief")}, False, "only parameter_server uses"),
    ("tpu", {}, False, "no TPU is visible"),
    ("hogwild", {}, False, "is not one of: auto, one_device"),
    ("horovod", {"TF_CONFIG": tf_config(PS, "chief")}, False, "only parameter_server uses"),
]


@pytest.mark.parametrize("asked,env,tpu,message", EXPLICIT_BAD, ids=[f"{c[0]}-{i}" for i, c in enumerate(EXPLICIT_BAD)])
def test_explicit_mismatch_is_a_clear_error(asked: str, env: dict, tpu: bool, message: str) -> None:
    with pytest.raises(RuntimeMismatch, match=message) as err:
        choose_strategy({**env, "VTRAIN_DISTRIBUTION_STRATEGY": asked}, 0, tpu)
    assert isinstance(err.value, VtrainError)


@pytest.mark.parametrize("raw,expected", [("", 300.0), ("45", 45.0), ("2.5", 2.5), ("0", None)])
def test_collective_timeout(raw: str, expected: float | None) -> None:
    env = {"TF_CONFIG": tf_config(CW, "chief"), "VTRAIN_COLLECTIVE_TIMEOUT": raw}
    assert choose_strategy(env, 0, False).collective_timeout == expected


@pytest.mark.parametrize(
    "env,message",
    [
        ({"VTRAIN_COLLECTIVE_TIMEOUT": "soon"}, "not a number"),
        ({"VTRAIN_COLLECTIVE_TIMEOUT": "-1"}, "must be >= 0"),
        ({"TF_CONFIG": "{cluster"}, "not valid JSON"),
        ({"TF_CONFIG": "[1, 2]"}, "JSON object"),
    ],
)
def test_bad_environment(env: dict, message: str) -> None:
    env = {"TF_CONFIG": tf_config(CW, "chief"), **env}
    with pytest.raises(RuntimeMismatch, match=message):
        choose_strategy(env, 0, False)


# --------------------------------------------------------------------------- TPU detection


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


@pytest.mark.parametrize(
    "files,env,expected",
    [
        ([], {}, None),
        ([], {"TPU_CONFIG": json.dumps({"tpu_node_name": "n", "project": "p", "zone": "z"})}, "node"),
        ([], {"TPU_NAME": "my-tpu"}, "node"),
        ([], {"KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS": "grpc://10.0.0.2:8470"}, "node"),
        (["lib/libtpu.so", "dev/accel0"], {}, "local"),  # TPU VM v2-v4
        (["lib/libtpu.so", "dev/vfio/0"], {}, "local"),  # TPU VM v5e and later
        (["lib/libtpu.so"], {"TPU_ACCELERATOR_TYPE": "v5litepod-8"}, "local"),
        (["lib/libtpu.so"], {}, None),  # a library without a chip is not a TPU
        (["dev/accel0"], {}, None),
        (["dev/vfio/vfio"], {}, None),  # the vfio control node alone is no TPU
    ],
)
def test_detect_tpu(tmp_path: Path, files: list[str], env: dict, expected: str | None) -> None:
    for name in files:
        touch(tmp_path / name)
    assert runtime.detect_tpu(env, root=str(tmp_path)) == expected


def test_detect_tpu_library_path(tmp_path: Path) -> None:
    touch(tmp_path / "opt/libtpu.so")
    touch(tmp_path / "dev/accel0")
    env = {"TPU_LIBRARY_PATH": str(tmp_path / "opt/libtpu.so")}
    assert runtime.detect_tpu(env, root=str(tmp_path)) == "local"


# --------------------------------------------------------------------------- directories and roles


def test_local_fallback_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert runtime.model_dir() == str(tmp_path / "vtrain-out" / "model")
    assert runtime.checkpoint_dir() == str(tmp_path / "vtrain-out" / "checkpoints")
    assert runtime.tensorboard_dir() == str(tmp_path / "vtrain-out" / "logs")
    assert runtime.is_chief()
    assert runtime.write_dir() == runtime.model_dir()


def test_aip_dirs_and_worker_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIP_MODEL_DIR", "gs://b/out/model/")
    monkeypatch.setenv("AIP_CHECKPOINT_DIR", "gs://b/out/checkpoints/")
    monkeypatch.setenv("AIP_TENSORBOARD_LOG_DIR", "gs://b/out/logs/")
    monkeypatch.setenv("TF_CONFIG", tf_config(CW, "worker", 1))
    assert runtime.model_dir() == "gs://b/out/model/"
    assert runtime.checkpoint_dir() == "gs://b/out/checkpoints/"
    assert runtime.tensorboard_dir() == "gs://b/out/logs/"
    assert not runtime.is_chief()
    assert runtime.scratch_dir() == "gs://b/out/workertemp/worker-1"
    assert runtime.write_dir() == "gs://b/out/workertemp/worker-1"
    assert runtime.write_dir("gs://b/out/checkpoints/ckpt") == "gs://b/out/checkpoints/workertemp/worker-1"
    monkeypatch.setenv("TF_CONFIG", tf_config(MASTER, "master"))
    assert runtime.is_chief() and runtime.write_dir() == "gs://b/out/model/"


def test_weights_checksum() -> None:
    np = pytest.importorskip("numpy")
    a = [np.ones((2, 3), np.float32), np.zeros(4, np.float32)]
    same = [np.ones((2, 3), np.float32), np.zeros(4, np.float32)]
    reshaped = [np.ones((3, 2), np.float32), np.zeros(4, np.float32)]
    nudged = [np.ones((2, 3), np.float32), np.full(4, 1e-7, np.float32)]
    assert runtime.weights_checksum(a) == runtime.weights_checksum(same)
    assert len({runtime.weights_checksum(w) for w in (a, reshaped, nudged)}) == 3


def keras_like(name: str, version: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__version__ = version  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize(
    "module,env,fails",
    [
        (keras_like("keras", "3.15.1"), {"TF_CONFIG": tf_config(CW, "chief")}, True),
        (keras_like("keras", "3.15.1"), {"TF_CONFIG": tf_config(PS, "chief")}, True),
        (keras_like("keras", "2.15.0"), {"TF_CONFIG": tf_config(CW, "chief")}, False),
        (keras_like("tf_keras", "2.21.0"), {"TF_CONFIG": tf_config(CW, "chief")}, False),
        (keras_like("keras", "3.15.1"), {}, False),
    ],
)
def test_keras3_multi_worker_is_refused(module: types.ModuleType, env: dict, fails: bool) -> None:
    d = choose_strategy(env, 0, False)
    if fails:
        with pytest.raises(RuntimeMismatch, match="keras-team/keras#20585"):
            tfsetup._check_keras_fits(module, d)
    else:
        tfsetup._check_keras_fits(module, d)


def test_master_rewritten_as_chief(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CONFIG", tf_config(MASTER, "master"))
    tfsetup._normalise_tf_config()
    data = json.loads(os.environ["TF_CONFIG"])
    assert data["cluster"] == {"chief": ["h0:2222"], "worker": ["h1:2222"]}
    assert data["task"] == {"type": "chief", "index": 0}


# --------------------------------------------------------------------------- real processes


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith(PREFIXES) and k not in EXACT}
    full = {**base, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_import_does_not_load_tensorflow() -> None:
    out = run_python("import sys, vtrain, vtrain.runtime; print('tensorflow' in sys.modules)")
    assert out.strip() == "False"


@pytest.mark.slow
def test_real_strategies_on_cpu() -> None:
    """Each CPU-reachable branch builds the TF class it promises (MWMS with one worker, no peer)."""
    code = """
import json
from vtrain import runtime
from vtrain.runtime import tfsetup
for asked in ("auto", "one_device", "mirrored", "horovod"):
    s = tfsetup._build(runtime.choose_strategy({"VTRAIN_DISTRIBUTION_STRATEGY": asked}, 0, False))
    print(asked, type(s).__name__, s.num_replicas_in_sync)
s = runtime.strategy()  # VTRAIN_DISTRIBUTION_STRATEGY from the environment: multi_worker_mirrored
import tensorflow as tf
print("env", isinstance(s, tf.distribute.MultiWorkerMirroredStrategy), json.dumps(runtime.info().to_dict()))
import sys
sys.modules["tf_keras"] = None  # as on an image without tf-keras: import fails
try:
    runtime.keras()
except runtime.RuntimeMismatch as err:
    print("missing", str(err).replace(" ", "_"))
del sys.modules["tf_keras"]
print("keras", runtime.keras().__name__)
"""
    env = {"VTRAIN_DISTRIBUTION_STRATEGY": "multi_worker_mirrored", "CLOUD_ML_JOB_ID": "123"}
    lines = dict(line.split(" ", 1) for line in run_python(code, env).splitlines() if " " in line)
    assert lines["auto"] == "_DefaultDistributionStrategy 1"
    assert lines["one_device"] == "OneDeviceStrategy 1"
    assert lines["mirrored"] == "MirroredStrategy 1"
    assert lines["horovod"] == "_DefaultDistributionStrategy 1"  # each rank alone; vtrain.horovod reduces
    name, info = lines["env"].split(" ", 1)
    assert name == "True"  # tf.distribute.MultiWorkerMirroredStrategy
    assert json.loads(info) == {
        "task_type": "chief",
        "task_index": 0,
        "is_chief": True,
        "num_workers": 1,
        "num_replicas_in_sync": 1,
        "strategy": "multi_worker_mirrored",
        "reason": "asked for; one worker (no TF_CONFIG)",
        "job_id": "123",
        "restarts": 0,  # no VTRAIN_RESTART_COUNT, no AIP_CHECKPOINT_DIR for a ledger
        "job_attempt": 1,
        "trial_id": None,
    }
    pytest.importorskip("tf_keras")
    assert lines["keras"] == "tf_keras"
    assert "keras-team/keras#20585" in lines["missing"] and "add_`tf-keras`" in lines["missing"]
