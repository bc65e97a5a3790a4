"""The catalog as a document for people and other tools: what `vtrain catalog` prints.

:func:`catalog_document` returns one kind of row (machines, accelerators, images, regions), filtered, as
plain JSON data: every entry carries ``source`` (the Google page) and ``checked`` (the day it was read),
``verified`` and a ``note``. :func:`document_schema` is the JSON Schema (draft 2020-12) of that document; the
manual's catalog reference holds it (a test keeps the two equal).
"""

from __future__ import annotations

from typing import Any

from vtrain.catalog import accelerators, capacity, images, machines, regions
from vtrain.catalog.shapes import legal_shapes

KINDS = ("machines", "accelerators", "images", "regions")
VERSION = 1


def _accelerator_entry(row: accelerators.Accelerator) -> dict[str, Any]:
    shapes = legal_shapes(row.enum) if row.kind == "gpu" and row.status == accelerators.OFFERED else []
    fixed = list(dict.fromkeys(m for m, _ in shapes if machines.MACHINES[m].kind == "gpu"))
    n1 = {str(c): most for c, most in machines.N1_GPUS.get(row.enum, {}).items()}
    fixed += ["n1-*"] if n1 else []
    tpu = [m.name for m in machines.MACHINES.values() if m.generation and
           accelerators.TPU_GENERATIONS[m.generation].enum == row.enum]
    if row.enum in ("TPU_V2", "TPU_V3"):
        tpu.append(machines.CLOUD_TPU)
    return {**row.as_dict(), "machines": fixed + tpu, "n1_counts_max_vcpus": n1 or None}


def _attachable(row: machines.Machine) -> dict[str, list[int]]:
    """The GPUs an N1 machine takes, with the counts its vCPUs allow."""
    if row.family != "n1":
        return {}
    found = {gpu: [c for c, most in counts.items() if (row.vcpus or 0) <= most]
             for gpu, counts in machines.N1_GPUS.items() if row.name not in machines.N1_GPU_EXCLUDED.get(gpu, ())}
    return {gpu: counts for gpu, counts in found.items() if counts}


def _machine_entry(row: machines.Machine) -> dict[str, Any]:
    return {**row.as_dict(), "attachable_gpus": _attachable(row) or None, "regions": None}


def _matches_gpu(row: machines.Machine, gpu: str) -> bool:
    return row.accelerator == gpu if row.kind == "gpu" else gpu in _attachable(row)


def catalog_document(kind: str, *, gpu: str | None = None, tpu: str | None = None, family: str | None = None,
                     region: str | None = None) -> dict[str, Any]:
    """The rows of `kind`, filtered: `gpu` an AcceleratorType name, `tpu` a generation (v5e), `family` a machine
    family (n1, a3) or an image's hardware (cpu, gpu, tpu), `region` a Vertex region (images: its registry)."""
    if kind not in KINDS:
        raise ValueError(f"kind is one of {', '.join(KINDS)}, not {kind!r}")
    entries: list[dict[str, Any]]
    if kind == "machines":
        rows = [m for m in machines.MACHINES.values() if (family is None or m.family == family)
                and (gpu is None or _matches_gpu(m, gpu)) and (tpu is None or tpu in _tpu_of(m))]
        entries = [_machine_entry(m) for m in rows]
    elif kind == "accelerators":
        entries = [_accelerator_entry(a) for a in accelerators.ACCELERATORS if (gpu is None or a.enum == gpu)
                   and (tpu is None or a.enum == accelerators.TPU_GENERATIONS[tpu].enum)]
        if tpu is not None or gpu is None:
            entries += [_generation_entry(g) for g in accelerators.TPU_GENERATIONS.values()
                        if tpu is None or g.name == tpu]
    elif kind == "images":
        where = region or "us-central1"
        entries = [{**i.as_dict(), "uri": i.uri(where)} for i in (*images.TRAINING_IMAGES, *images.PREDICTION_IMAGES)
                   if (family is None or i.family == family) and (tpu is None or i.family == "tpu")
                   and (gpu is None or i.family == "gpu")]
    else:
        entries = [{"name": r, "multi_region": regions.multi_region(r), **regions.REGIONS_SOURCE.as_dict()}
                   for r in regions.REGIONS if region is None or r == region]
    filters = {k: v for k, v in (("gpu", gpu), ("tpu", tpu), ("family", family), ("region", region)) if v}
    return {"vtrain_catalog": VERSION, "kind": kind, "filters": filters, "entries": entries}


def _tpu_of(row: machines.Machine) -> tuple[str, ...]:
    """The TPU generations a machine runs: a TPU VM's own, or v2 and v3 for the TPU node."""
    return (row.generation,) if row.generation else ("v2", "v3") if row.name == machines.CLOUD_TPU else ()


def _generation_entry(g: accelerators.TpuGeneration) -> dict[str, Any]:
    vms = [m.name for m in machines.MACHINES.values() if m.generation == g.name]
    return {"name": f"tpu-{g.name}", "kind": "tpu-generation", "enum": g.enum, "hbm_gib": round(g.hbm_gib, 2),
            "cores_per_chip": g.cores_per_chip, "tensorflow_documented": g.tensorflow,
            "machines": vms or [machines.CLOUD_TPU], **g.source.as_dict()}


def api_values() -> dict[str, Any]:
    """Scheduling strategies, reservation affinities and forms: the API values the catalog maps (or refuses)."""
    return {"strategies": [v.as_dict() for v in capacity.STRATEGIES],
            "affinities": [v.as_dict() for v in capacity.AFFINITIES],
            "reservation_forms": [f.as_dict() for f in capacity.RESERVATION_FORMS]}


_SOURCED = {
    "source": {"type": "string", "format": "uri", "description": "The Google page the row was checked on."},
    "checked": {"type": "string", "format": "date", "description": "The day it was checked (YYYY-MM-DD); for an "
                "unverified row, the day vtrain last tried."},
    "verified": {"type": "boolean", "description": "False: the fact could not be read on the page that day; "
                 "vtrain warns where it would refuse."},
    "note": {"type": "string", "description": "What the page says for the row, or what is known and from where."},
}
_ENTRY = {"type": "object", "required": ["name", "source", "checked", "verified"],
          "properties": {"name": {"type": "string"}, **_SOURCED}}


def document_schema() -> dict[str, Any]:
    """The JSON Schema of :func:`catalog_document`'s output (draft 2020-12)."""
    nullable_str = {"type": ["string", "null"]}
    kinds = {
        "machines": {"family": {"type": "string"}, "kind": {"enum": ["cpu", "gpu", "tpu"]},
                     "vcpus": {"type": ["integer", "null"]}, "memory_gb": {"type": ["number", "null"]},
                     "accelerator": nullable_str, "accelerator_count": {"type": "integer"},
                     "tpu_generation": nullable_str, "tpu_chips": {"type": "integer"},
                     "tpu_topologies": {"type": "array", "items": {"type": "string"}},
                     "arch": {"enum": [machines.X86, machines.ARM]}, "nic_gbps": {"type": "number"},
                     "boot_disk_types": {"type": "array", "items": {"enum": list(machines.BOOT_DISK_TYPES)}},
                     "boot_disk_default": {"enum": list(machines.BOOT_DISK_TYPES)},
                     "spot_or_flex_only": {"type": "boolean"},
                     "facts": {"type": "array", "items": {"type": "object", "required": ["fact", "source", "checked"],
                                                          "properties": {"fact": {"type": "string"}, **_SOURCED}}},
                     "emulator": {**nullable_str, "description": "Where vtrain's emulator answers otherwise on "
                                                                 "purpose, and why."},
                     "attachable_gpus": {"type": ["object", "null"], "additionalProperties": {
                         "type": "array", "items": {"type": "integer"}}},
                     "regions": {"type": ["array", "null"], "items": {"type": "string"},
                                 "description": "null: not known to vtrain (Google's locations page has it)."}},
        "accelerators": {"kind": {"enum": ["gpu", "tpu", "tpu-generation"]}, "status": {"enum": ["offered", "retired"]},
                         "reason": nullable_str, "aliases": {"type": "array", "items": {"type": "string"}},
                         "machines": {"type": "array", "items": {"type": "string"}},
                         "memory_gb": {"type": ["number", "null"]}, "quota_metric": nullable_str},
        "images": {"kind": {"enum": [images.TRAINING, images.PREDICTION]}, "hardware": {"enum": ["cpu", "gpu", "tpu"]},
                   "tensorflow": {"type": "string"}, "python": nullable_str, "arch": {"enum": [machines.X86]},
                   "uri": {"type": "string"}},
        "regions": {"multi_region": {"enum": ["us", "europe", "asia"]}},
    }
    defs = {k: {**_ENTRY, "properties": {**_ENTRY["properties"], **props}} for k, props in kinds.items()}  # type: ignore[dict-item]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "vtrain catalog",
        "description": "What `vtrain catalog KIND --json` prints: the rows vtrain's hardware and image table has, "
                       "each with the Google page it comes from and the day it was checked.",
        "type": "object",
        "required": ["vtrain_catalog", "kind", "filters", "entries"],
        "properties": {
            "vtrain_catalog": {"const": VERSION, "description": "The document's version."},
            "kind": {"enum": list(KINDS)},
            "filters": {"type": "object", "additionalProperties": {"type": "string"}},
            "entries": {"type": "array"},
        },
        "allOf": [{"if": {"properties": {"kind": {"const": k}}},
                   "then": {"properties": {"entries": {"items": {"$ref": f"#/$defs/{k}"}}}}} for k in KINDS],
        "$defs": defs,
    }


__all__ = ["KINDS", "api_values", "catalog_document", "document_schema"]
