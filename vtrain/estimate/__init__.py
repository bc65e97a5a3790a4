"""The performance model behind `vtrain estimate` (and `vtrain render`'s hint), as one public API.

- :mod:`.model`  the α–β model of gradient exchange: ring all-reduce vs a Reduction Server
- :mod:`.costs`  money per 1,000 steps from the user's prices; what DiLoCo would need
- :mod:`.jobs`   a loaded job file → the numbers the model needs; the render hint

Pure: no I/O, no CLI flags; the command (`vtrain.commands.estimate`) parses and prints.
"""

from __future__ import annotations

from vtrain.errors import EstimateError
from vtrain.estimate.costs import Costs, LowComm, costs, low_communication
from vtrain.estimate.jobs import JobCluster, estimate_hint, job_cluster
from vtrain.estimate.model import (
    DEFAULT_ALPHA_S,
    DEFAULT_INNER_STEPS,
    DTYPE_BYTES,
    STEPS_PER_REPORT,
    TARGET_UTILISATION,
    Estimate,
    Exchange,
    estimate,
    gradient_bytes,
    parse_params,
    parse_seconds,
    recommended_reducers,
    reduction_server_seconds,
    ring_seconds,
)

__all__ = [
    "DEFAULT_ALPHA_S",
    "DEFAULT_INNER_STEPS",
    "DTYPE_BYTES",
    "STEPS_PER_REPORT",
    "TARGET_UTILISATION",
    "Costs",
    "Estimate",
    "EstimateError",
    "Exchange",
    "JobCluster",
    "LowComm",
    "costs",
    "estimate",
    "estimate_hint",
    "gradient_bytes",
    "job_cluster",
    "low_communication",
    "parse_params",
    "parse_seconds",
    "recommended_reducers",
    "reduction_server_seconds",
    "ring_seconds",
]
