"""Issue 44 item 2: what Google lists is in the catalog, or refused there with the reason.

Read from the installed packages, so a new google-api-python-client or google-cloud-aiplatform that adds a
value fails here until the catalog has a row for it: the Discovery documents googleapiclient ships
(aiplatform v1, compute v1) and the aiplatform_v1 protos. Every AcceleratorType value, every
Scheduling.Strategy, every bootDiskType DiskSpec names, every ReservationAffinity.Type and the resource forms
``values`` may name; and every row carries a Google page and the day it was checked.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from vtrain import catalog
from vtrain.catalog import capacity, images, sources
from vtrain.catalog.sources import Source


def _discovery(name: str) -> dict[str, Any]:
    spec = importlib.util.find_spec("googleapiclient")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "discovery_cache" / "documents" / f"{name}.json"
    return dict(json.loads(path.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def aiplatform() -> dict[str, Any]:
    return _discovery("aiplatform.v1")["schemas"]


def _enum(schema: dict[str, Any], message: str, field: str) -> dict[str, str]:
    """value -> description of an enum field of a Discovery schema."""
    prop = schema[f"GoogleCloudAiplatformV1{message}"]["properties"][field]
    return dict(zip(prop["enum"], prop["enumDescriptions"], strict=True))


def test_every_accelerator_type_of_the_discovery_document_and_the_protos_is_a_row(aiplatform: dict[str, Any]) -> None:
    from google.cloud.aiplatform_v1.types import AcceleratorType

    listed = set(_enum(aiplatform, "MachineSpec", "acceleratorType")) - {"ACCELERATOR_TYPE_UNSPECIFIED"}
    protos = {v.name for v in AcceleratorType} - {"ACCELERATOR_TYPE_UNSPECIFIED"}
    assert listed == protos  # the two sources agree with each other
    assert listed == set(catalog.BY_ENUM), "a value Google lists is not a row (or a row is no value)"
    for row in catalog.ACCELERATORS:  # each is offered, or refused with the reason
        assert row.status == "offered" or row.reason, row.enum


def test_a_value_the_api_deprecates_is_retired_with_its_reason(aiplatform: dict[str, Any]) -> None:
    prop = aiplatform["GoogleCloudAiplatformV1MachineSpec"]["properties"]["acceleratorType"]
    deprecated = {v for v, gone in zip(prop["enum"], prop["enumDeprecated"], strict=True) if gone}
    assert deprecated == {a.enum for a in catalog.ACCELERATORS if a.status == "retired"} == {"NVIDIA_TESLA_K80"}
    assert sources.K80_EOL.url in catalog.BY_ENUM["NVIDIA_TESLA_K80"].reason
    assert sources.K80_EOL.url in _enum(aiplatform, "MachineSpec", "acceleratorType")["NVIDIA_TESLA_K80"]


def test_no_accelerator_type_is_unknown_to_validate() -> None:
    """Acceptance: no AcceleratorType value of the v1 API is "unknown" to `validate`."""
    from google.cloud.aiplatform_v1.types import AcceleratorType

    from vtrain.errors import ConfigError
    from vtrain.jobfile.load import parse_config

    for value in AcceleratorType:
        if value.name == "ACCELERATOR_TYPE_UNSPECIFIED":
            continue
        text = ("name: x\nregion: us-central1\ntrainer: {container: {image_uri: us-docker.pkg.dev/p/r/t:1}}\n"
                "cluster:\n  chief: {machine_type: n1-standard-4, "
                f"accelerator: {value.name}, accelerator_count: 1}}\n")
        try:
            parse_config(text, "job.yaml")
        except ConfigError as err:
            assert "unknown accelerator" not in str(err), value.name


def test_every_scheduling_strategy_is_a_row(aiplatform: dict[str, Any]) -> None:
    from google.cloud.aiplatform_v1.types import Scheduling

    listed = _enum(aiplatform, "Scheduling", "strategy")
    assert set(listed) == {v.name for v in Scheduling.Strategy} == {v.enum for v in capacity.STRATEGIES}
    for value in capacity.STRATEGIES:
        assert value.word or value.reason, value.enum
        if "Deprecated" in listed[value.enum]:
            assert value.word is None and "deprecated" in value.reason
    from vtrain.jobfile.schema import SCHEDULING_STRATEGIES

    assert set(SCHEDULING_STRATEGIES) == set(capacity.STRATEGY_ENUM)  # every word the job file takes is sent


def test_max_wait_zero_is_documented_as_waiting_indefinitely(aiplatform: dict[str, Any]) -> None:
    described = aiplatform["GoogleCloudAiplatformV1Scheduling"]["properties"]["maxWaitDuration"]["description"]
    assert "If set to 0, the job will wait indefinitely" in described and "default is 24 hours" in described
    from vtrain.jobfile.schema import JOB_SCHEMA

    doc = JOB_SCHEMA.fields["scheduling"].fields["max_wait"].doc  # type: ignore[attr-defined]
    assert "0 waits indefinitely" in doc and "24 hours" in doc
    assert capacity.MAX_WAIT_DEFAULT_S == 24 * 3600


def test_every_boot_disk_type_google_lists_is_the_catalogs(aiplatform: dict[str, Any]) -> None:
    described = aiplatform["GoogleCloudAiplatformV1DiskSpec"]["properties"]["bootDiskType"]["description"]
    valid = described.split("Valid values:", 1)[1]
    assert tuple(re.findall(r'"([a-z-]+)"', valid)) == catalog.BOOT_DISK_TYPES
    # "for A3U machines, the default value is hyperdisk-balanced": the A3 Ultra row says so
    assert re.search(r'for A3U machines, the default value is "hyperdisk-balanced"', described)
    assert catalog.MACHINES["a3-ultragpu-8g"].boot_disk_default == "hyperdisk-balanced"
    assert 'the default value is "pd-ssd"' in described and catalog.MACHINES["n1-standard-4"].boot_disk_default == \
        "pd-ssd"


def test_every_reservation_affinity_type_and_form_is_a_row(aiplatform: dict[str, Any]) -> None:
    from google.cloud.aiplatform_v1.types import ReservationAffinity

    listed = set(_enum(aiplatform, "ReservationAffinity", "reservationAffinityType"))
    assert listed == {v.name for v in ReservationAffinity.Type} == {v.enum for v in capacity.AFFINITIES}
    assert all(v.word or v.reason for v in capacity.AFFINITIES)
    values = aiplatform["GoogleCloudAiplatformV1ReservationAffinity"]["properties"]["values"]["description"]
    for form in ("reservation,", "reservation block", "reservation sub- block"):  # as the document words it
        assert form in values
    assert [f.name for f in capacity.RESERVATION_FORMS] == ["reservation", "reservation block",
                                                            "reservation sub-block"]
    key = aiplatform["GoogleCloudAiplatformV1ReservationAffinity"]["properties"]["key"]["description"]
    assert capacity.RESERVATION_KEY in key


def test_the_reservation_forms_are_compute_engines_resource_paths() -> None:
    """Each form matches the path Compute Engine's Discovery document gives the resource, filled in."""
    methods = _discovery("compute.v1")["resources"]
    paths = {"reservation": methods["reservations"]["methods"]["get"]["flatPath"],
             "reservation block": methods["reservationBlocks"]["methods"]["get"]["flatPath"],
             "reservation sub-block": methods["reservationSubBlocks"]["methods"]["get"]["flatPath"]}
    for form in capacity.RESERVATION_FORMS:
        filled = re.sub(r"\{[^}]+\}", "x-1", paths[form.name])
        assert capacity.reservation_form(filled) == form, (form.name, filled)
        assert capacity.reservation_form(filled + "/more") is None
    assert capacity.reservation_form("projects/p/zones/z/reservations/r/blocks/b") is None


def test_the_tpu_generations_are_the_tpu_apis() -> None:
    """Every TPU generation the catalog has is an accelerator type the Cloud TPU API's Discovery document
    names (AcceleratorConfig.type: V2, V3, V4, V5LITE_POD, V5P, V6E)."""
    types = set(_discovery("tpu.v2")["schemas"]["AcceleratorConfig"]["properties"]["type"]["enum"])
    named = {"v2": "V2", "v3": "V3", "v4": "V4", "v5p": "V5P", "v5e": "V5LITE_POD", "v6e": "V6E"}
    assert set(catalog.TPU_GENERATIONS) == set(named)
    assert set(named.values()) <= types
    enums = {g.enum for g in catalog.TPU_GENERATIONS.values() if g.enum}
    assert enums == set(catalog.TPU_TYPES)  # every TPU AcceleratorType names a generation


def _rows() -> list[tuple[str, Source]]:
    out = [(f"machine {m.name}", m.source) for m in catalog.MACHINES.values()]
    out += [(f"{m.name}: {f.what}", f.source) for m in catalog.MACHINES.values() for f in m.facts]
    out += [(f"accelerator {a.enum}", a.source) for a in catalog.ACCELERATORS]
    out += [(f"TPU {g.name}", g.source) for g in catalog.TPU_GENERATIONS.values()]
    out += [(f"image {i.alias}", i.source) for i in (*images.TRAINING_IMAGES, *images.PREDICTION_IMAGES)]
    out += [(f"strategy {v.enum}", v.source) for v in (*capacity.STRATEGIES, *capacity.AFFINITIES)]
    out += [(f"reservation {f.name}", f.source) for f in capacity.RESERVATION_FORMS]
    return out


def test_every_row_says_where_it_comes_from_and_when() -> None:
    for what, source in _rows():
        assert re.fullmatch(r"https://[a-z.]+(\.google\.com|\.googleapis\.com)/\S+", source.url) or \
            source.url == sources.CUDA_GPUS.url, (what, source.url)
        assert re.fullmatch(r"2026-\d\d-\d\d", source.checked), (what, source.checked)
        assert source.verified or source.note, f"{what}: an unverified row says what is known and from where"


def test_an_unverified_source_turns_a_refusal_into_a_doubt() -> None:
    shaky = Source("https://cloud.google.com/x", "2026-12-05", verified=False, note="n")
    assert "could not be read for it on 2026-12-05" in shaky.doubt() and sources.DISCOVERY.doubt() == ""
    unverified = {what for what, source in _rows() if not source.verified}
    assert "machine n4-standard-8" in unverified and "machine a3-ultragpu-8g" not in unverified
