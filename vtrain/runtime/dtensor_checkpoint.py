"""Sharded checkpoints for DTensor variables: each client writes and reads only its own pieces.

    ckpt = runtime.ShardedCheckpoint({"w1": w1, "b1": b1, ...}, mesh)   # directory: checkpoint_dir()/dtensor
    step = ckpt.restore()            # 0 when there is none; every client calls it
    ...
    ckpt.save(step)                  # every client, at the same steps

Layout on disk: ``<directory>/step-<N>/client-<k>-of-<n>.npz``, one file per client holding the
pieces its devices hold (`unpack` order) and a JSON record of the mesh, each variable's layout and
shape, and the step. Each file is written under a temporary name and renamed into place (atomic on a
local disk, one object on Cloud Storage), and a step counts only when every client's file is there,
so a replica killed mid-save leaves the previous step to resume from; on restore each client drops its
pieces of any newer, unfinished step. Each client prunes its own pieces of steps older than the
newest ``max_to_keep`` complete ones, so no step another client may still need is ever deleted.

Why per-client files rather than ``tf.train.Checkpoint`` of DVariables (whose DTensor path was not
tried here): they need no collective to save or restore and read the same from a local disk and
gs://. The directory must be one all clients see (AIP_CHECKPOINT_DIR is): completeness is checked
there. A restore with another mesh or layout is refused with both named (the pieces would not fit);
gather the model (:func:`.dtensor_layouts.gather`) to change it.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from vtrain.errors import RuntimeMismatch
from vtrain.runtime.dtensor import client_id, mesh_dims, num_clients
from vtrain.runtime.dtensor_env import format_mesh
from vtrain.runtime.outputs import checkpoint_dir, join

log = logging.getLogger("vtrain.runtime")

_STEP = re.compile(r"step-(\d+)\Z")
_META = "__vtrain_meta__"


def _layout_text(variable: Any) -> str:
    from tensorflow.experimental import dtensor

    return ",".join(dtensor.fetch_layout(variable.read_value()).sharding_specs)


class ShardedCheckpoint:
    """Save and restore `variables` (name -> DVariable) on every client, each client its own pieces."""

    def __init__(self, variables: Mapping[str, Any], mesh: Any, directory: str | None = None,
                 max_to_keep: int = 2) -> None:  # fmt: skip
        self.variables = dict(variables)
        self.mesh = mesh
        self.directory = directory or join(checkpoint_dir(), "dtensor")
        self.max_to_keep = max(1, max_to_keep)
        self.client, self.clients = client_id(), num_clients()

    # ---- what is on disk
    def _file(self, step: int, client: int | None = None) -> str:
        k = self.client if client is None else client
        return join(self.directory, f"step-{step}", f"client-{k}-of-{self.clients}.npz")

    def _steps(self) -> list[int]:
        import tensorflow as tf

        if not tf.io.gfile.isdir(self.directory):
            return []
        found = (_STEP.match(name.rstrip("/")) for name in tf.io.gfile.listdir(self.directory))
        return sorted(int(m.group(1)) for m in found if m)

    def complete_steps(self) -> list[int]:
        """Steps every client has finished writing, oldest first."""
        import tensorflow as tf

        return [s for s in self._steps() if all(tf.io.gfile.exists(self._file(s, k)) for k in range(self.clients))]

    def latest(self) -> int | None:
        steps = self.complete_steps()
        return steps[-1] if steps else None

    # ---- save / restore
    def _meta(self, step: int) -> dict[str, Any]:
        return {
            "step": int(step),
            "client": self.client,
            "clients": self.clients,
            "mesh": format_mesh(mesh_dims(self.mesh)),
            "variables": {name: {"layout": _layout_text(v), "shape": [int(d) for d in v.shape],
                                 "dtype": v.dtype.name} for name, v in self.variables.items()},  # fmt: skip
        }

    def save(self, step: int) -> str:
        """Write this client's pieces for `step` (atomically), then prune steps older than those kept."""
        import numpy as np
        import tensorflow as tf

        from vtrain.runtime.dtensor_layouts import local_shards

        arrays: dict[str, Any] = {_META: np.frombuffer(json.dumps(self._meta(step)).encode(), dtype=np.uint8)}
        for i, (_, v) in enumerate(sorted(self.variables.items())):
            for j, piece in enumerate(local_shards(v)):
                arrays[f"v{i}_{j}"] = piece
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        path = self._file(step)
        tf.io.gfile.makedirs(os.path.dirname(path) if "://" not in path else path.rsplit("/", 1)[0])
        tmp = f"{path}.tmp-{os.getpid()}"
        with tf.io.gfile.GFile(tmp, "wb") as f:
            f.write(buffer.getvalue())
        tf.io.gfile.rename(tmp, path, overwrite=True)
        self._prune()
        return path

    def _prune(self) -> None:

        complete = self.complete_steps()
        if len(complete) <= self.max_to_keep:
            return
        keep_from = complete[-self.max_to_keep]
        for step in self._steps():
            if step < keep_from:
                self._remove_own(step)

    def _remove_own(self, step: int) -> None:
        """Delete this client's file of `step` (and its leftover temporary files); the folder once empty."""
        import tensorflow as tf

        folder, mine = join(self.directory, f"step-{step}"), os.path.basename(self._file(step))
        try:
            for name in tf.io.gfile.listdir(folder) if tf.io.gfile.isdir(folder) else []:
                if name == mine or name.startswith(f"{mine}.tmp-"):
                    tf.io.gfile.remove(join(folder, name))
            if tf.io.gfile.isdir(folder) and not tf.io.gfile.listdir(folder):
                tf.io.gfile.rmtree(folder)
        except tf.errors.NotFoundError:
            pass  # another client emptied and removed the folder between our looks: the end this wanted

    def _refuse_other_client_counts(self) -> None:
        """Checkpoints here from a job with another number of clients: resuming would start over silently."""
        import tensorflow as tf

        for step in reversed(self._steps()):
            others = _counts(tf.io.gfile.listdir(join(self.directory, f"step-{step}"))) - {self.clients}
            if others:
                raise RuntimeMismatch(
                    f"{self.directory} holds step {step} written by {max(others)} DTensor client(s), but this job "
                    f"has {self.clients}: its pieces cannot be read here. Run with {max(others)} replicas to "
                    "resume, or give this job another checkpoint directory"
                )

    def restore(self) -> int:
        """Load the newest complete step into the variables; returns it (0 when there is none)."""
        import numpy as np
        import tensorflow as tf
        from tensorflow.experimental import dtensor

        step = self.latest()
        if step is None:
            self._refuse_other_client_counts()
        # What this client wrote after that step is from a save not every client finished: drop it, so
        # it can never be mistaken for part of a later save of the same step.
        for newer in self._steps():
            if newer > (step or 0):
                self._remove_own(newer)
        if step is None:
            return 0
        with tf.io.gfile.GFile(self._file(step), "rb") as f:
            data = np.load(io.BytesIO(f.read()))
        saved = json.loads(bytes(data[_META]).decode())
        now = self._meta(step)
        if saved["mesh"] != now["mesh"] or saved["variables"] != now["variables"]:
            raise RuntimeMismatch(
                f"checkpoint {self._file(step)} was written for mesh {saved['mesh']} with layouts "
                f"{_brief(saved['variables'])}; this run has mesh {now['mesh']} with {_brief(now['variables'])}. "
                "Use the same mesh and layouts to resume, or start from a gathered model"
            )
        for i, (_, v) in enumerate(sorted(self.variables.items())):
            layout = dtensor.fetch_layout(v.read_value())
            pieces = [data[f"v{i}_{j}"] for j in range(len(layout.mesh.local_device_locations()))]
            v.assign(dtensor.pack(pieces, layout))
        log.info("vtrain: client %d resumed from %s", self.client, self._file(step))
        return int(step)


_OTHERS = re.compile(r"client-\d+-of-(\d+)\.npz\Z")


def _counts(names: list[str]) -> set[int]:
    return {int(m.group(1)) for m in map(_OTHERS.match, names) if m}


def _brief(variables: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{n}: [{v['layout']}] {v['shape']}" for n, v in sorted(variables.items())) + "}"


__all__ = ["ShardedCheckpoint"]
