"""The hardware and image tables: lookups, and the invariants the rules rely on."""

from __future__ import annotations

import math
import re

import pytest

from vtrain import catalog


@pytest.mark.parametrize(
    ("given", "enum"),
    [
        ("t4", "NVIDIA_TESLA_T4"), ("T4", "NVIDIA_TESLA_T4"), (" v100 ", "NVIDIA_TESLA_V100"),
        ("a100", "NVIDIA_TESLA_A100"), ("A100-80GB", "NVIDIA_A100_80GB"), ("h100", "NVIDIA_H100_80GB"),
        ("h100-mega", "NVIDIA_H100_MEGA_80GB"), ("h200", "NVIDIA_H200_141GB"), ("l4", "NVIDIA_L4"),
        ("nvidia_l4", "NVIDIA_L4"), ("tpu-v3", "TPU_V3"), ("TPU_V2", "TPU_V2"), ("v2", "TPU_V2"),
        ("b200", "NVIDIA_B200"), ("gb200", "NVIDIA_GB200"), ("rtx-pro-6000", "NVIDIA_RTX_PRO_6000"),
    ],
)  # fmt: skip
def test_normalize_accelerator(given: str, enum: str) -> None:
    assert catalog.normalize_accelerator(given) == enum


@pytest.mark.parametrize("given", ["t5", "nvidia-tesla-t4", "", "tpu-v9"])
def test_unknown_accelerators(given: str) -> None:
    assert catalog.normalize_accelerator(given) is None


@pytest.mark.parametrize(("given", "enum"), [("k80", "NVIDIA_TESLA_K80"), ("tpu-v4", "TPU_V4_POD"),
                                             ("v5e", "TPU_V5_LITEPOD"), ("TPU_V5_LITEPOD", "TPU_V5_LITEPOD")])
def test_every_enum_value_is_known_a_retired_one_too(given: str, enum: str) -> None:
    """Issue 44: TPU_V4_POD and TPU_V5_LITEPOD were "unknown accelerator", K80 unknown rather than retired."""
    assert catalog.normalize_accelerator(given) == enum
    assert (enum in catalog.ACCELERATOR_TYPES) is (enum != "NVIDIA_TESLA_K80")
    assert catalog.BY_ENUM["NVIDIA_TESLA_K80"].status == "retired"


def test_every_alias_names_a_real_accelerator() -> None:
    assert set(catalog.ACCELERATOR_ALIASES.values()) <= set(catalog.BY_ENUM)
    assert all(alias == alias.lower() for alias in catalog.ACCELERATOR_ALIASES)
    offered = {k for k, v in catalog.ACCELERATOR_ALIASES.items() if v in catalog.ACCELERATOR_TYPES}
    assert set(catalog.accelerator_spellings()) == set(catalog.ACCELERATOR_TYPES) | offered
    assert "k80" not in catalog.accelerator_spellings()  # a retired value is never suggested


def test_gpu_tables_are_consistent() -> None:
    for machine, gpu in catalog.GPU_MACHINES.items():
        assert gpu.accelerator in catalog.GPU_TYPES, machine
        assert gpu.count in (1, 2, 4, 8, 16) and gpu.nic_gbps > 0, machine
    assert catalog.SPOT_OR_FLEX_ONLY.issubset(catalog.GPU_MACHINES)
    for accel, limits in catalog.N1_GPUS.items():
        assert accel in catalog.GPU_TYPES
        assert list(limits) == sorted(limits) and list(limits.values()) == sorted(limits.values())
    # No GPU is offered both fixed into machines and attachable to N1.
    assert not set(catalog.N1_GPUS) & {g.accelerator for g in catalog.GPU_MACHINES.values()}


def test_machine_names_are_unique_and_disjoint() -> None:
    names = catalog.ALL_MACHINE_TYPES
    assert len(names) == len(set(names))
    assert not set(catalog.CPU_MACHINES) & set(catalog.GPU_MACHINES)
    assert not set(catalog.CPU_MACHINES) & set(catalog.TPU_VM_MACHINES)


@pytest.mark.parametrize(("machine", "vm"), sorted(catalog.TPU_VM_MACHINES.items()))
def test_tpu_topologies_fill_whole_hosts(machine: str, vm: catalog.TpuVmMachine) -> None:
    assert machine.endswith(f"-{vm.chips}t")
    for topology in vm.topologies:
        chips = math.prod(int(n) for n in topology.split("x"))
        assert chips % vm.chips == 0, topology
    assert math.prod(int(n) for n in vm.topologies[0].split("x")) == vm.chips  # the default is one host


@pytest.mark.parametrize(
    ("machine", "gbps"),
    [
        ("n1-standard-4", 8), ("n1-standard-16", 32), ("n1-standard-96", 32), ("n1-highcpu-16", 32),
        ("n2-highmem-2", 10), ("n2-standard-4", 10), ("n2-standard-8", 16),
        ("e2-standard-4", 8), ("e2-standard-32", 16), ("c2-standard-60", 32),
        ("a2-highgpu-1g", 24), ("a2-highgpu-8g", 100), ("a3-highgpu-8g", 1000), ("a3-megagpu-8g", 1800),
        ("g2-standard-4", 10), ("a2-megagpu-16g", 100), ("a4x-highgpu-4g", 2000), ("a3-ultragpu-8g", 3600),
        ("ct5lp-hightpu-4t", 100), ("ct6e-standard-8t", 200), ("cloud-tpu", 32),
    ],
)  # fmt: skip
def test_nic_bandwidth(machine: str, gbps: float) -> None:
    assert catalog.nic_gbps(machine) == gbps


def test_nic_bandwidth_of_unknown_machine_raises() -> None:
    with pytest.raises(KeyError):
        catalog.nic_gbps("n1-standard-3")


@pytest.mark.parametrize(
    ("machine", "vcpus", "gpus", "tpu"),
    [
        ("n1-standard-8", 8, 2, False), ("m1-ultramem-160", 160, 2, False), ("a2-highgpu-4g", None, 4, False),
        ("g2-standard-96", None, 8, False), ("cloud-tpu", None, 2, True), ("ct6e-standard-4t", None, 2, True),
    ],
)  # fmt: skip
def test_machine_lookups(machine: str, vcpus: int | None, gpus: int, tpu: bool) -> None:
    assert catalog.vcpus(machine) == vcpus
    assert catalog.gpus_per_machine(machine, 2) == gpus
    assert catalog.is_tpu_machine(machine) is tpu


@pytest.mark.parametrize(
    ("region", "multi"),
    [
        ("us-central1", "us"), ("northamerica-northeast1", "us"), ("southamerica-east1", "us"),
        ("europe-west4", "europe"), ("me-central2", "europe"), ("africa-south1", "europe"),
        ("asia-northeast1", "asia"), ("australia-southeast1", "asia"),
    ],
)  # fmt: skip
def test_multi_region(region: str, multi: str) -> None:
    assert catalog.multi_region(region) == multi
    assert catalog.reduction_server_image(region) == (
        f"{multi}-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest")


def test_prebuilt_uris_round_trip_through_the_uri_pattern() -> None:
    for family, versions in catalog.PREBUILT_TF.items():
        for version in versions:
            uri = catalog.prebuilt_image_uri(family, version, "europe-west4")
            match = catalog.PREBUILT_URI_RE.match(uri)
            assert match is not None, uri
            assert (match["multi"], match["family"], match["version"]) == ("europe", family, version)
    assert catalog.prebuilt_image_uri("gpu", "2-17", "us-central1") == (
        "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest")


def test_tpu_images_are_the_published_ones() -> None:
    # Vertex publishes TPU training images only up to 2.15, named .cp310 (2.12 has no Python suffix).
    assert sorted(catalog.PREBUILT_TF["tpu"], key=catalog.tf_version_tuple) == ["2-12", "2-15"]
    assert catalog.prebuilt_image_uri("tpu", "2-15", "us-west1") == (
        "us-docker.pkg.dev/vertex-ai/training/tf-tpu.2-15.cp310:latest")
    assert catalog.prebuilt_image_uri("tpu", "2-12", "asia-east1") == (
        "asia-docker.pkg.dev/vertex-ai/training/tf-tpu.2-12:latest")
    assert catalog.default_tf_version("tpu") == "2-15"
    assert catalog.default_tf_version("gpu") == catalog.DEFAULT_TF_VERSION


def test_n1_gpu_limits_follow_the_vertex_compatibility_table() -> None:
    # n1-*-32 takes 2 or 4 T4/P4/P100, never 1; 4 x P100 stop at 64 vCPUs and 208 GB (n1-highcpu-64 only).
    for accel in ("NVIDIA_TESLA_T4", "NVIDIA_TESLA_P4", "NVIDIA_TESLA_P100"):
        assert catalog.N1_GPUS[accel][1] < 32 <= catalog.N1_GPUS[accel][2]
    assert catalog.N1_GPUS["NVIDIA_TESLA_P100"][4] == 64
    assert catalog.N1_GPU_EXCLUDED["NVIDIA_TESLA_P100"] == {"n1-standard-64", "n1-highmem-64"}
    assert set(catalog.N1_GPU_EXCLUDED) <= set(catalog.N1_GPUS)


@pytest.mark.parametrize(
    ("alias", "family", "version"),
    [("tf-cpu.2-17", "cpu", "2-17"), ("tf-gpu.2-12", "gpu", "2-12"), ("tf-tpu.2-15", "tpu", "2-15"),
     ("tf.2-16", None, "2-16")],
)  # fmt: skip
def test_image_alias_pattern(alias: str, family: str | None, version: str) -> None:
    match = catalog.IMAGE_ALIAS_RE.match(alias)
    assert match is not None and (match["family"], match["version"]) == (family, version)


@pytest.mark.parametrize("alias", ["tf-gpu-2-17", "tf-gpu.2.17", "tf-xpu.2-17", "tensorflow", "tf-gpu.2-17:latest"])
def test_not_image_aliases(alias: str) -> None:
    assert catalog.IMAGE_ALIAS_RE.match(alias) is None


def test_defaults_exist_in_the_tables() -> None:
    assert all(catalog.default_tf_version(family) in versions for family, versions in catalog.PREBUILT_TF.items())
    assert all(catalog.DEFAULT_TF_VERSION in catalog.PREBUILT_TF[family] for family in ("cpu", "gpu"))
    assert catalog.REDUCTION_SERVER_DEFAULT_MACHINE in catalog.CPU_MACHINES
    assert catalog.nic_gbps(catalog.REDUCTION_SERVER_DEFAULT_MACHINE) == 32
    assert sorted(["2-9", "2-12", "2-3"], key=catalog.tf_version_tuple) == ["2-3", "2-9", "2-12"]


def test_known_regions_pass_the_region_format_check() -> None:
    from vtrain.jobfile.rules.base import _REGION

    assert len(set(catalog.REGIONS)) == len(catalog.REGIONS)
    assert all(_REGION.match(region) for region in catalog.REGIONS)
    assert all(re.fullmatch(r"[a-z]+-[a-z]+\d+", region) for region in catalog.REGIONS)


@pytest.mark.parametrize(("machine", "generation", "default"), [("ct4p-hightpu-4t", "v4", "2x2x1"),
                                                               ("ct5p-hightpu-4t", "v5p", "2x2x1")])
def test_tpu_v4_and_v5p_are_3d_slices_of_4_chip_hosts(machine: str, generation: str, default: str) -> None:
    vm = catalog.TPU_VM_MACHINES[machine]
    assert (vm.generation, vm.chips, vm.topologies[0]) == (generation, 4, default)
    assert all(len(t.split("x")) == 3 for t in vm.topologies)
    assert catalog.is_tpu_machine(machine) and catalog.tpu_generation(machine, None) == generation
    assert catalog.TPU_MEMORY[generation].cores_per_chip == 1  # megacore: one TF device per chip
