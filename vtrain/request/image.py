"""The image a pool runs on: its base (:func:`base_image`) and the entry point of the image vtrain builds on it.

A pool's base is the image a python-package pool would run (`trainer.image`: an alias picks the
regional prebuilt image by the pool's hardware, so a CPU syncer and GPU workers get one image
each). The image name ``REPOSITORY:TAG`` on each base is planned from the files by the artifacts
planner (:mod:`vtrain.trainer.artifacts`) and handed to the request, so `render`, `submit` and `diff`
agree on it while the request reads no file. The image holds no environment of the job's and no
arguments: both stay in each pool's containerSpec, so changing an env value or a pool's args
rebuilds nothing. The Reduction Server pool keeps Google's image.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vtrain import catalog

if TYPE_CHECKING:
    from vtrain.jobfile.model import JobConfig, PoolConfig

#: The interpreter the image's entry point names (every prebuilt TensorFlow image has it on PATH).
IMAGE_PYTHON = "python3"


def base_image(config: JobConfig, pool: PoolConfig) -> str:
    """The base of `pool`'s image: what its executor image would be as a python-package pool (its own
    `image`, else trainer.image)."""
    return catalog.executor_image_uri(pool.image or config.trainer.image, pool.hardware, config.region)
