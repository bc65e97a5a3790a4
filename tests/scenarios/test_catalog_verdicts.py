"""Issue 44: `validate` and vtrain's emulator give the same verdict on every shape the catalog has.

Each shape (a machine of the table with no accelerator, its own, a wrong one, legal and illegal counts, each
TPU topology and a bad one, each boot disk type, a disk too small) is a whole job file: `validate` runs its
rules on it (parse_config); when it accepts, the request vtrain builds goes to the emulator's create checks
(parsed strictly into the CustomJob proto, then checked, as a POST would be); when it refuses, the shape as
written goes there. The two must agree: an accepted job the emulator refuses, or a refused one it takes, is
a bug in one of them, since both read one table. In-process: about a millisecond a shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from vtrain import catalog
from vtrain.catalog.shapes import tpu_vm_accelerator
from vtrain.errors import ConfigError
from vtrain.jobfile.load import parse_config
from vtrain.request.build import build_request

IMAGE = "us-docker.pkg.dev/my-proj/repo/trainer:1"


@dataclass(frozen=True)
class Shape:
    machine: str
    accelerator: str | None = None
    count: int = 0
    topology: str | None = None
    disk_type: str | None = None
    disk_gb: int | None = None

    def job(self) -> str:
        chief = [f"machine_type: {self.machine}"]
        chief += [f"accelerator: {self.accelerator}"] if self.accelerator else []
        chief += [f"accelerator_count: {self.count}"] if self.count else []
        chief += [f"tpu_topology: '{self.topology}'"] if self.topology else []
        if self.disk_gb is not None:
            disk = [f"size_gb: {self.disk_gb}"] + ([f"type: {self.disk_type}"] if self.disk_type else [])
            chief.append(f"boot_disk: {{{', '.join(disk)}}}")
        return (f"name: shape\nregion: us-central1\ntrainer:\n  container: {{image_uri: {IMAGE}}}\n"
                f"cluster:\n  chief: {{{', '.join(chief)}}}\n")

    def as_written(self) -> dict[str, Any]:
        """The REST body of the shape as the job file writes it (what a refused job would have sent)."""
        spec: dict[str, Any] = {"machineType": self.machine}
        if self.accelerator:
            spec["acceleratorType"] = catalog.normalize_accelerator(self.accelerator)
        if self.count:
            spec["acceleratorCount"] = self.count
        if self.topology:
            spec["tpuTopology"] = self.topology
        pool: dict[str, Any] = {"machineSpec": spec, "replicaCount": "1", "containerSpec": {"imageUri": IMAGE}}
        if self.disk_gb is not None:
            pool["diskSpec"] = {"bootDiskSizeGb": self.disk_gb, **({"bootDiskType": self.disk_type}
                                                                    if self.disk_type else {})}
        return {"displayName": "shape", "jobSpec": {"workerPoolSpecs": [pool]}}


def _shapes_of(row: catalog.Machine) -> list[Shape]:
    name = row.name
    out = [Shape(name)] + [Shape(name, disk_type=t, disk_gb=200) for t in (None, *catalog.BOOT_DISK_TYPES)]
    out += [Shape(name, disk_gb=50), Shape(name, disk_type="pd-balanced", disk_gb=100)]
    if row.kind == "gpu":
        other = "NVIDIA_TESLA_V100" if row.accelerator != "NVIDIA_TESLA_V100" else "NVIDIA_L4"
        out += [Shape(name, row.accelerator, row.count), Shape(name, row.accelerator, row.count + 1),
                Shape(name, row.accelerator), Shape(name, None, row.count), Shape(name, other, 1),
                Shape(name, topology="2x2")]
    elif name == catalog.CLOUD_TPU:
        out += [Shape(name, a, c) for a in (None, *catalog.TPU_TYPES, "NVIDIA_TESLA_T4") for c in (0, 1, 8, 16, 32)]
        out += [Shape(name, "TPU_V3", 8, topology="2x2")]
    elif row.kind == "tpu":
        out += [Shape(name, topology=t) for t in row.topologies]
        out += [Shape(name, topology="3x3"), Shape(name, topology="3x3x3"), Shape(name, "TPU_V3", 8),
                Shape(name, "NVIDIA_TESLA_T4", 1), Shape(name, None, row.chips)]
        named = tpu_vm_accelerator(row)
        out += [Shape(name, named, row.chips), Shape(name, named)] if named else []
    elif row.family == "n1":
        gpus = (*catalog.N1_GPUS, "NVIDIA_TESLA_A100", "NVIDIA_TESLA_K80", "TPU_V2")
        out += [Shape(name, gpu, count) for gpu in gpus for count in (1, 2, 3, 4, 8)]
        out += [Shape(name, "t4"), Shape(name, None, 2), Shape(name, topology="2x2")]
    else:
        out += [Shape(name, "NVIDIA_TESLA_T4", 1), Shape(name, "NVIDIA_L4", 1), Shape(name, None, 1),
                Shape(name, "TPU_V5_LITEPOD", 4)]
    return out


SHAPES = [s for row in catalog.MACHINES.values() for s in _shapes_of(row)] + [
    Shape("n1-standard-3"), Shape("a2-highgpu-3g"), Shape("ct5lp-hightpu-2t"), Shape("n4-standard-3")]


def validate_accepts(shape: Shape) -> dict[str, Any] | None:
    """The request vtrain builds for the shape, or None when `validate` refuses it (warnings pass)."""
    try:
        config = parse_config(shape.job(), "shape.yaml")
    except ConfigError:
        return None
    return build_request(config).body


def emulator_accepts(body: dict[str, Any]) -> str | None:
    """None when the emulator's create checks take the body, else their message."""
    from vtrain.emulator.errors import ApiError
    from vtrain.emulator.validation import check_custom_job, parse_custom_job

    try:
        check_custom_job(parse_custom_job(json.dumps(body).encode()))
    except ApiError as err:
        return str(err)
    return None


@pytest.mark.slow  # ~2,000 job files through validate, the request and the emulator's checks: ~1.5 CPU-s
def test_validate_and_the_emulator_agree_on_every_shape_of_the_table() -> None:
    disagree = []
    for shape in SHAPES:
        sent = validate_accepts(shape)
        refused = emulator_accepts(sent if sent is not None else shape.as_written())
        if sent is not None and refused is not None:
            disagree.append(f"{shape}: validate accepts, the emulator refuses: {refused}")
        elif sent is None and refused is None:
            disagree.append(f"{shape}: validate refuses, the emulator accepts")
    assert disagree == [], f"{len(disagree)} of {len(SHAPES)} disagree:\n" + "\n".join(disagree[:20])
    assert len(SHAPES) > 1000  # every row of the table, many ways


def test_the_walk_sees_both_verdicts_for_every_kind_of_machine() -> None:
    """Not vacuous: each kind has shapes both accept and shapes both refuse, and unverified rows only warn."""
    seen: dict[tuple[str, bool], int] = {}
    for shape in SHAPES[::7]:
        row = catalog.MACHINES.get(shape.machine)
        kind = row.kind if row is not None else "unknown"
        key = (kind, validate_accepts(shape) is not None)
        seen[key] = seen.get(key, 0) + 1
    assert {(k, ok) for k, ok in seen} >= {(k, ok) for k in ("cpu", "gpu", "tpu") for ok in (True, False)}
    assert ("unknown", True) not in seen


@pytest.mark.parametrize(("shape", "warned"), [
    (Shape("n4-standard-8"), "not confirmed on Vertex AI's training machine list"),
    (Shape("n4-standard-8", disk_type="pd-ssd", disk_gb=100), "takes hyperdisk-balanced boot disks only"),
    (Shape("cloud-tpu", "TPU_V3", 32), "a pod slice may be refused at create"),
    (Shape("ct4p-hightpu-4t", topology="2x2x3"), "supports topologies"),
    (Shape("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4), "leaves accelerator and accelerator_count out"),
])  # fmt: skip
def test_a_doubt_is_a_warning_and_both_accept(shape: Shape, warned: str) -> None:
    """Rows whose page could not be read warn instead of refusing (issue 44), and the emulator takes them."""
    config = parse_config(shape.job(), "shape.yaml")
    assert any(warned in w.message and w.severity == "warning" for w in config.warnings), config.warnings
    assert emulator_accepts(build_request(config).body) is None
