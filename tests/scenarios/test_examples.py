"""Every example in configs/ validates, renders to its golden body, and parses as the real proto.

Regenerate the golden files after an intended change with `UPDATE_GOLDEN=1 make test`.
Package URIs carry a content hash of the trainer sources; it is compared separately, so
editing a template does not churn every golden file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from google.cloud.aiplatform_v1 import CustomJobSpec

from tests.conftest import REPO
from tests.helpers import assert_equals_real_proto, planned
from vtrain.jobfile.load import load_config
from vtrain.request.custom_job import build_job_dict
from vtrain.request.render import render
from vtrain.trainer import packaging, runtime_sdist

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))
GOLDEN = REPO / "tests" / "golden"
_HASH = re.compile(r"-[0-9a-f]{12,64}\.tar\.gz")
_IMAGE_TAG = re.compile(r'(-docker\.pkg\.dev/[^":]+):[0-9a-f]{12,64}"')  # an image vtrain builds: tag = content hash


def _normalized(text: str) -> str:
    return _IMAGE_TAG.sub(r'\1:<hash>"', _HASH.sub("-<hash>.tar.gz", text))


def test_there_is_an_example_per_scenario() -> None:
    names = {c.stem for c in CONFIGS}
    assert {"quickstart", "single-cpu", "single-host-mirrored", "multi-worker-gpu", "reduction-server",
            "parameter-server", "tpu-vm", "spot-flex-start"} <= names  # fmt: skip


@pytest.mark.parametrize("path", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_example_matches_golden_and_real_proto(path: Path) -> None:
    config = load_config(path)
    assert not [w for w in config.warnings if w.severity == "error"]
    body = build_job_dict(*planned(config))
    text = json.dumps(body, indent=2) + "\n"

    assert_equals_real_proto(body)

    golden = GOLDEN / f"{path.stem}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(_normalized(text), encoding="utf-8")
    assert _normalized(text) == golden.read_text(encoding="utf-8")

    spec = yaml.safe_load(render(body, "gcloud"))
    CustomJobSpec.from_json(json.dumps(spec))


PACKAGED = [c for c in CONFIGS if "package:" in c.read_text(encoding="utf-8")
            and "build:" not in c.read_text(encoding="utf-8")]
BUILT = [c for c in CONFIGS if "build:" in c.read_text(encoding="utf-8")]


@pytest.mark.parametrize("path", BUILT, ids=[c.stem for c in BUILT])
def test_built_images_are_tagged_with_the_hash_of_their_inputs(path: Path) -> None:
    """The tag the golden file hides is the one the image library plans from the same files."""
    from vtrain.jobfile.artifacts import image_specs
    from vtrain.trainer.image.build import planned_image

    config = load_config(path)
    assert config.trainer.package is not None
    images = {planned_image(spec, config.trainer.package) for spec in image_specs(config).values()}
    pools = build_job_dict(*planned(config))["jobSpec"]["workerPoolSpecs"]
    assert {p["containerSpec"]["imageUri"] for p in pools if p} == images
    assert all(uri.rsplit(":", 1)[1] != "<hash>" for uri in images)


@pytest.mark.parametrize("path", PACKAGED, ids=[c.stem for c in PACKAGED])
def test_package_uris_are_where_submit_will_stage(path: Path) -> None:
    config = load_config(path)
    assert config.trainer.package is not None and config.staging_bucket is not None
    uris = build_job_dict(*planned(config))["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"]
    assert uris == [
        packaging.planned_uri(config.trainer.package, config.staging_bucket),
        runtime_sdist.planned_runtime_uri(config.staging_bucket),
    ]
    assert all(u.startswith(f"{config.staging_bucket}/") for u in uris)
