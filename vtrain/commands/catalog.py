"""`vtrain catalog`: what vtrain knows of Vertex's machines, accelerators, images and regions, each row with
the Google page it comes from and the day it was checked; `--json` for other tools."""

from __future__ import annotations

import click

from vtrain.commands._options import echo_json
from vtrain.errors import UsageError

_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "machines": (("MACHINE", "name"), ("KIND", "kind"), ("vCPU", "vcpus"), ("GPUS", "gpus"), ("TPU", "tpu"),
                 ("ARCH", "arch"), ("BOOT DISK", "boot_disk_default"), ("NIC Gbps", "nic_gbps")),
    "accelerators": (("ACCELERATOR", "name"), ("STATUS", "status"), ("MEMORY", "memory_gb"),
                     ("MACHINES", "machines")),
    "images": (("IMAGE", "name"), ("KIND", "kind"), ("TF", "tensorflow"), ("PYTHON", "python"), ("ARCH", "arch"),
               ("URI", "uri")),
    "regions": (("REGION", "name"), ("IMAGES FROM", "multi_region")),
}


def _cell(kind: str, entry: dict[str, object], key: str) -> str:
    if kind == "machines" and key == "gpus":
        if entry["accelerator"]:
            return f"{entry['accelerator_count']} × {entry['accelerator']}"
        attachable = entry.get("attachable_gpus") or {}
        assert isinstance(attachable, dict)
        return "+ " + ", ".join(g.removeprefix("NVIDIA_TESLA_") for g in attachable) if attachable else ""
    if kind == "machines" and key == "tpu":
        chips = f"{entry['tpu_chips']} × {entry['tpu_generation']}" if entry["tpu_generation"] else ""
        return chips or ("v2/v3 cores" if entry["name"] == "cloud-tpu" else "")
    if kind == "accelerators" and key == "memory_gb":
        gib = entry.get("hbm_gib")
        return f"{gib:g} GiB HBM" if isinstance(gib, float | int) else f"{entry[key]:g} GB" if entry[key] else ""
    value = entry.get(key)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        shown = ", ".join(str(v) for v in value[:4])
        return shown + (f" (+{len(value) - 4})" if len(value) > 4 else "")
    if kind == "accelerators" and key == "status" and entry.get("kind") == "tpu-generation":
        return "TF documented" if entry.get("tensorflow_documented") else "no TF documented"
    return "" if value is None else str(value)


def _table(kind: str, document: dict[str, object]) -> list[str]:
    entries = document["entries"]
    assert isinstance(entries, list)
    sources: dict[tuple[str, str, bool], int] = {}
    rows = []
    for entry in entries:
        key = (str(entry["source"]), str(entry["checked"]), bool(entry["verified"]))
        number = sources.setdefault(key, len(sources) + 1)
        mark = "" if entry["verified"] else "?"
        rows.append([_cell(kind, entry, k) for _, k in _COLUMNS[kind]] + [f"[{number}]{mark}"])
    header = [title for title, _ in _COLUMNS[kind]] + ["SOURCE"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]
    lines.append("")
    for (url, checked, verified), number in sources.items():
        lines.append(f"[{number}] {url}, checked {checked}" + ("" if verified else " (could not be read: unverified)"))
    return lines


@click.command()
@click.argument("kind", type=click.Choice(["machines", "accelerators", "images", "regions"]), default="machines")
@click.option("--gpu", metavar="GPU", help="Only rows with this GPU (an AcceleratorType name or an alias: h100, t4).")
@click.option("--tpu", metavar="GENERATION", help="Only rows of this TPU generation (v2, v3, v4, v5p, v5e, v6e).")
@click.option("--family", metavar="FAMILY", help="Only this machine family (n1, a3, ct5lp) or image hardware (cpu, "
                                                 "gpu, tpu).")
@click.option("--region", metavar="REGION", help="A region: the regions row; images: the registry nearest it. "
                                                 "vtrain does not know which machines each region offers.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON (each with source and checked).")
def catalog(kind: str, gpu: str | None, tpu: str | None, family: str | None, region: str | None,
            as_json: bool) -> None:
    """What vtrain knows of Vertex AI training hardware and images, with where each row comes from.

    KIND is machines (the default), accelerators, images or regions. Each row names the Google page it was
    checked on and the day; a row marked ? could not be read there that day, and validate warns where it
    would refuse on it. --json prints the document whose JSON Schema the manual's catalog reference holds.
    """
    from vtrain import catalog as table
    from vtrain.catalog.document import catalog_document
    from vtrain.jobfile.nodes import did_you_mean

    enum = None
    if gpu is not None:
        enum = table.normalize_accelerator(gpu)
        if enum is None or table.BY_ENUM[enum].kind != "gpu":
            gpus = [a.enum for a in table.ACCELERATORS if a.kind == "gpu" and a.status == table.OFFERED]
            raise UsageError(f"--gpu: unknown GPU {gpu!r}; one of {', '.join(gpus)} or an alias such as h100, "
                             f"a100, l4, t4;{did_you_mean(gpu, table.accelerator_spellings())}".rstrip(";"))
    generation = tpu.lower().removeprefix("tpu-").removeprefix("tpu_") if tpu is not None else None
    if generation is not None and generation not in table.TPU_GENERATIONS:
        raise UsageError(f"--tpu: unknown TPU generation {tpu!r}; one of {', '.join(table.TPU_GENERATIONS)}")
    if region is not None and region not in table.REGIONS:
        click.echo(f"note: {region} is not in vtrain's list of training regions (written from "
                   f"{table.sources.REGIONS.url}, not re-checked)", err=True)
    document = catalog_document(kind, gpu=enum, tpu=generation, family=family, region=region)
    if as_json:
        echo_json(document)
        return
    if not document["entries"]:
        click.echo(f"no {kind} match these filters")
        return
    for line in _table(kind, document):
        click.echo(line)
