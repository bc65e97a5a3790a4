"""The distribution advisor behind `vtrain estimate` (and `vtrain render`'s hint), as one public API.

- :mod:`.model`     the α–β model of gradient exchange: ring all-reduce vs a Reduction Server
- :mod:`.costs`     money per 1,000 steps from the user's prices; what low-communication training needs
- :mod:`.prices`    the user's price file and what a cluster costs per hour by it
- :mod:`.memory`    training state + activations per replica against the accelerator's memory
- :mod:`.precision` which mixed-precision policy the hardware supports and what it changes
- :mod:`.diloco`    DiLoCo's bytes per learner per step (the plug point for the implementation's numbers)
- :mod:`.advice`    which parallelism: single machine, ring, Reduction Server, DiLoCo, model parallel
- :mod:`.jobs`      a loaded job file → the numbers the model needs; the render hint
- :mod:`.report`    all of it for one job (:func:`advise`), and the documented JSON
- :mod:`.text`      the same as text
- :mod:`.fromrun`   a rehearsal's profiles (`vtrain local`'s run folder) → measured inputs, and what is wrong with a run
- :mod:`.rehearsal` the advice from a run: flags over measurements over defaults, the utilisation range

Pure apart from reading the price file: no CLI flags here (errors name values, not flags);
the command (`vtrain.commands.estimate`) parses flags and prints.
"""

from __future__ import annotations

from vtrain.errors import EstimateError
from vtrain.estimate.advice import KINDS, Recommendation, recommend
from vtrain.estimate.costs import Costs, LowComm, costs, low_communication, verdict_line
from vtrain.estimate.diloco import DilocoTraffic, diloco_bytes_per_learner_per_step, diloco_traffic
from vtrain.estimate.fromrun import Run, Source, last_run, load_run
from vtrain.estimate.jobs import JobCluster, estimate_hint, job_cluster
from vtrain.estimate.memory import (
    OPTIMIZER_SLOTS,
    PRECISIONS,
    USABLE_FRACTION,
    Device,
    Fit,
    MemoryNeed,
    fit,
    memory_need,
    parse_bytes,
    pool_device,
)
from vtrain.estimate.network import (
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
from vtrain.estimate.precision import PrecisionAdvice, precision_advice
from vtrain.estimate.prices import Prices, cluster_prices, load_prices
from vtrain.estimate.rehearsal import RunAdvice, advise_from_run, format_from_run
from vtrain.estimate.report import SCHEMA_VERSION, Inputs, Report, advise
from vtrain.estimate.text import format_report

__all__ = [
    "DEFAULT_ALPHA_S",
    "DEFAULT_INNER_STEPS",
    "DTYPE_BYTES",
    "KINDS",
    "OPTIMIZER_SLOTS",
    "PRECISIONS",
    "SCHEMA_VERSION",
    "STEPS_PER_REPORT",
    "TARGET_UTILISATION",
    "USABLE_FRACTION",
    "Costs",
    "Device",
    "DilocoTraffic",
    "Estimate",
    "EstimateError",
    "Exchange",
    "Fit",
    "Inputs",
    "JobCluster",
    "LowComm",
    "MemoryNeed",
    "PrecisionAdvice",
    "Prices",
    "Recommendation",
    "Report",
    "Run",
    "RunAdvice",
    "Source",
    "advise",
    "advise_from_run",
    "cluster_prices",
    "costs",
    "diloco_bytes_per_learner_per_step",
    "diloco_traffic",
    "estimate",
    "estimate_hint",
    "fit",
    "format_from_run",
    "format_report",
    "gradient_bytes",
    "job_cluster",
    "last_run",
    "load_run",
    "load_prices",
    "low_communication",
    "memory_need",
    "parse_bytes",
    "parse_params",
    "parse_seconds",
    "pool_device",
    "precision_advice",
    "recommend",
    "recommended_reducers",
    "reduction_server_seconds",
    "ring_seconds",
    "verdict_line",
]
