"""Issue 44 item 3: the gaps the issue found, each against the catalog's row (and its source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.load import parse_config
from vtrain.request.build import build_request

CONTAINER = "trainer:\n  container: {image_uri: us-docker.pkg.dev/p/r/t:1}\n"
PACKAGE = "trainer:\n  package_uris: [gs://bkt/t-0.1.tar.gz]\n  module: trainer.task\n"


def job(chief: str, *, trainer: str = PACKAGE, extra: str = "") -> str:
    return f"name: j\nregion: us-central1\n{trainer}{extra}cluster:\n  chief: {chief}\n"


def ok(text: str) -> JobConfig:
    return parse_config(text, "job.yaml")


def errors(text: str) -> list[Problem]:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "job.yaml")
    return err.value.problems


def warned(config: JobConfig, fragment: str) -> Problem:
    found = [w for w in config.warnings if fragment in w.message]
    assert found, [w.message for w in config.warnings]
    return found[0]


# --- reservations ---------------------------------------------------------------------------------------------

RESERVATION = "projects/p/zones/us-central1-a/reservations/r"


@pytest.mark.parametrize("name", [RESERVATION, f"{RESERVATION}/reservationBlocks/b",
                                  f"{RESERVATION}/reservationBlocks/b/reservationSubBlocks/s"])
def test_a_reservation_its_blocks_and_sub_blocks_validate_and_are_sent(name: str) -> None:
    config = ok(job("{machine_type: a3-ultragpu-8g}", extra=f"reservation: {{name: {name}}}\n"))
    spec = build_request(config, ["gs://bkt/t-0.1.tar.gz"]).body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
    assert spec["reservationAffinity"] == {"reservationAffinityType": "SPECIFIC_RESERVATION",
                                           "key": "compute.googleapis.com/reservation-name", "values": [name]}


@pytest.mark.parametrize("name", [f"{RESERVATION}/blocks/b", f"{RESERVATION}/reservationBlocks/b/x",
                                  "projects/p/reservations/r", f"{RESERVATION}/reservationBlocks/"])
def test_other_paths_are_refused_naming_the_three_forms(name: str) -> None:
    (problem,) = errors(job("{machine_type: n1-standard-4}", extra=f"reservation: {{name: '{name}'}}\n"))
    assert problem.path == "reservation.name"
    assert "a reservation block: projects/PROJECT/zones/ZONE/reservations/RESERVATION/reservationBlocks/BLOCK" in \
        problem.message and "sub-block" in problem.message


# --- accelerators ---------------------------------------------------------------------------------------------

def test_k80_is_refused_as_retired_not_unknown() -> None:
    (problem,) = errors(job("{machine_type: n1-standard-4, accelerator: k80, accelerator_count: 1}"))
    assert problem.path == "cluster.chief.accelerator" and "end of support" in problem.message
    assert "unknown" not in problem.message and "NVIDIA_TESLA_T4" in problem.message


@pytest.mark.parametrize(("machine", "accelerator"), [("ct5lp-hightpu-4t", "TPU_V5_LITEPOD"),
                                                      ("ct5lp-hightpu-8t", "tpu-v5e"), ("ct4p-hightpu-4t", "tpu-v4")])
def test_a_tpu_vms_own_enum_is_accepted_and_left_out_of_the_request(machine: str, accelerator: str) -> None:
    config = ok(job(f"{{machine_type: {machine}, accelerator: {accelerator}, accelerator_count: 4}}",
                    trainer=CONTAINER))
    warned(config, "leaves accelerator and accelerator_count out of the request")
    spec = build_request(config).body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
    assert set(spec) == {"machineType", "tpuTopology"}


@pytest.mark.parametrize(("machine", "accelerator", "fragment"), [
    ("ct6e-standard-4t", "TPU_V5_LITEPOD", "omit accelerator and accelerator_count"),
    ("cloud-tpu", "TPU_V4_POD", "needs accelerator TPU_V2 or TPU_V3, not TPU_V4_POD"),
    ("n1-standard-8", "TPU_V5_LITEPOD", "needs machine_type ct5lp-hightpu-1t"),
])  # fmt: skip
def test_a_tpu_enum_on_another_machine_is_refused(machine: str, accelerator: str, fragment: str) -> None:
    (problem,) = errors(job(f"{{machine_type: {machine}, accelerator: {accelerator}, accelerator_count: 8}}",
                            trainer=CONTAINER))
    assert fragment in problem.message


def test_an_illegal_shape_suggests_the_nearest_legal_ones() -> None:
    (problem,) = errors(job("{machine_type: a2-highgpu-1g, accelerator: a100, accelerator_count: 8}"))
    assert problem.path == "cluster.chief.accelerator_count"
    assert "nearest legal: a2-highgpu-8g with 8 × NVIDIA_TESLA_A100" in problem.message
    (problem,) = errors(job("{machine_type: n1-highmem-32, accelerator: v100, accelerator_count: 2}"))
    assert "nearest legal: n1-highmem-32 with 4 × NVIDIA_TESLA_V100, n1-highmem-32 with 8 × NVIDIA_TESLA_V100, " \
           "n1-highmem-16 with 2 × NVIDIA_TESLA_V100" in problem.message


# --- A4X is Arm -----------------------------------------------------------------------------------------------

def test_an_a4x_job_on_an_x86_prebuilt_image_is_refused_naming_arm() -> None:
    """Acceptance: an A4X job on tf-gpu.2-17 is refused naming Arm (and so is one that leaves the image out)."""
    for trainer in (PACKAGE + "  image: tf-gpu.2-17\n", PACKAGE):
        (problem,) = errors(job("{machine_type: a4x-highgpu-4g}", trainer=trainer))
        assert "runs on Arm (aarch64" in problem.message and "built for x86_64 only" in problem.message


def test_a4x_with_trainer_build_builds_for_arm64_on_an_arm_base(tmp_path: Path) -> None:
    from vtrain.jobfile.artifacts import image_specs

    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "task.py").write_text("print('hi')\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "0.1"\n')
    build = (f"trainer:\n  package: {tmp_path}\n  module: trainer.task\n"
             "  image: nvcr.io/nvidia/tensorflow:24.01-tf2-py3\n"
             "  build: {repository: us-central1-docker.pkg.dev/p/r/t}\n")
    config = ok(job("{machine_type: a4x-highgpu-4g}", trainer=build))
    (spec,) = image_specs(config).values()
    assert spec.arch == "arm64" and spec.platform is None  # the platform is read from the arm64 base
    (problem,) = errors(job("{machine_type: a4x-highgpu-4g}", trainer=build.replace(
        "t}\n", "t, platform: manylinux_2_35_x86_64}\n")))
    assert problem.path == "trainer.build.platform" and "use a aarch64 tag" in problem.message
    (problem,) = errors(job("{machine_type: a4x-highgpu-4g}", trainer=build.replace(
        "nvcr.io/nvidia/tensorflow:24.01-tf2-py3", "tf-gpu.2-17")))
    assert "set trainer.image to a base with a linux/arm64 variant" in problem.message
    mixed = job("{machine_type: a4x-highgpu-4g}", trainer=build).replace(
        "cluster:\n", "cluster:\n  workers: {replicas: 1, machine_type: a3-highgpu-8g}\n")
    (problem,) = errors(mixed)
    assert problem.path == "trainer.build" and "give the Arm pools an `image` of their own" in problem.message


def test_a4x_with_a_container_is_reminded_of_arm64() -> None:
    config = ok(job("{machine_type: a4x-highgpu-4g}", trainer=CONTAINER))
    warned(config, "the image must have a linux/arm64 variant")


# --- boot disks -----------------------------------------------------------------------------------------------

def test_a3_ultra_with_a_size_only_gets_hyperdisk_and_refuses_pd_ssd() -> None:
    """Acceptance: a3-ultragpu-8g with only a size renders hyperdisk-balanced, and refuses pd-ssd."""
    config = ok(job("{machine_type: a3-ultragpu-8g, boot_disk: {size_gb: 500}}"))
    pool = build_request(config, ["gs://bkt/t-0.1.tar.gz"]).body["jobSpec"]["workerPoolSpecs"][0]
    assert pool["diskSpec"] == {"bootDiskType": "hyperdisk-balanced", "bootDiskSizeGb": 500}
    (problem,) = errors(job("{machine_type: a3-ultragpu-8g, boot_disk: {type: pd-ssd, size_gb: 500}}"))
    assert problem.path == "cluster.chief.boot_disk.type"
    assert problem.message.startswith("a3-ultragpu-8g takes hyperdisk-balanced boot disks only, not pd-ssd")


def test_other_machines_keep_pd_ssd_for_a_size_only_and_n4_only_warns() -> None:
    config = ok(job("{machine_type: n1-standard-4, boot_disk: {size_gb: 200}}"))
    assert build_request(config, ["gs://bkt/t-0.1.tar.gz"]).body["jobSpec"]["workerPoolSpecs"][0]["diskSpec"] == {
        "bootDiskType": "pd-ssd", "bootDiskSizeGb": 200}
    n4 = ok(job("{machine_type: n4-standard-8, boot_disk: {type: pd-ssd}}"))
    assert "(not confirmed:" in warned(n4, "takes hyperdisk-balanced boot disks only").message


def test_a_pool_inheriting_a_size_only_disk_gets_its_own_machines_default() -> None:
    config = ok(job("{machine_type: a4-highgpu-8g, boot_disk: {size_gb: 300}}").replace(
        "cluster:\n", "cluster:\n  workers: {replicas: 1, machine_type: n1-standard-8}\n"))
    pools = build_request(config, ["gs://bkt/t-0.1.tar.gz"]).body["jobSpec"]["workerPoolSpecs"]
    assert [p["diskSpec"]["bootDiskType"] for p in pools] == ["hyperdisk-balanced", "pd-ssd"]


# --- TPUs and TensorFlow --------------------------------------------------------------------------------------

@pytest.mark.parametrize("machine", ["ct6e-standard-4t", "ct5p-hightpu-4t", "ct4p-hightpu-4t"])
def test_tensorflow_on_a_tpu_generation_google_does_not_document_it_for_warns(machine: str) -> None:
    """Acceptance: ct6e-standard-4t with distribution_strategy: tpu warns."""
    config = ok(job(f"{{machine_type: {machine}}}", trainer=CONTAINER, extra="distribution_strategy: tpu\n"))
    problem = warned(config, "Google documents TensorFlow on Vertex TPU VMs for v2, v3 and v5e only")
    assert problem.path == "distribution_strategy" and problem.line == 5


def test_tensorflow_on_v5e_does_not_warn() -> None:
    config = ok(job("{machine_type: ct5lp-hightpu-4t}", trainer=CONTAINER, extra="distribution_strategy: tpu\n"))
    assert not [w for w in config.warnings if "documents TensorFlow" in w.message]


# --- scheduling -----------------------------------------------------------------------------------------------

def test_max_wait_zero_waits_indefinitely() -> None:
    config = ok(job("{machine_type: g2-standard-8}", extra="scheduling: {strategy: flex_start, max_wait: 0}\n"))
    assert build_request(config, ["gs://bkt/t-0.1.tar.gz"]).body["jobSpec"]["scheduling"]["maxWaitDuration"] == "0s"
    (problem,) = errors(job("{machine_type: g2-standard-8}", extra="scheduling: {timeout: 0}\n"))
    assert problem.message == "must be longer than 0s"  # other durations keep refusing 0


# --- prediction images ----------------------------------------------------------------------------------------

MODEL = "base_output_dir: gs://bkt/out\nmodel: {display_name: m}\n"


def test_a_prediction_image_after_2_15_is_a_doubt_not_a_refusal() -> None:
    """The list of prediction images could not be read again (2026-12-05): a newer version may exist."""
    config = ok(job("{machine_type: n1-standard-4}", trainer=PACKAGE + "  image: tf-cpu.2-17\n", extra=MODEL))
    assert "(not confirmed:" in warned(config, "vtrain serves the model with tf2-cpu.2-17").message
    alias = ok(job("{machine_type: n1-standard-4}", trainer=PACKAGE + "  image: tf-cpu.2-15\n",
                   extra=MODEL.replace("m}", "m, serving_image: tf2-gpu.2-17}")))
    warned(alias, "'tf2-gpu.2-17' is after the newest prediction image vtrain lists")
    (problem,) = errors(job("{machine_type: n1-standard-4}", trainer=PACKAGE,
                            extra=MODEL.replace("m}", "m, serving_image: tf2-gpu.1-15}")))
    assert "is not a prebuilt prediction image" in problem.message
