"""The syncer's numbers: the global model per fragment, the outer optimizer, catch-up and checkpoints.

Pure numpy, no sockets. One outer step for fragment f merges the learners' deltas
(anchor − local parameters after H inner steps), each weighted by the examples it processed
(or equally), then applies outer SGD with Nesterov momentum to trainable tensors:

    g = Σ wᵢ δᵢ        v ← μ v + g        θ ← θ − lr (g + μ v)

and the plain weighted average to non-trainable ones (θ ← θ − g: the mean of the learners'
values). The global model kept here is exactly what the learners hold: the step is sent as an
encoded update, the syncer applies the *decoded* update to itself, and keeps the quantisation
error as a residual folded into the next round's update (so compressed downlinks never drift).
A learner a few rounds behind gets the missed updates (kept for `max_staleness` rounds); a new,
restarted or further-behind learner gets a float32 snapshot.
"""

from __future__ import annotations

import io
import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from vtrain.diloco import codec
from vtrain.diloco.codec import TensorSpec
from vtrain.diloco.settings import Settings

FORMAT = 1


@dataclass
class Fragment:
    indices: list[int]
    round: int = 0
    history: deque[tuple[int, bytes]] = field(default_factory=deque)


class Outer:
    """Global parameters, outer momentum and downlink residuals for every fragment."""

    def __init__(self, manifest: Sequence[TensorSpec], values: Sequence[np.ndarray], settings: Settings) -> None:
        if len(values) != len(manifest):
            raise ValueError(f"{len(values)} tensors for a manifest of {len(manifest)}")
        self.manifest = list(manifest)
        self.hash = codec.manifest_hash(self.manifest)
        self.settings = settings
        self.params = [np.array(v, dtype=np.float32).reshape(t.shape) for v, t in zip(values, manifest, strict=True)]
        self.momentum = [np.zeros_like(p) for p in self.params]
        self.residual = [np.zeros_like(p) for p in self.params]
        self.fragments = [Fragment(ix) for ix in codec.fragments(self.manifest, settings.fragments)]

    def specs(self, f: int) -> list[TensorSpec]:
        return [self.manifest[i] for i in self.fragments[f].indices]

    @property
    def rounds(self) -> list[int]:
        return [frag.round for frag in self.fragments]

    def merge(self, f: int, contributions: Sequence[tuple[Sequence[np.ndarray], float]],
              full_weight: float = 0.0) -> bytes:
        """One outer step of fragment f from (deltas, weight) pairs; returns the encoded update.

        `full_weight` is what a round with every live learner would weigh: a merge of part of them
        takes a proportionally smaller step, so more, smaller merges (a quorum, stragglers merged
        late) move the model as far as the same work merged at once, not N/k times further.
        """
        frag, s = self.fragments[f], self.settings
        total = max(float(sum(w for _, w in contributions)), full_weight)
        if not contributions or total <= 0:
            raise ValueError("a merge needs at least one contribution with a positive weight")
        update = []
        for k, i in enumerate(frag.indices):
            g = np.zeros_like(self.params[i])
            for deltas, w in contributions:
                g += np.float32(w / total) * np.asarray(deltas[k], np.float32).reshape(g.shape)
            if self.manifest[i].trainable:
                self.momentum[i] = np.float32(s.outer_momentum) * self.momentum[i] + g
                step = np.float32(s.outer_lr) * (g + np.float32(s.outer_momentum) * self.momentum[i])
            else:
                step = g
            update.append(self.residual[i] - step)
        payload = codec.pack(update, s.compression)
        decoded = codec.unpack(payload, s.compression, self.specs(f))
        for k, i in enumerate(frag.indices):
            self.params[i] = self.params[i] + decoded[k]
            self.residual[i] = update[k] - decoded[k]
        frag.round += 1
        frag.history.append((frag.round, payload))
        while len(frag.history) > max(1, s.max_staleness):
            frag.history.popleft()
        return payload

    def catch_up(self, f: int, base_round: int) -> list[tuple[int, bytes]] | None:
        """The encoded updates that take a learner from base_round to now, or None: send a snapshot."""
        frag = self.fragments[f]
        if base_round > frag.round:
            return None  # the learner is ahead of us: we restarted from an older checkpoint
        missing = [(r, p) for r, p in frag.history if r > base_round]
        if len(missing) != frag.round - base_round:
            return None
        return missing

    def snapshot(self, f: int) -> bytes:
        return codec.pack([self.params[i] for i in self.fragments[f].indices], "none")

    # ------------------------------------------------------------------ checkpoints

    def to_bytes(self, extra: dict[str, object] | None = None) -> bytes:
        meta = {"format": FORMAT, "hash": self.hash, "rounds": self.rounds, "fragments": len(self.fragments),
                "manifest": [[t.name, t.dtype, list(t.shape), t.trainable] for t in self.manifest], **(extra or {})}
        arrays: dict[str, np.ndarray] = {"meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
        for i in range(len(self.manifest)):
            arrays[f"param{i}"], arrays[f"mom{i}"] = self.params[i], self.momentum[i]
            arrays[f"res{i}"] = self.residual[i]
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, settings: Settings) -> tuple[Outer, dict[str, object]]:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            if meta.get("format") != FORMAT:
                raise ValueError(f"checkpoint format {meta.get('format')} is not {FORMAT}")
            manifest = [TensorSpec(n, d, tuple(s), bool(t)) for n, d, s, t in meta["manifest"]]
            outer = cls(manifest, [z[f"param{i}"] for i in range(len(manifest))], settings)
            for i in range(len(manifest)):
                outer.momentum[i], outer.residual[i] = z[f"mom{i}"].copy(), z[f"res{i}"].copy()
        if len(outer.fragments) != meta["fragments"]:
            raise ValueError(f"checkpoint has {meta['fragments']} fragments, the job now asks for "
                             f"{len(outer.fragments)}")
        for frag, r in zip(outer.fragments, meta["rounds"], strict=True):
            frag.round = int(r)
        return outer, meta
