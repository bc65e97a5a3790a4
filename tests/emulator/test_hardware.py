"""Issue 21 item 1, issue 44: the emulator refuses the hardware Vertex refuses, in Vertex's words, from the
catalog's one verdict (vtrain/catalog/shapes.py), and vtrain's rules (vtrain.jobfile.rules.machines.check_machine)
agree with it on every combination: the emulator's deliberate differences (a TPU VM's own AcceleratorType) are
ones where both accept. tests/scenarios/test_catalog_verdicts.py walks whole jobs through both."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace
from typing import Any

import pytest
import requests

from vtrain import catalog
from vtrain.emulator import Emulator, sleep_runner
from vtrain.emulator.hardware import MACHINE_TYPES, accelerator_problem
from vtrain.jobfile.config import PoolConfig
from vtrain.jobfile.rules.base import Rules
from vtrain.jobfile.rules.machines import check_machine

JOBS = "/v1/projects/test-project/locations/us-central1/customJobs"
ACCELERATORS = ("",) + tuple(catalog.BY_ENUM)
COUNTS = (0, 1, 2, 3, 4, 8, 16, 32)
MACHINES = sorted(MACHINE_TYPES | set(catalog.ALL_MACHINE_TYPES) | {"n1-standard-3", "a2-highgpu-3g"})


class _Positions:
    values: dict[Any, Any] = {}
    keys: dict[Any, Any] = {}

    def of(self, where: Any) -> Any:
        return SimpleNamespace(file="job.yaml", line=1, column=1)


def vtrain_sends(machine: str, accelerator: str, count: int) -> tuple[str, str, int] | None:
    """What vtrain's rules make of a job file's machine/accelerator/count: the MachineSpec it sends
    (it fills in the GPUs an accelerator-optimized machine comes with), or None when they refuse it."""
    rules = Rules(SimpleNamespace(positions=_Positions()), "vertex")  # type: ignore[arg-type]
    pool = PoolConfig(role="chief", replicas=1, machine_type=machine, accelerator=accelerator or None,
                      accelerator_count=count)
    sent = check_machine(rules, pool)
    if [p for p in rules.problems if p.severity == "error"]:
        return None
    return sent.machine_type, sent.accelerator or "", sent.accelerator_count


COMBINATIONS = list(itertools.product(MACHINES, ACCELERATORS, COUNTS))


def test_every_combination_agrees_with_vtrains_rules() -> None:
    disagree = []
    for machine, accelerator, count in COMBINATIONS:
        sent = vtrain_sends(machine, accelerator, count)
        if sent is None and accelerator_problem(machine, accelerator, count) is None:
            disagree.append((machine, accelerator, count, "vtrain refuses, the emulator accepts"))
        elif sent is not None and accelerator_problem(*sent) is not None:
            disagree.append((*sent, f"vtrain sends it, the emulator refuses: {accelerator_problem(*sent)}"))
    assert disagree == [], f"{len(disagree)} disagreements, e.g. {disagree[:10]}"
    assert len(COMBINATIONS) > 5000


pytestmark = pytest.mark.emulator(runner=sleep_runner(0.1), pending_seconds=0, cancel_seconds=0.2)


def body(machine: str, accelerator: str = "", count: int = 0, **disk: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineType": machine}
    if accelerator:
        spec["acceleratorType"] = accelerator
    if count:
        spec["acceleratorCount"] = count
    pool = {"machineSpec": spec, "replicaCount": "1", "containerSpec": {"imageUri": "gcr.io/p/t:1"}}
    if disk:
        pool["diskSpec"] = disk
    return {"displayName": "hw", "jobSpec": {"workerPoolSpecs": [pool]}}


def with_spec(job: dict[str, Any], **machine: Any) -> dict[str, Any]:
    job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"].update(machine)
    return job


REFUSED = {
    "unknown machine": (body("n1-standard-3"), 'Machine type "n1-standard-3" is not supported.'),
    "T4 x 3": (body("n1-standard-4", "NVIDIA_TESLA_T4", 3),
               'Accelerator count 3 is not supported for machine type "n1-standard-4" with accelerator '
               '"NVIDIA_TESLA_T4".'),
    "A100 x 8 on a2-highgpu-1g": (body("a2-highgpu-1g", "NVIDIA_TESLA_A100", 8),
                                  'Accelerator count 8 is not supported for machine type "a2-highgpu-1g" with '
                                  'accelerator "NVIDIA_TESLA_A100".'),
    "V100 on a2": (body("a2-highgpu-1g", "NVIDIA_TESLA_V100", 1),
                   'Accelerator "NVIDIA_TESLA_V100" is not supported for machine type "a2-highgpu-1g".'),
    "GPU on n2": (body("n2-standard-8", "NVIDIA_TESLA_T4", 1),
                  'Accelerator "NVIDIA_TESLA_T4" is not supported for machine type "n2-standard-8".'),
    "too many vCPUs": (body("n1-standard-32", "NVIDIA_TESLA_T4", 1),
                       'Accelerator "NVIDIA_TESLA_T4" is not supported for machine type "n1-standard-32" with '
                       "accelerator count 1."),
    "type without count": (body("n1-standard-4", "NVIDIA_TESLA_T4"),
                           "Both `accelerator_type` and `accelerator_count` should be specified or none."),
    "10 GB boot disk": (body("n1-standard-4", bootDiskSizeGb=10),
                        "Boot disk size 10 GB is not supported; it must be between 100 and 64000 GB."),
    "MIG on 2 GPUs": (with_spec(body("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2), gpuPartitionSize="1g.5gb"),
                      "gpu_partition_size needs exactly one NVIDIA GPU (accelerator_count 1)."),
    "pd-balanced": (body("n1-standard-4", bootDiskType="pd-balanced"),
                    'Boot disk type "pd-balanced" is not supported; use one of pd-ssd, pd-standard, '
                    "hyperdisk-balanced."),
    # issue 44
    "pd-ssd on A3 Ultra": (body("a3-ultragpu-8g", bootDiskType="pd-ssd", bootDiskSizeGb=200),
                           'Boot disk type "pd-ssd" is not supported for machine type "a3-ultragpu-8g".'),
    "K80": (body("n1-standard-4", "NVIDIA_TESLA_K80", 1),
            'Accelerator "NVIDIA_TESLA_K80" is not supported for machine type "n1-standard-4".'),
    "v5e enum on v6e": (with_spec(body("ct6e-standard-4t", "TPU_V5_LITEPOD", 4), tpuTopology="2x2"),
                        'Accelerator "TPU_V5_LITEPOD" is not supported for machine type "ct6e-standard-4t".'),
    "v5e topology": (with_spec(body("ct5lp-hightpu-4t"), tpuTopology="3x3"),
                     'TPU topology "3x3" is not supported for machine type "ct5lp-hightpu-4t".'),
    "reservation path": (with_spec(body("a3-ultragpu-8g"), reservationAffinity={
        "reservationAffinityType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/p/zones/z/reservations/r/blocks/b"]}),
        'A specific reservation needs key "compute.googleapis.com/reservation-name" and values naming a reservation, '
        "reservation block or reservation sub-block."),
}


@pytest.mark.parametrize("job,message", REFUSED.values(), ids=list(REFUSED))
def test_each_refusal_is_a_400_in_vertexs_words(emu: Emulator, job: dict[str, Any], message: str) -> None:
    answer = requests.post(emu.url + JOBS, data=json.dumps(job), headers={"Content-Type": "application/json"},
                           timeout=30)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["status"], error["message"]) == ("INVALID_ARGUMENT", message)
    assert error["details"][0]["fieldViolations"][0]["field"].startswith("job_spec.worker_pool_specs[0].")


@pytest.mark.parametrize("job", [body("a2-highgpu-1g"), body("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1),
                                 body("n1-standard-16", "NVIDIA_TESLA_T4", 1), body("cloud-tpu", "TPU_V3", 8),
                                 body("n1-highcpu-64", "NVIDIA_TESLA_P100", 4),
                                 body("g2-standard-24", "NVIDIA_L4", 2), body("e2-standard-4", bootDiskSizeGb=100),
                                 body("n1-standard-4", bootDiskType="hyperdisk-balanced", bootDiskSizeGb=64000),
                                 with_spec(body("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1), gpuPartitionSize="1g.5gb"),
                                 with_spec(body("ct5p-hightpu-4t"), tpuTopology="2x2x2"),
                                 with_spec(body("ct4p-hightpu-4t"), tpuTopology="2x2x1"),
                                 # issue 44: a TPU VM's own enum, a reservation sub-block, Hyperdisk on A4
                                 with_spec(body("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4), tpuTopology="2x2"),
                                 with_spec(body("a4-highgpu-8g", bootDiskType="hyperdisk-balanced"),
                                           reservationAffinity={
                                               "reservationAffinityType": "SPECIFIC_RESERVATION",
                                               "key": "compute.googleapis.com/reservation-name",
                                               "values": ["projects/p/zones/z/reservations/r/reservationBlocks/b/"
                                                          "reservationSubBlocks/s"]})])
def test_legal_hardware_is_accepted(emu: Emulator, job: dict[str, Any]) -> None:
    answer = requests.post(emu.url + JOBS, json=job, timeout=30)
    assert answer.status_code == 200, answer.text
