"""The network model: will a Reduction Server pay for this job? An α–β model of gradient exchange, and its inputs.

Pure math, independent of the job file: the CLI (`vtrain estimate`) and
`vtrain render`'s hint turn a JobConfig into the few numbers used here.

The model, and the assumptions it rests on:

* n = worker replicas (pool 0 chief + pool 1 workers), one VM each. The VM's
  NIC is the bottleneck; NVLink/PCIe inside a VM is taken as free.
* S = gradient bytes per step = parameters × bytes of the gradient dtype.
* Ring all-reduce (NCCL's ring) spans every GPU, N = n × GPUs per VM ranks, so
  each VM's NIC sends 2(N−1)/N · S per step in 2(N−1) latency-bound hops:
  ``t = 2(N−1)α + 2(N−1)/N · S/B_w``. With one GPU per VM, N = n, which is the
  textbook formula. Counting GPUs, not VMs, is what NCCL does and is why the
  published Vertex BERT result (8 × 8 A100, ~1.8×) beats the VM-level
  ceiling 2·7/8 = 1.75.
* Reduction Server: GPUs reduce inside the VM first, then each VM sends S
  and receives S once, split across m reducers; each reducer moves n·S/m:
  ``t = 2α + max(S/B_w, n·S/(m·B_r))`` — the second term only while the pool
  is under-sized (m·reducer Gbps < Σ worker Gbps, Vertex's sizing rule).
* No overlap of communication with compute: step = compute + communication.
  Frameworks overlap some of it, so real speed-ups are at most these.
* α (per-hop latency) defaults to 30 µs: same-zone VM round trips are a few
  tens of µs, and NCCL's socket transport adds its own per-step cost.

A single replica exchanges nothing over the network: both methods cost 0 s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass

from vtrain.errors import EstimateError

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2}
DEFAULT_ALPHA_S = 30e-6
#: Compute must be busy at least this fraction of a step for a method to "keep up".
TARGET_UTILISATION = 0.9
DEFAULT_INNER_STEPS = (10, 100, 500)
STEPS_PER_REPORT = 1000
#: A quadrillion parameters: far past any model, and well inside what the float math can carry.
MAX_PARAMS = 10**15


# --------------------------------------------------------------------------- parsing

_SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
_PARAMS_RE = re.compile(r"^\s*(?P<num>\d[\d_]*(?:\.\d+)?(?:e\d+)?)\s*(?P<unit>[kmbgt]?)\s*$", re.I)


def parse_params(text: str) -> int:
    """`340M`, `1.3B`, `7e9`, `125_000_000` -> a parameter count (≥ 1)."""
    match = _PARAMS_RE.match(str(text))
    if not match:
        raise EstimateError(f"cannot read {text!r} as a parameter count (examples: 340M, 1.3B, 7e9, 125000000)")
    value = float(match["num"].replace("_", "")) * _SCALE[match["unit"].lower()]
    if not math.isfinite(value) or value > MAX_PARAMS:
        raise EstimateError(f"{text!r} is too large to be a parameter count (at most {MAX_PARAMS:.0e}, "
                            "1,000 times the largest models trained)")
    if value < 1:
        raise EstimateError(f"{text!r} is less than one parameter")
    return int(round(value))


def parse_seconds(text: str) -> float:
    """`0.4s`, `400ms`, `30us`, `0.4` (seconds), `2m` -> seconds (≥ 0), by vtrain's one duration grammar."""
    from vtrain.durations import DurationError
    from vtrain.durations import parse_seconds as seconds

    try:
        return seconds(text)
    except DurationError as err:
        raise EstimateError(f"cannot read {str(text)[:80]!r} as a duration ({err})") from None


def gradient_bytes(params: int, dtype: str = "fp32") -> int:
    if dtype not in DTYPE_BYTES:
        raise EstimateError(f"gradient dtype {dtype!r} is not one of {', '.join(DTYPE_BYTES)}")
    return params * DTYPE_BYTES[dtype]


# --------------------------------------------------------------------------- the model


def _bytes_per_s(gbps: float) -> float:
    return gbps * 1e9 / 8


def _covers(reducers: int, reducer_gbps: float, sizing_gbps: float) -> bool:
    """m · reducer Gbps ≥ Σ worker Gbps, forgiving float noise (0.1 × 3 covers 0.3)."""
    return reducers * reducer_gbps >= sizing_gbps * (1 - 1e-9)


def recommended_reducers(sizing_gbps: float, reducer_gbps: float) -> int:
    """Vertex's rule: the fewest reducers whose summed bandwidth covers Σ worker bandwidth."""
    m = max(1, math.floor(sizing_gbps / reducer_gbps))
    while not _covers(m, reducer_gbps, sizing_gbps):
        m += 1
    return m


def ring_seconds(workers: int, ranks: int, worker_gbps: float, grad_bytes: float, alpha_s: float) -> float:
    if workers < 2:
        return 0.0
    return 2 * (ranks - 1) * alpha_s + 2 * (ranks - 1) / ranks * grad_bytes / _bytes_per_s(worker_gbps)


def reduction_server_seconds(
    workers: int,
    worker_gbps: float,
    reducers: int,
    reducer_gbps: float,
    grad_bytes: float,
    alpha_s: float,
    sizing_gbps: float | None = None,
) -> tuple[float, bool]:
    """Communication seconds per step and whether the reducers (not the workers) set the pace."""
    if workers < 2:
        return 0.0, False
    sizing = workers * worker_gbps if sizing_gbps is None else sizing_gbps
    worker_time = grad_bytes / _bytes_per_s(worker_gbps)
    reducer_time = workers * grad_bytes / (reducers * _bytes_per_s(reducer_gbps))
    bound = not _covers(reducers, reducer_gbps, sizing) and reducer_time > worker_time
    return 2 * alpha_s + (reducer_time if bound else worker_time), bound


@dataclass(frozen=True)
class Exchange:
    """One way of exchanging gradients, for the whole step and per 1,000 steps."""

    method: str
    bytes_sent_per_worker: float
    comm_seconds: float
    step_seconds: float
    steps_per_sec: float | None  # None: nothing to wait for (one replica, no compute given)
    reducers: int
    reducer_bound: bool
    worker_hours: float  # per 1,000 steps, pools 0+1 VMs
    gpu_hours: float
    reducer_hours: float

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        if self.method == "ring":
            for key in ("reducers", "reducer_bound", "reducer_hours"):
                out.pop(key)
        return out


def _exchange(
    method: str, sent: float, comm: float, compute: float | None, n: int, gpus: int, m: int, bound: bool
) -> Exchange:
    step = comm + (compute or 0.0)
    hours = STEPS_PER_REPORT * step / 3600
    return Exchange(
        method=method,
        bytes_sent_per_worker=sent,
        comm_seconds=comm,
        step_seconds=step,
        steps_per_sec=1 / step if step > 0 else None,
        reducers=m,
        reducer_bound=bound,
        worker_hours=n * hours,
        gpu_hours=n * gpus * hours,
        reducer_hours=m * hours,
    )


@dataclass(frozen=True)
class Estimate:
    workers: int
    gpus_per_worker: int
    ring_ranks: int
    worker_gbps: float
    reducer_gbps: float
    gradient_bytes: float
    step_compute_s: float | None
    alpha_s: float
    ring: Exchange
    reduction_server: Exchange
    recommended_reducers: int
    at_recommended: Exchange  # the Reduction Server sized by the rule
    min_reducers_to_beat_ring: int | None  # None: no pool size beats the ring
    speedup: float  # reduction server steps/sec over ring steps/sec
    ceiling: float  # 2(N−1)/N: bandwidth-only speed-up with enough reducers
    #: A reducer-hour may cost up to this many worker-VM-hours before reducers stop paying (0: never pay).
    break_even_worker_hours: float | None

    def to_dict(self) -> dict[str, object]:
        out = {k: v for k, v in asdict(self).items() if not isinstance(v, dict)}
        out["ring"] = self.ring.to_dict()
        out["reduction_server"] = self.reduction_server.to_dict()
        out["at_recommended"] = self.at_recommended.to_dict()
        return out


def estimate(
    workers: int,
    worker_gbps: float,
    reducers: int,
    reducer_gbps: float,
    gradient_bytes: float,
    step_compute_s: float | None = None,
    alpha_s: float = DEFAULT_ALPHA_S,
    gpus_per_worker: int = 0,
    sizing_gbps: float | None = None,
) -> Estimate:
    """Ring all-reduce vs a Reduction Server of `reducers` VMs, for one step.

    `sizing_gbps` is Σ worker bandwidth for the sizing rule when the chief and
    workers differ (then pass the slowest NIC as `worker_gbps`); it defaults
    to workers × worker_gbps.
    """
    _check(workers, worker_gbps, reducers, reducer_gbps, gradient_bytes, step_compute_s, alpha_s)
    n, s, g = workers, float(gradient_bytes), max(0, gpus_per_worker)
    ranks = n * max(1, g)
    sizing = n * worker_gbps if sizing_gbps is None else sizing_gbps
    ring_sent = 2 * (ranks - 1) / ranks * s if n > 1 else 0.0
    rs_sent = s if n > 1 else 0.0
    ring = _exchange("ring", ring_sent, ring_seconds(n, ranks, worker_gbps, s, alpha_s), step_compute_s, n, g, 0, False)

    def server(m: int) -> Exchange:
        comm, bound = reduction_server_seconds(n, worker_gbps, m, reducer_gbps, s, alpha_s, sizing)
        return _exchange("reduction_server", rs_sent, comm, step_compute_s, n, g, m, bound)

    rs = server(reducers)
    rec = recommended_reducers(sizing, reducer_gbps)
    speedup = ring.step_seconds / rs.step_seconds if rs.step_seconds > 0 else 1.0
    return Estimate(
        workers=n,
        gpus_per_worker=g,
        ring_ranks=ranks,
        worker_gbps=worker_gbps,
        reducer_gbps=reducer_gbps,
        gradient_bytes=s,
        step_compute_s=step_compute_s,
        alpha_s=alpha_s,
        ring=ring,
        reduction_server=rs,
        recommended_reducers=rec,
        at_recommended=server(rec),
        min_reducers_to_beat_ring=_min_reducers(ring.comm_seconds, server, rec),
        speedup=speedup,
        ceiling=2 * (ranks - 1) / ranks if n > 1 else 1.0,
        break_even_worker_hours=max(0.0, (speedup - 1) * n / reducers) if n > 1 else None,
    )


def _min_reducers(ring_comm: float, server: Callable[[int], Exchange], rec: int) -> int | None:
    """Smallest pool that beats the ring (binary search: comm time falls as m grows)."""
    if server(rec).comm_seconds >= ring_comm:
        return None
    lo, hi = 1, rec
    while lo < hi:
        mid = (lo + hi) // 2
        if server(mid).comm_seconds < ring_comm:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _check(
    workers: int,
    worker_gbps: float,
    reducers: int,
    reducer_gbps: float,
    grad_bytes: float,
    compute: float | None,
    alpha_s: float,
) -> None:
    if workers < 1:
        raise EstimateError(f"the job has {workers} worker replicas (pools 0+1); need at least 1")
    if reducers < 1:
        raise EstimateError(f"a Reduction Server needs at least 1 reducer, got {reducers}")
    for name, value in (("worker bandwidth", worker_gbps), ("reducer bandwidth", reducer_gbps)):
        if not value > 0:
            raise EstimateError(f"{name} must be positive, got {value} Gbps")
    if not grad_bytes > 0:
        raise EstimateError(f"gradient size must be positive, got {grad_bytes} bytes")
    if compute is not None and not compute >= 0:
        raise EstimateError(f"step compute time must be ≥ 0 s, got {compute}")
    if not alpha_s >= 0:
        raise EstimateError(f"per-hop latency α must be ≥ 0 s, got {alpha_s}")
