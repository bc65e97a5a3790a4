"""`vtrain estimate` as the distribution advisor: memory per replica, precision, which parallelism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from vtrain import catalog
from vtrain.cli import cli
from vtrain.errors import EstimateError
from vtrain.estimate import (
    USABLE_FRACTION,
    diloco_bytes_per_learner_per_step,
    diloco_traffic,
    fit,
    memory_need,
    parse_bytes,
    pool_device,
    precision_advice,
)
from vtrain.jobfile.config import PoolConfig

GB = 1e9
IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-{family}.2-{minor}:latest"


def job(name: str, family: str, cluster: str) -> str:
    minor = "15.cp310" if family == "tpu" else "17.py310"
    image = IMAGE.format(family=family, minor=minor)
    return f"name: {name}\ntrainer:\n  container:\n    image_uri: {image}\ncluster:\n" + cluster


JOBS = {
    "cpu1.yaml": job("cpu1", "cpu", "  chief: {machine_type: n1-standard-8}\n"),
    "cpu4.yaml": job("cpu4", "cpu", "  chief: {machine_type: n1-standard-16}\n  workers: {replicas: 3}\n"),
    "bert.yaml": job("bert", "gpu", "  chief: {machine_type: a2-highgpu-8g}\n"
                     "  workers: {replicas: 7, machine_type: a2-highgpu-8g}\n"),  # fmt: skip
    "ultra.yaml": job("ultra", "gpu", "  chief: {machine_type: a2-ultragpu-8g}\n"
                      "  workers: {replicas: 1, machine_type: a2-ultragpu-8g}\n"),  # fmt: skip
    "t4.yaml": job("t4", "gpu", "  chief: {machine_type: n1-standard-16, accelerator: t4, accelerator_count: 2}\n"
                   "  workers: {replicas: 3}\n"),  # fmt: skip
    "v5e.yaml": job("v5e", "tpu", "  chief: {machine_type: ct5lp-hightpu-4t, tpu_topology: 2x2}\n"),
}


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in JOBS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["estimate", *args])


def advise(*args: str) -> dict:
    result = run(*args, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --------------------------------------------------------------------------- the memory model, by hand


@pytest.mark.parametrize(
    ("params", "optimizer", "precision", "per_param", "state_gb"),
    [
        (340_000_000, "adam", "fp32", 16, 5.44),  # 4 weights + 4 gradients + 8 slots
        (340_000_000, "adam", "mixed_bf16", 18, 6.12),  # + 2 for the 16-bit copies
        (340_000_000, "sgd", "fp32", 8, 2.72),
        (340_000_000, "momentum", "mixed_fp16", 14, 4.76),
        (7_000_000_000, "adam", "fp32", 16, 112.0),
        (7_000_000_000, "adafactor", "fp32", 8, 56.0),
        (70_000_000_000, "adam", "fp32", 16, 1120.0),
    ],
)
def test_state_bytes_per_parameter(
    params: int, optimizer: str, precision: str, per_param: int, state_gb: float
) -> None:
    need = memory_need(params, optimizer, precision)
    assert need.bytes_per_param == per_param
    assert need.state == pytest.approx(state_gb * GB)
    assert need.total == need.state  # no activations given


def pool(machine: str, accelerator: str | None = None, count: int = 0, topology: str | None = None) -> PoolConfig:
    return PoolConfig("chief", 1, machine, accelerator, count, topology)


@pytest.mark.parametrize(
    ("p", "kind", "name", "gb", "per_replica"),
    [
        (pool("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8), "gpu", "NVIDIA_TESLA_A100", 40, 8),
        (pool("a2-ultragpu-1g", "NVIDIA_A100_80GB", 1), "gpu", "NVIDIA_A100_80GB", 80, 1),
        (pool("a3-highgpu-8g", "NVIDIA_H100_80GB", 8), "gpu", "NVIDIA_H100_80GB", 80, 8),
        (pool("n1-standard-8", "NVIDIA_TESLA_T4", 2), "gpu", "NVIDIA_TESLA_T4", 16, 2),
        (pool("g2-standard-96", "NVIDIA_L4", 8), "gpu", "NVIDIA_L4", 24, 8),
        (pool("cloud-tpu", "TPU_V3", 8), "tpu", "TPU v3 core", 16 * 2**30 / GB, 8),
        (pool("cloud-tpu", "TPU_V2", 8), "tpu", "TPU v2 core", 8 * 2**30 / GB, 8),
        (pool("ct5lp-hightpu-4t", topology="2x4"), "tpu", "TPU v5e chip", 16, 8),
        (pool("ct6e-standard-4t", topology="2x2"), "tpu", "TPU v6e chip", 32, 4),
        (pool("n1-standard-16"), "cpu", "n1-standard-16 host RAM", 60, 1),
        (pool("n2-highmem-8"), "cpu", "n2-highmem-8 host RAM", 64, 1),
    ],
)
def test_device_memory_from_the_catalog(p: PoolConfig, kind: str, name: str, gb: float, per_replica: int) -> None:
    device = pool_device(p)
    assert (device.kind, device.name, device.per_replica) == (kind, name, per_replica)
    assert device.memory_bytes == pytest.approx(gb * GB)


def test_every_gpu_has_memory_and_every_tpu_generation_has_hbm() -> None:
    assert set(catalog.GPU_MEMORY) == set(catalog.GPU_TYPES)
    assert {m.generation for m in catalog.TPU_VM_MACHINES.values()} | {"v2", "v3"} == set(catalog.TPU_MEMORY)


def test_seven_billion_fp32_adam_does_not_fit_an_a100_80gb_and_shards_over_two() -> None:
    a100 = pool_device(pool("a2-ultragpu-8g", "NVIDIA_A100_80GB", 8))
    verdict = fit(memory_need(7_000_000_000), a100, "chief", "a2-ultragpu-8g")
    assert verdict.verdict == "does not fit"
    assert verdict.headroom == pytest.approx(1 - 112 / 80)
    assert verdict.sharded_devices == 2  # ⌈112 GB / (0.9 × 80 GB)⌉
    assert verdict.sharded_machines == 1
    # Activations stay per device: 30 GB of them leave 42 GB for state shards, so 3 devices.
    with_acts = fit(memory_need(7_000_000_000, activations=30 * GB), a100)
    assert with_acts.sharded_devices == 3
    # Activations alone beyond the device: no number of shards helps.
    assert fit(memory_need(7_000_000_000, activations=75 * GB), a100).sharded_devices is None


def test_fits_tight_and_headroom() -> None:
    t4 = pool_device(pool("n1-standard-8", "NVIDIA_TESLA_T4", 1))
    need = memory_need(340_000_000, activations=6 * GB)  # 11.44 GB of 16
    assert fit(need, t4).verdict == "fits"
    assert fit(need, t4).headroom == pytest.approx(1 - 11.44 / 16)
    tight = memory_need(340_000_000, activations=15.2 * GB - 5.44 * GB)  # 15.2 GB: between 0.9 × 16 and 16
    assert fit(tight, t4).verdict == "tight"
    assert USABLE_FRACTION == 0.9


@pytest.mark.parametrize(
    ("text", "value"),
    [("6GB", 6e9), ("512MiB", 512 * 2**20), ("2.5e9", 2.5e9), ("800k", 8e5), ("1.5 gb", 1.5e9), ("7", 7.0)],
)
def test_parse_bytes(text: str, value: float) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["lots", "", "-1GB", "5XB", "1e30"])
def test_parse_bytes_rejects_with_a_message_about_the_value(text: str) -> None:
    with pytest.raises(EstimateError) as err:
        parse_bytes(text)
    assert "--" not in str(err.value)


def test_memory_inputs_are_checked() -> None:
    with pytest.raises(EstimateError, match="optimizer 'lion'"):
        memory_need(10, "lion")
    with pytest.raises(EstimateError, match="precision 'int8'"):
        memory_need(10, "adam", "int8")
    with pytest.raises(EstimateError, match="activation bytes"):
        memory_need(10, activations=float("nan"))


# --------------------------------------------------------------------------- precision per accelerator


@pytest.mark.parametrize(
    ("p", "recommended", "loss_scaling", "bound", "caution"),
    [
        (pool("n1-standard-8", "NVIDIA_TESLA_T4", 1), "mixed_fp16", True, 8.0, False),
        (pool("n1-standard-8", "NVIDIA_TESLA_V100", 1), "mixed_fp16", True, 8.0, False),
        (pool("n1-standard-8", "NVIDIA_TESLA_P100", 1), "mixed_fp16", True, 2.0, False),
        (pool("n1-standard-8", "NVIDIA_TESLA_P4", 1), "fp32", False, 1.0, False),
        (pool("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1), "mixed_bf16", False, 2.0, False),
        (pool("g2-standard-4", "NVIDIA_L4", 1), "mixed_bf16", False, 2.0, False),
        (pool("a3-highgpu-8g", "NVIDIA_H100_80GB", 8), "mixed_bf16", False, 2.0, False),
        (pool("cloud-tpu", "TPU_V3", 8), "mixed_bf16", False, 1.6, True),
        (pool("ct6e-standard-4t", topology="2x2"), "mixed_bf16", False, 1.6, True),
        (pool("n1-standard-16"), "fp32", False, 1.0, False),
    ],
)
def test_precision_advice_per_accelerator(
    p: PoolConfig, recommended: str, loss_scaling: bool, bound: float, caution: bool
) -> None:
    advice = precision_advice(pool_device(p), 340_000_000, "adam", activations=4 * GB)
    assert (advice.recommended, advice.loss_scaling, advice.speedup_bound) == (recommended, loss_scaling, bound)
    assert (advice.caution is not None) == caution
    if caution:
        assert "8 bits of mantissa" in advice.caution and "fp32" in advice.caution
    assert advice.state_bytes["fp32"] == pytest.approx(5.44 * GB)
    assert advice.state_bytes["mixed_bf16"] == pytest.approx(6.12 * GB)
    assert advice.activation_bytes == {"fp32": 4 * GB, "mixed_bf16": 2 * GB, "mixed_fp16": 2 * GB}


# --------------------------------------------------------------------------- DiLoCo's bytes


def test_diloco_bytes_per_learner_per_step() -> None:
    assert diloco_bytes_per_learner_per_step(1_000_000_000, 100) == 4e7  # 4 GB of fp32 every 100 steps
    assert diloco_bytes_per_learner_per_step(1_000_000_000, 100, bytes_per_value=2) == 2e7
    assert diloco_bytes_per_learner_per_step(10, 1, overhead_bytes=60) == 100
    with pytest.raises(EstimateError, match="inner steps"):
        diloco_bytes_per_learner_per_step(10, 0)
    # 8 learners on 100 Gbps, a 32 Gbps syncer: the syncer moves 8 × 40 MB per step, 80 ms; a learner 3.2 ms.
    t = diloco_traffic(1_000_000_000, 8, 100, 100, 32)
    assert t.syncer_bytes_per_step == 3.2e8
    assert t.comm_seconds_per_step == pytest.approx(0.08)


# --------------------------------------------------------------------------- five (and more) scenarios


def test_small_model_on_one_cpu_machine(jobs: Path) -> None:
    data = advise("cpu1.yaml", "--params", "10M")
    assert data["recommendation"]["kind"] == "single_machine"
    assert data["memory"]["pools"][0]["verdict"] == "fits"
    assert data["precision_advice"][0]["recommended"] == "fp32"


def test_small_model_on_cpu_workers_rings(jobs: Path) -> None:
    data = advise("cpu4.yaml", "--params", "10M", "--step-compute", "0.5s")
    assert data["recommendation"]["kind"] == "ring"
    assert data["recommendation"]["numbers"]["ring_utilisation"] > 0.9


def test_bert_large_on_eight_a100_machines_wants_a_reduction_server(jobs: Path) -> None:
    data = advise("bert.yaml", "--params", "340M")
    rec = data["recommendation"]
    assert rec["kind"] == "reduction_server"
    assert rec["numbers"]["recommended_reducers"] == 25
    assert 1.9 <= rec["numbers"]["speedup"] <= 2.01
    assert "cluster.reduction_server: {replicas: 25}" in rec["options"]
    assert data["memory"]["need"]["state"] == pytest.approx(5.44 * GB)
    assert data["memory"]["pools"][0]["verdict"] == "fits"
    assert data["precision_advice"][0]["recommended"] == "mixed_bf16"


def test_seventy_billion_needs_model_parallelism(jobs: Path) -> None:
    data = advise("ultra.yaml", "--params", "70B")
    rec = data["recommendation"]
    assert rec["kind"] == "model_parallel"
    assert rec["numbers"]["sharded_devices"] == 16  # ⌈1120 GB / 72 GB⌉
    assert rec["numbers"]["sharded_machines"] == 2
    assert rec["numbers"]["cluster_devices"] == 16
    assert any("DTensor" in option for option in rec["options"])
    assert data["memory"]["pools"][0]["verdict"] == "does not fit"


def test_two_regions_want_diloco(jobs: Path) -> None:
    data = advise("bert.yaml", "--params", "340M", "--regions", "2", "--step-compute", "0.4s")
    rec = data["recommendation"]
    assert rec["kind"] == "diloco"
    assert rec["numbers"]["inner_steps"] in (10, 100, 500)
    assert rec["numbers"]["bytes_per_learner_per_step"] == pytest.approx(1.36e9 / rec["numbers"]["inner_steps"])
    assert rec["numbers"]["utilisation"] >= 0.9


def test_network_bound_cluster_wants_diloco(jobs: Path) -> None:
    data = advise("cpu4.yaml", "--params", "1.3B", "--step-compute", "0.5s")
    rec = data["recommendation"]
    assert rec["kind"] == "diloco" and rec["numbers"]["inner_steps"] == 100
    assert rec["numbers"]["utilisation"] >= 0.9
    # With overlap the exchange hides behind the next round's compute (a round lasts the longer of the two)
    comm = rec["numbers"]["comm_seconds_per_step"]
    assert 0 < comm < 0.5 and rec["numbers"]["utilisation_with_overlap"] == 1.0
    assert any("overlap: true" in reason and "100% busy" in reason for reason in rec["reasons"])
    slow = advise("cpu4.yaml", "--params", "1.3B", "--step-compute", "0.5ms")["recommendation"]["numbers"]
    assert slow["utilisation_with_overlap"] == pytest.approx(0.0005 / slow["comm_seconds_per_step"])
    assert slow["utilisation"] < slow["utilisation_with_overlap"] < 1


def test_t4_gets_mixed_fp16_with_loss_scaling(jobs: Path) -> None:
    advice = advise("t4.yaml", "--params", "110M")["precision_advice"]
    assert [(a["device"], a["recommended"], a["keras_policy"], a["loss_scaling"]) for a in advice] == [
        ("NVIDIA_TESLA_T4", "mixed_fp16", "mixed_float16", True)
    ]


def test_tpu_slice_gets_bf16_and_the_caution(jobs: Path) -> None:
    data = advise("v5e.yaml", "--params", "340M")
    assert data["recommendation"]["kind"] == "single_machine"
    assert data["precision_advice"][0]["caution"].startswith("bf16 keeps 8 bits of mantissa")
    text = run("v5e.yaml", "--params", "340M").stdout
    assert "caution: bf16 keeps 8 bits of mantissa" in text and "TPUStrategy" in text


def test_activations_flags(jobs: Path) -> None:
    a = advise("t4.yaml", "--params", "340M", "--activations", "6GB")["memory"]
    b = advise("t4.yaml", "--params", "340M", "--batch-per-replica", "32", "--activation-bytes-per-example",
               "187.5MB")["memory"]  # fmt: skip
    assert a["need"]["activations"] == b["need"]["activations"] == 6e9
    assert a["pools"][0]["verdict"] == "fits" and a["pools"][0]["headroom"] == pytest.approx(1 - 11.44 / 16)
    big = advise("t4.yaml", "--params", "340M", "--activations", "12GB")["memory"]["pools"][0]
    assert big["verdict"] == "does not fit"


def test_json_schema(jobs: Path) -> None:
    data = advise("bert.yaml", "--params", "340M", "--optimizer", "sgd", "--precision", "mixed_bf16")
    assert data["schema_version"] == 2
    for key in ("job", "params", "grad_dtype", "optimizer", "precision", "regions", "cluster", "ring",
                "reduction_server", "at_recommended", "speedup", "recommended_reducers", "low_communication",
                "costs", "verdict", "memory", "precision_advice", "diloco", "dtensor", "recommendation",
                "notes"):  # fmt: skip
        assert key in data, key
    need = data["memory"]["need"]
    assert set(need) >= {"weights", "half_copies", "gradients", "optimizer_slots", "activations", "state", "total"}
    assert need["bytes_per_param"] == 10  # sgd under mixed: 4 + 2 + 4
    pool_keys = {"role", "machine_type", "device", "need_bytes", "usable_bytes", "headroom", "verdict",
                 "sharded_devices", "sharded_machines"}  # fmt: skip
    assert set(data["memory"]["pools"][0]) == pool_keys
    assert data["memory"]["pools"][0]["role"] == "chief+workers"
    assert set(data["recommendation"]) == {"kind", "summary", "reasons", "numbers", "options", "job_file"}
    assert data["dtensor"] is None and data["recommendation"]["job_file"] is None  # not a DTensor job or advice
    assert [row["inner_steps"] for row in data["diloco"]] == [10, 100, 500]


def test_plot_has_both_panels(jobs: Path) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib import image

    result = run("bert.yaml", "--params", "7B", "--plot", "advice.png")
    assert result.exit_code == 0, result.output
    height, width, _ = image.imread(str(jobs / "advice.png")).shape
    assert width > 1.8 * height  # scaling curves and the memory bars side by side


def test_diloco_bytes_follow_the_implementation_when_compression_is_given() -> None:
    from vtrain.diloco.traffic import bytes_per_step

    for codec in ("none", "bf16", "int8", "int4"):
        real = bytes_per_step(340_000_000, 50, codec)["up"]
        assert diloco_bytes_per_learner_per_step(340_000_000, 50, compression=codec) == real
    # int8 moves about a quarter of fp32 (plus its per-block scales).
    ratio = diloco_bytes_per_learner_per_step(10**8, 50, compression="int8") / diloco_bytes_per_learner_per_step(
        10**8, 50, compression="none")
    assert 0.25 < ratio < 0.26


def test_a_diloco_job_is_estimated_over_its_learners_with_its_syncer_apart() -> None:
    from vtrain.diloco.traffic import bytes_per_step

    repo_job = str(Path(__file__).resolve().parents[2] / "configs" / "diloco.yaml")
    data = json.loads(run(repo_job, "--params", "100M", "-o", "json").stdout)
    cluster = data["cluster"]
    assert cluster["workers"] == 6  # 4 A100 + 2 L4 learners; the CPU syncer is not a ring rank
    assert cluster["syncer_machine"] == "n1-standard-8" and cluster["syncer_gbps"] == catalog.nic_gbps("n1-standard-8")
    assert data["diloco_job"] == {"inner_steps": 50, "compression": "int8"}
    mine = next(row for row in data["diloco"] if row["inner_steps"] == 50)
    assert mine["sent_per_learner_per_step"] == bytes_per_step(100_000_000, 50, "int8")["up"]
    assert mine["syncer_bytes_per_step"] == 6 * mine["sent_per_learner_per_step"]
    assert {p["role"] for p in data["memory"]["pools"]} == {"workers", "second_learners"}  # no training state on it
    assert any("syncer, holding about 1.20 GB" in note for note in data["notes"])
    text = run(repo_job, "--params", "100M").stdout
    assert "(DiLoCo learners; the syncer: n1-standard-8" in text
    assert "DiLoCo per step, int8" in text and "H=50 (this job)" in text


def test_a_diloco_jobs_costs_are_its_learners(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("machines: {a2-highgpu-1g: 1.0, g2-standard-8: 0.5, n1-standard-8: 100.0, n1-highcpu-16: 0.5}\n"
                      "accelerators: {a100: 3.0, l4: 0.5}\n", encoding="utf-8")  # the syncer priced absurdly
    repo_job = str(Path(__file__).resolve().parents[2] / "configs" / "diloco.yaml")
    result = run(repo_job, "--params", "100M", "--prices", str(prices), "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["costs"]["worker_price_per_hour"] == 4 * (1.0 + 3.0) + 2 * (0.5 + 0.5)
