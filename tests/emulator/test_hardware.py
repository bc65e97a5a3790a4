"""Issue 21 item 1: the emulator refuses the hardware Vertex refuses, from its own table
(vtrain/emulator/hardware.py), and that table is held against vtrain's own rules
(vtrain/catalog.py through vtrain.jobfile.rules.machines.check_machine) for every combination.

A disagreement is either a bug fixed in one of the tables or listed in KNOWN with its reason."""

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
from vtrain.jobfile.model import PoolConfig
from vtrain.jobfile.rules.base import Rules
from vtrain.jobfile.rules.machines import check_machine

JOBS = "/v1/projects/test-project/locations/us-central1/customJobs"
ACCELERATORS = ("",) + catalog.ACCELERATOR_TYPES + ("NVIDIA_TESLA_K80", "TPU_V5_LITEPOD")
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


def known(machine: str, accelerator: str, count: int) -> str | None:
    """Why the two tables may disagree on this combination (documented in the README), or None."""
    if machine.startswith("n4-"):
        return "n4: in vtrain's catalog, not on the Vertex training machine list the emulator cites"
    if machine == "cloud-tpu" and accelerator in ("TPU_V2", "TPU_V3") and count in (16, 32):
        return "TPU pods: vtrain takes multiples of 32 cores; Vertex's training page names 8 only"
    if machine.startswith("ct5lp-") and accelerator == "TPU_V5_LITEPOD" and count:
        return "TPU VM: the emulator also takes the enum Vertex's REST samples send; vtrain sends none"
    if accelerator == "NVIDIA_TESLA_K80" or accelerator == "TPU_V5_LITEPOD":
        return "not an accelerator vtrain writes (K80 is past end of support)"
    return None


COMBINATIONS = list(itertools.product(MACHINES, ACCELERATORS, COUNTS))


def test_every_combination_agrees_with_vtrains_rules_or_is_known() -> None:
    disagree = []
    for machine, accelerator, count in COMBINATIONS:
        sent = vtrain_sends(machine, accelerator, count)
        if known(machine, accelerator, count) is not None:
            continue
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
                                 with_spec(body("ct4p-hightpu-4t"), tpuTopology="2x2x1")])
def test_legal_hardware_is_accepted(emu: Emulator, job: dict[str, Any]) -> None:
    answer = requests.post(emu.url + JOBS, json=job, timeout=30)
    assert answer.status_code == 200, answer.text
