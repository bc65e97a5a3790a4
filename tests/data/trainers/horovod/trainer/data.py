"""Small synthetic images in place of MNIST: 12x12 grey images whose label is the brightest of 10 bands,
the same on every rank (a fixed seed); each rank trains on its shard."""

from __future__ import annotations

import numpy as np

IMAGES = 320
SIDE = 12


def images_and_labels() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    images = rng.random((IMAGES, SIDE, SIDE), dtype=np.float32)
    labels = rng.integers(0, 10, IMAGES)
    for i, label in enumerate(labels):
        images[i, :, label] += 1.0  # a learnable signal: column `label` is bright
    return images, labels.astype(np.int64)
