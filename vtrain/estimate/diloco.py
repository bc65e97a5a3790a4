"""What DiLoCo moves over the network, per learner and per inner step: the one place to plug in the
numbers of vtrain's DiLoCo implementation.

The layout (ARCHITECTURE.md): pool 0 runs the syncer; each learner trains H inner steps alone, then
sends its pseudo-gradient (the change of its weights over the round) and receives the merged global
model. Per round a learner therefore sends S and receives S, with S = parameters × bytes per value,
and the syncer receives and sends n·S for n learners. Per inner step, divide by H.

:func:`diloco_traffic` is what `vtrain estimate` compares against ring all-reduce and the Reduction
Server. When the implementation compresses the exchange (bf16 or int8 pseudo-gradients, streaming
fragments) or adds per-round overhead (manifest, heartbeats), change ``bytes_per_value`` or
``overhead_bytes`` at the call site, or this function, and every comparison follows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from vtrain.errors import EstimateError

#: Bytes per value of the exchanged pseudo-gradient and model (fp32 until the implementation says otherwise).
DEFAULT_BYTES_PER_VALUE = 4


@dataclass(frozen=True)
class DilocoTraffic:
    """Network traffic of one DiLoCo learner and of the syncer, per inner step."""

    learners: int
    inner_steps: int
    sent_per_learner_per_step: float  # bytes up to the syncer, per inner step
    received_per_learner_per_step: float  # bytes down from the syncer, per inner step
    syncer_bytes_per_step: float  # bytes in (= bytes out) at the syncer, per inner step
    comm_seconds_per_step: float  # round time / H: the slower of a learner's and the syncer's NIC

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def diloco_bytes_per_learner_per_step(
    params: int,
    inner_steps: int,
    bytes_per_value: float = DEFAULT_BYTES_PER_VALUE,
    overhead_bytes: float = 0.0,
    compression: str | None = None,
) -> float:
    """Bytes one learner sends per inner step: its pseudo-gradient once every H steps (it receives as much).

    With `compression` (a job's `diloco.compression`: none, bf16, int8, int4) the number is what
    vtrain's implementation really puts on the wire (:mod:`vtrain.diloco.traffic`: the codec's
    scales and the frame headers included); without, the plain `bytes_per_value` model."""
    if inner_steps < 1:
        raise EstimateError(f"DiLoCo inner steps must be at least 1, got {inner_steps}")
    if compression is not None:
        from vtrain.diloco.traffic import bytes_per_step

        return bytes_per_step(params, inner_steps, compression)["up"] + overhead_bytes / inner_steps
    return (params * bytes_per_value + overhead_bytes) / inner_steps


def diloco_traffic(
    params: int,
    learners: int,
    inner_steps: int,
    learner_gbps: float,
    syncer_gbps: float,
    alpha_s: float = 0.0,
    bytes_per_value: float = DEFAULT_BYTES_PER_VALUE,
    compression: str | None = None,
) -> DilocoTraffic:
    """Traffic and network seconds per inner step; NICs are full duplex, so sending and receiving overlap."""
    per_step = diloco_bytes_per_learner_per_step(params, inner_steps, bytes_per_value, compression=compression)
    syncer = learners * per_step
    learner_s = per_step * 8 / (learner_gbps * 1e9)
    syncer_s = syncer * 8 / (syncer_gbps * 1e9)
    return DilocoTraffic(
        learners=learners,
        inner_steps=inner_steps,
        sent_per_learner_per_step=per_step,
        received_per_learner_per_step=per_step,
        syncer_bytes_per_step=syncer,
        comm_seconds_per_step=max(learner_s, syncer_s) + 2 * alpha_s / inner_steps,
    )
