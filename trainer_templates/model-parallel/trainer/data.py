"""Synthetic input, the same examples whatever the mesh: row r of step s comes from the seed (seed, s, r).

Each client makes only the rows its devices hold (runtime.dtensor_layouts.client_rows), so no
client builds the global batch; a file-based pipeline would read the same rows (e.g. tf.data
`shard`/`skip` by row index). Targets: y = x . w + 0.5 + noise, w fixed, so the loss falls quickly.
"""

from __future__ import annotations

import numpy as np


def rows(seed: int, step: int, start: int, stop: int, features: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows [start, stop) of the global batch of `step`: (x [n, features], y [n, 1]), float32."""
    w = np.linspace(-1.0, 1.0, features, dtype=np.float32)
    x = np.empty((stop - start, features), np.float32)
    noise = np.empty((stop - start,), np.float32)
    for i, row in enumerate(range(start, stop)):
        rng = np.random.default_rng([seed, step, row])
        x[i] = rng.standard_normal(features)
        noise[i] = 0.1 * rng.standard_normal()
    return x, (x @ w + 0.5 + noise)[:, None].astype(np.float32)
