"""Tensors on the wire: the manifest (what is exchanged, and its hash), fragments, and compression.

numpy only. Every exchange is named by a manifest hash, never by position alone: a learner whose
model differs from the syncer's (another architecture, another variable order) is refused with
both hashes instead of corrupting the global model silently.

What is exchanged: every floating-point variable. Trainable ones get the outer optimizer;
non-trainable ones (BatchNorm moving mean/variance, ...) are averaged across learners (weighted
like the deltas) so the global model's statistics match its weights. Integer variables (step
counters, RNG state) and the inner optimizer's slots stay on each learner.

Compression (the same codec both ways): `none` float32; `bf16` round-to-nearest-even upper 16
bits; `int8` / `int4` symmetric, one float32 scale per block (1024 / 256 values) so one outlier
costs only its block's precision. Encoding is deterministic, so every learner that applies the
same bytes to the same anchor holds bit-identical global parameters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vtrain.diloco.traffic import BLOCK, encoded_size

__all__ = ["BLOCK", "TensorSpec", "decode", "encode", "encoded_size", "fragments", "manifest_hash", "pack", "unpack"]
LEVELS = {"int8": 127, "int4": 7}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]
    trainable: bool

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


def manifest_hash(manifest: Sequence[TensorSpec]) -> str:
    digest = hashlib.sha256()
    for t in manifest:
        digest.update(f"{t.name}|{t.dtype}|{','.join(map(str, t.shape))}|{int(t.trainable)};".encode())
    return digest.hexdigest()[:32]


def fragments(manifest: Sequence[TensorSpec], count: int) -> list[list[int]]:
    """Tensor indices per fragment, balanced by size (largest first into the lightest fragment).

    Deterministic, so the syncer and every learner agree. More fragments than tensors are
    folded down to one tensor per fragment.
    """
    count = max(1, min(count, len(manifest)))
    bins: list[list[int]] = [[] for _ in range(count)]
    load = [0] * count
    for i in sorted(range(len(manifest)), key=lambda i: (-manifest[i].size, i)):
        lightest = min(range(count), key=lambda b: (load[b], b))
        bins[lightest].append(i)
        load[lightest] += manifest[i].size
    return [sorted(b) for b in bins]


def encode(array: np.ndarray, codec: str) -> bytes:
    flat = np.ascontiguousarray(array, dtype=np.float32).ravel()
    if codec == "none":
        return flat.tobytes()
    if codec == "bf16":
        bits = flat.view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return rounded.astype(np.uint16).tobytes()
    block, levels = BLOCK[codec], LEVELS[codec]
    pad = (-flat.size) % block
    blocks = np.concatenate([flat, np.zeros(pad, np.float32)]).reshape(-1, block)
    scale = (np.abs(blocks).max(axis=1) / levels).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))
    q = np.clip(np.rint(blocks / safe[:, None]), -levels, levels).astype(np.int8).ravel()[: flat.size]
    if codec == "int4":
        nibbles = (q.astype(np.int16) & 0xF).astype(np.uint8)
        if nibbles.size % 2:
            nibbles = np.concatenate([nibbles, np.zeros(1, np.uint8)])
        q = (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)
    packed: bytes = scale.tobytes() + q.tobytes()
    return packed


def decode(data: bytes | memoryview, codec: str, size: int) -> np.ndarray:
    """A flat float32 array of `size` values (reshape to the tensor's shape)."""
    if len(data) != encoded_size(size, codec):
        raise ValueError(f"{codec} tensor of {size} values needs {encoded_size(size, codec)} bytes, got {len(data)}")
    if codec == "none":
        copied: np.ndarray = np.frombuffer(data, np.float32).copy()
        return copied
    if codec == "bf16":
        widened: np.ndarray = (np.frombuffer(data, np.uint16).astype(np.uint32) << 16).view(np.float32)
        return widened
    block = BLOCK[codec]
    blocks = -(-size // block)
    scale = np.frombuffer(data, np.float32, count=blocks)
    body = np.frombuffer(data, np.uint8, offset=4 * blocks)
    if codec == "int4":
        low = (body & 0xF).astype(np.int8)
        high = (body >> 4).astype(np.int8)
        q = np.empty(2 * body.size, np.int8)
        q[0::2], q[1::2] = low, high
        q = np.where(q > 7, q - 16, q).astype(np.int8)[:size]
    else:
        q = body.view(np.int8)
    values = q.astype(np.float32).reshape(-1)
    padded = np.zeros(blocks * block, np.float32)
    padded[:size] = values
    return (padded.reshape(blocks, block) * scale[:, None]).ravel()[:size]


def pack(arrays: Sequence[np.ndarray], codec: str) -> bytes:
    return b"".join(encode(a, codec) for a in arrays)


def unpack(data: bytes | memoryview, codec: str, specs: Sequence[TensorSpec]) -> list[np.ndarray]:
    out, offset = [], 0
    view = memoryview(data)
    for spec in specs:
        n = encoded_size(spec.size, codec)
        out.append(decode(view[offset:offset + n], codec, spec.size).reshape(spec.shape))
        offset += n
    if offset != len(view):
        raise ValueError(f"payload has {len(view) - offset} bytes more than the manifest describes")
    return out
