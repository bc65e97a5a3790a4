"""Vertex's prebuilt TensorFlow images: one :class:`PrebuiltImage` row per training image (the executor image
of a python-package pool) and per prediction image (what a registered model is served with), each with its
TensorFlow version, its Python (MAJOR.MINOR; None where the name says none and no page does), the hardware
it is built for and its CPU architecture (x86_64: no Arm variant is published).

An alias is what a job file writes: ``tf-cpu.2-17`` (training; ``tf.2-17`` picks cpu/gpu/tpu per pool) and
``tf2-cpu.2-15`` (prediction). :func:`prebuilt_image` turns an alias or a full URI into its row, so the rules
(the trainer's Python grammar and standard library, A4X's Arm), the request (the regional URI) and the
rehearsal (the image's TensorFlow and Python) read one table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vtrain.catalog import sources as src
from vtrain.catalog.machines import X86
from vtrain.catalog.regions import multi_region
from vtrain.catalog.sources import Source

TRAINING, PREDICTION = "training", "prediction"
IMAGE_REGISTRY = "docker.pkg.dev/vertex-ai/training"
PREDICTION_REGISTRY = "docker.pkg.dev/vertex-ai/prediction"


@dataclass(frozen=True)
class PrebuiltImage:
    kind: str  # TRAINING or PREDICTION
    family: str  # "cpu", "gpu" or "tpu"
    version: str  # "2-17", as the image names it
    python: str | None  # "3.10"
    suffix: str = ""  # the tag's Python suffix: "py310", "cp310", ""
    arch: str = X86
    source: Source = src.PREBUILT_TRAINING

    @property
    def alias(self) -> str:
        return f"tf-{self.family}.{self.version}" if self.kind == TRAINING else f"tf2-{self.family}.{self.version}"

    @property
    def tensorflow(self) -> str:
        """The TensorFlow version as pip spells it: 2.17."""
        return self.version.replace("-", ".")

    def uri(self, region: str) -> str:
        """The image in the Artifact Registry multi-region (us, europe, asia) nearest `region`."""
        if self.kind == PREDICTION:
            return f"{multi_region(region)}-{PREDICTION_REGISTRY}/tf2-{self.family}.{self.version}:latest"
        tag = f"{self.version}.{self.suffix}" if self.suffix else self.version
        return f"{multi_region(region)}-{IMAGE_REGISTRY}/tf-{self.family}.{tag}:latest"

    def as_dict(self) -> dict[str, object]:
        return {"name": self.alias, "kind": self.kind, "hardware": self.family, "tensorflow": self.tensorflow,
                "python": self.python, "arch": self.arch, "uri": self.uri("us-central1"), **self.source.as_dict()}


#: TPU training images stop at 2.15 (named tf-tpu.2-15.cp310; 2.12 is tf-tpu.2-12 on Python 3.8).
TRAINING_IMAGES: tuple[PrebuiltImage, ...] = (
    *(PrebuiltImage(TRAINING, family, f"2-{n}", "3.10", "py310") for family in ("cpu", "gpu") for n in range(12, 18)),
    PrebuiltImage(TRAINING, "tpu", "2-12", "3.8"),
    PrebuiltImage(TRAINING, "tpu", "2-15", "3.10", "cp310"),
)
#: Prediction images tf2-cpu / tf2-gpu 2.1 to 2.15 (the list's re-check could not read the page: a newer
#: version is a warning, not a refusal). Their Python is not in their names.
PREDICTION_IMAGES: tuple[PrebuiltImage, ...] = tuple(
    PrebuiltImage(PREDICTION, family, f"2-{n}", None, source=src.PREBUILT_PREDICTION)
    for family in ("cpu", "gpu") for n in range(1, 16))
DEFAULT_TF_VERSION = "2-17"

#: Prebuilt TensorFlow training images: version -> Python suffix ("" for none), per family.
PREBUILT_TF: dict[str, dict[str, str]] = {
    family: {i.version: i.suffix for i in TRAINING_IMAGES if i.family == family} for family in ("cpu", "gpu", "tpu")}

#: Image alias grammar: `tf-cpu.2-17`, `tf-gpu.2-17`, `tf-tpu.2-15`, or `tf.2-17` (pick per pool).
IMAGE_ALIAS_RE = re.compile(r"^tf(?:-(?P<family>cpu|gpu|tpu))?\.(?P<version>2-\d+)$")
#: A full prebuilt URI, so rules can check the family and version of images given in full.
PREBUILT_URI_RE = re.compile(
    r"^(?P<multi>us|europe|asia)-docker\.pkg\.dev/vertex-ai/training/"
    r"tf-(?P<family>cpu|gpu|tpu)\.(?P<version>2-\d+)(?:\.(?:py|cp)\d+)?:latest$"
)
#: https://cloud.google.com/vertex-ai/docs/training/distributed-training#reduction-server (n1-highcpu-16 is
#: the recommended reducer; reducers' total bandwidth should match chief + workers').
REDUCTION_SERVER_IMAGE = "{multi}-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
REDUCTION_SERVER_DEFAULT_MACHINE = "n1-highcpu-16"


def tf_version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split("-")
    return int(major), int(minor)


def training_image(family: str, version: str) -> PrebuiltImage | None:
    return next((i for i in TRAINING_IMAGES if (i.family, i.version) == (family, version)), None)


def prebuilt_image(image: str | None, hardware: str = "cpu") -> PrebuiltImage | None:
    """The training image row an alias (`tf.` picks by `hardware`) or a full prebuilt URI names; None for
    anything else (an image of the user's, a version Vertex does not publish)."""
    if image is None:
        return training_image(hardware, default_tf_version(hardware))
    found = IMAGE_ALIAS_RE.match(image)
    if found is None:
        found = PREBUILT_URI_RE.match(image)
        if found is None:
            return None
    return training_image(found["family"] or hardware, found["version"])


def prebuilt_image_uri(family: str, version: str, region: str) -> str:
    found = training_image(family, version)
    if found is None:
        raise KeyError(f"tf-{family}.{version}")
    return found.uri(region)


def default_tf_version(family: str) -> str:
    """The version an unset trainer.image gets: DEFAULT_TF_VERSION, or the family's newest if it lacks it."""
    versions = PREBUILT_TF[family]
    return DEFAULT_TF_VERSION if DEFAULT_TF_VERSION in versions else max(versions, key=tf_version_tuple)


def executor_image_uri(image: str | None, hardware: str, region: str) -> str:
    """The image a python-package pool on `hardware` (cpu, gpu, tpu) runs: `trainer.image` as an alias
    (`tf.` picks the family by hardware) → the regional prebuilt URI; left out, each family's default."""
    if image is None:  # no TPU image has DEFAULT_TF_VERSION: each family gets its own default
        return prebuilt_image_uri(hardware, default_tf_version(hardware), region)
    alias = IMAGE_ALIAS_RE.match(image)
    if alias is None:
        return image
    return prebuilt_image_uri(alias["family"] or hardware, alias["version"], region)


def prebuilt_python(uri: str) -> str | None:
    """MAJOR.MINOR of a prebuilt image's Python (tf-gpu.2-17.py310 → 3.10); None for other images."""
    if PREBUILT_URI_RE.match(uri) is None:
        return None
    found = re.search(r"\.(?:py|cp)3(\d+):", uri)
    if found:
        return f"3.{found.group(1)}"
    row = prebuilt_image(uri)
    return row.python if row is not None and not row.suffix else None


def reduction_server_image(region: str) -> str:
    return REDUCTION_SERVER_IMAGE.format(multi=multi_region(region))


__all__ = ["DEFAULT_TF_VERSION", "IMAGE_ALIAS_RE", "IMAGE_REGISTRY", "PREBUILT_TF", "PREBUILT_URI_RE", "PREDICTION",
           "PREDICTION_IMAGES", "PREDICTION_REGISTRY", "REDUCTION_SERVER_DEFAULT_MACHINE", "REDUCTION_SERVER_IMAGE",
           "TRAINING", "TRAINING_IMAGES", "PrebuiltImage", "default_tf_version", "executor_image_uri",
           "prebuilt_image", "prebuilt_image_uri", "prebuilt_python", "reduction_server_image", "tf_version_tuple",
           "training_image"]
