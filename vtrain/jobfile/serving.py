"""Vertex's prebuilt prediction images: what a model registered from a job (`model:`) is served with, and the
TensorFlow version a training image names, to match the two. A table beside :mod:`vtrain.catalog`'s
training images; the rules (:mod:`vtrain.jobfile.rules.model`) and the UploadModel request
(:mod:`vtrain.request.model_upload`) read it."""

from __future__ import annotations

import re

from vtrain import catalog
from vtrain.catalog import images as catalog_images

#: Prebuilt TensorFlow *prediction* images (what a registered model is served with): tf2-cpu.2-NN and
#: tf2-gpu.2-NN, in the us, europe and asia registries: the catalog's rows (vtrain.catalog.images).
PREDICTION_REGISTRY = catalog_images.PREDICTION_REGISTRY
PREDICTION_TF = tuple(dict.fromkeys(i.version for i in catalog_images.PREDICTION_IMAGES))
PREDICTION_SOURCE = catalog_images.PREDICTION_IMAGES[0].source
#: `model.serving_image` alias grammar: tf2-cpu.2-15, tf2-gpu.2-15.
SERVING_ALIAS_RE = re.compile(r"^tf2-(?P<family>cpu|gpu)\.(?P<version>\d+-\d+)$")
PREDICTION_URI_RE = re.compile(
    r"^(?P<multi>us|europe|asia)-docker\.pkg\.dev/vertex-ai/prediction/"
    r"tf2-(?P<family>cpu|gpu)\.(?P<version>\d+-\d+):latest$"
)


def maybe_published(version: str) -> bool:
    """A version after the newest the catalog lists while that list could not be checked again: Vertex may
    publish it by now, so the rules warn instead of refusing (catalog.sources.PREBUILT_PREDICTION is unverified)."""
    return not PREDICTION_SOURCE.verified and catalog.tf_version_tuple(version) > catalog.tf_version_tuple(
        PREDICTION_TF[-1])


def serving_aliases() -> list[str]:
    """Every prebuilt prediction alias, for did-you-mean."""
    return [f"tf2-{family}.{v}" for family in ("cpu", "gpu") for v in PREDICTION_TF]


def prediction_image_uri(family: str, version: str, region: str) -> str:
    return f"{catalog.multi_region(region)}-{PREDICTION_REGISTRY}/tf2-{family}.{version}:latest"


def training_tf_version(image: str | None) -> str | None:
    """The TensorFlow version (2-NN) a trainer image alias or prebuilt URI names; None left out: the default."""
    if image is None:
        return catalog.DEFAULT_TF_VERSION
    found = catalog.IMAGE_ALIAS_RE.match(image) or catalog.PREBUILT_URI_RE.match(image)
    return found["version"] if found else None


__all__ = ["PREDICTION_REGISTRY", "PREDICTION_SOURCE", "PREDICTION_TF", "PREDICTION_URI_RE", "SERVING_ALIAS_RE",
           "maybe_published", "prediction_image_uri", "serving_aliases", "training_tf_version"]
