"""Where a person states what vtrain cannot read from an image's base, in the words of whatever builds it.

A trainer image is built from a job file's ``trainer.build``; the launcher image from `vtrain package --launcher`'s
flags (and :func:`vtrain.pipelines.launcher_image`'s keywords). The builder's errors that ask for a value (the
base's Python version, its wheel platform, a requirement to add) name the setting of the one that builds it:
`--launcher` has no ``trainer.build.platform``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImageSettings:
    """The names an error gives for each value a builder may be told (defaults: a job file's trainer.build)."""

    python_version: str = "trainer.build.python_version"
    platform: str = "trainer.build.platform"
    requirements: str | None = "trainer.build.requirements"  # None: the image's requirements are vtrain's own


__all__ = ["ImageSettings"]
