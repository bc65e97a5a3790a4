"""`vtrain catalog` (issue 44 item 4): the table as people read it and as other tools read it (--json,
checked against the JSON Schema the manual holds)."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from vtrain import catalog
from vtrain.catalog.document import KINDS, document_schema
from vtrain.cli import cli


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["catalog", *args])
    return result.exit_code, result.stdout, result.stderr


def document(*args: str) -> dict[str, Any]:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    found = json.loads(out)
    jsonschema.validate(found, document_schema())  # what the manual says other tools may rely on
    return dict(found)


def test_machines_json_lists_every_machine_type_with_its_source_and_checked_date() -> None:
    """Acceptance: `vtrain catalog machines --json` lists every machine type with a source URL and a date."""
    entries = document("machines")["entries"]
    assert [e["name"] for e in entries] == list(catalog.MACHINES)
    assert set(catalog.ALL_MACHINE_TYPES) <= {e["name"] for e in entries}
    for entry in entries:
        assert entry["source"].startswith("https://cloud.google.com/"), entry["name"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", entry["checked"]), entry["name"]
    a4x = next(e for e in entries if e["name"] == "a4x-highgpu-4g")
    assert a4x["arch"] == "aarch64" and a4x["boot_disk_types"] == ["hyperdisk-balanced"] and a4x["emulator"]
    assert any("ARM" in f["note"] and f["fact"].startswith("arch") for f in a4x["facts"])


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_a_document_of_the_schema_and_a_table(kind: str) -> None:
    entries = document(kind)["entries"]
    assert entries and all({"source", "checked", "verified"} <= set(e) for e in entries)
    code, out, _ = run(kind)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[0] in {"MACHINE", "ACCELERATOR", "IMAGE", "REGION"}
    assert lines[-1].startswith("[") and ", checked 2026-" in lines[-1]  # the sources, numbered


def test_filters_by_gpu_alias_and_tpu_generation() -> None:
    h100 = document("machines", "--gpu", "h100")
    assert [e["name"] for e in h100["entries"]] == [f"a3-highgpu-{n}g" for n in (1, 2, 4, 8)]
    assert h100["filters"] == {"gpu": "NVIDIA_H100_80GB"}
    t4 = {e["name"] for e in document("machines", "--gpu", "t4")["entries"]}
    assert "n1-standard-16" in t4 and "n1-standard-96" in t4 and "n2-standard-8" not in t4
    v5e = document("machines", "--tpu", "v5e")["entries"]
    assert {e["name"] for e in v5e} == {"ct5lp-hightpu-1t", "ct5lp-hightpu-4t", "ct5lp-hightpu-8t"}
    assert [e["name"] for e in document("machines", "--tpu", "v3")["entries"]] == ["cloud-tpu"]
    accelerators = document("accelerators", "--tpu", "tpu-v6e")["entries"]
    assert [e["name"] for e in accelerators] == ["tpu-v6e"] and accelerators[0]["tensorflow_documented"] is False


def test_images_say_their_tensorflow_and_python_and_the_regional_uri() -> None:
    images = document("images", "--region", "europe-west4", "--family", "cpu")["entries"]
    tf217 = next(e for e in images if e["name"] == "tf-cpu.2-17")
    assert (tf217["tensorflow"], tf217["python"], tf217["arch"]) == ("2.17", "3.10", "x86_64")
    assert tf217["uri"] == "europe-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"
    assert any(e["kind"] == "prediction" and e["verified"] is False for e in images)


def test_the_table_marks_unverified_rows() -> None:
    code, out, _ = run("machines", "--family", "n4")
    assert code == 0
    assert all(line.rstrip().endswith("?") for line in out.splitlines()[1:] if line.startswith("n4-"))
    assert "(could not be read: unverified)" in out


@pytest.mark.parametrize(("args", "fragment"), [
    (("machines", "--gpu", "h1000"), "did you mean 'h100'?"),
    (("machines", "--gpu", "tpu-v3"), "unknown GPU 'tpu-v3'"),
    (("machines", "--tpu", "v7"), "one of v2, v3, v4, v5p, v5e, v6e"),
    (("gpus",), "'gpus' is not one of 'machines'"),
])  # fmt: skip
def test_bad_filters_are_usage_errors(args: tuple[str, ...], fragment: str) -> None:
    code, out, err = run(*args)
    assert code == 2 and fragment in out + err and "Traceback" not in out + err


def test_an_unknown_region_is_a_note_not_an_error() -> None:
    code, out, err = run("images", "--region", "mars-north1", "--json")
    assert code == 0 and "not in vtrain's list of training regions" in err
    assert json.loads(out)["entries"][0]["uri"].startswith("us-docker.pkg.dev/")


def test_no_match_says_so() -> None:
    code, out, _ = run("machines", "--family", "n1", "--tpu", "v5e")
    assert (code, out) == (0, "no machines match these filters\n")
