"""What a DiLoCo learner really puts on the wire per training step, for `vtrain estimate`.

Standard library only (the estimate must not import numpy or grpc). The numbers follow the
implementation: per round each learner sends every exchanged tensor once (its delta, encoded with
`compression`) and receives the merged update once, encoded the same way; each message is one
frame per 64 MiB with a protobuf header of at most :data:`HEADER_BYTES`. Heartbeats (about 20
bytes every ~2 s) and the one-off float32 model at registration are left out. The service tests
check these formulas against the bytes the client counts.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Values per float32 scale for the block-quantised codecs.
BLOCK = {"int8": 1024, "int4": 256}
HEADER_BYTES = 96
CHUNK_BYTES = 64 << 20


def encoded_size(size: int, codec: str) -> int:
    """Bytes one tensor of `size` values takes on the wire."""
    if codec == "none":
        return 4 * size
    if codec == "bf16":
        return 2 * size
    if codec not in BLOCK:
        raise ValueError(f"unknown compression {codec!r}")
    blocks = -(-size // BLOCK[codec])
    return 4 * blocks + (size if codec == "int8" else (size + 1) // 2)


def message_bytes(tensor_sizes: Sequence[int], codec: str) -> int:
    """One delta (or update) message: the payload plus one header per frame."""
    payload = sum(encoded_size(n, codec) for n in tensor_sizes)
    return payload + HEADER_BYTES * max(1, -(-payload // CHUNK_BYTES))


def bytes_per_step(params: int | Sequence[int], inner_steps: int, compression: str = "none",
                   fragments: int = 1) -> dict[str, float]:
    """Bytes each learner sends ('up') and receives ('down') per inner step, on average.

    `params` is the total number of exchanged values, or the size of every tensor (more exact for
    the quantised codecs, whose scales are per tensor block). With fragments, each fragment is
    exchanged once per `inner_steps`, so the total is the same and only the peaks are lower.
    """
    sizes = [params] if isinstance(params, int) else list(params)
    headers = HEADER_BYTES * max(0, fragments - 1)  # a header per fragment message
    per_round = message_bytes(sizes, compression) + headers
    return {"up": per_round / inner_steps, "down": per_round / inner_steps,
            "total": 2 * per_round / inner_steps}


def ring_allreduce_bytes_per_step(params: int, workers: int, bytes_per_value: int = 4) -> dict[str, float]:
    """What each worker of a ring all-reduce sends (and receives) per step: 2 (N-1)/N of the gradients."""
    each = 2 * (workers - 1) / workers * params * bytes_per_value if workers > 1 else 0.0
    return {"up": each, "down": each, "total": 2 * each}
