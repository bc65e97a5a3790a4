"""Where the syncer keeps its checkpoint: a local file (`vtrain local`) or gs:// (Vertex's AIP_CHECKPOINT_DIR).

Local writes go to a temporary file renamed into place, so a syncer killed mid-write leaves the
previous checkpoint whole; Cloud Storage objects are replaced atomically by the service itself.
gs:// goes through tf.io.gfile (the image has TensorFlow), imported only when needed.
"""

from __future__ import annotations

import os
from typing import Any

CHECKPOINT_NAME = "diloco/syncer.npz"
SUMMARY_NAME = "diloco/summary.json"


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


class Store:
    def __init__(self, directory: str, name: str = CHECKPOINT_NAME) -> None:
        self.path = _join(directory, name)
        self.remote = "://" in directory

    def _gfile(self) -> Any:
        import tensorflow as tf

        return tf.io.gfile

    def read(self) -> bytes | None:
        if self.remote:
            gfile = self._gfile()
            if not gfile.exists(self.path):
                return None
            with gfile.GFile(self.path, "rb") as f:
                return bytes(f.read())
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write(self, data: bytes) -> None:
        if self.remote:
            gfile = self._gfile()
            gfile.makedirs(self.path.rsplit("/", 1)[0])
            with gfile.GFile(self.path, "wb") as f:
                f.write(data)
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.tmp-{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
