"""Where each replica writes: model, checkpoint and TensorBoard dirs (AIP_* or ./vtrain-out), the
chief-only saving pattern, weights records a launcher can compare, and checkpoints that let a
restarted replica resume.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from vtrain.runtime.decision import _role
from vtrain.runtime.tfsetup import _cached, _check_keras_fits, is_chief, keras

log = logging.getLogger("vtrain.runtime")

LOCAL_OUTPUT_DIR = "vtrain-out"
WEIGHTS_FILE = "weights.json"


def join(base: str, *parts: str) -> str:
    """Join paths for local directories and gs:// URLs alike."""
    return posixpath.join(base, *parts) if "://" in base else os.path.join(base, *parts)


def _dir(var: str, local: str) -> str:
    value = os.environ.get(var, "").strip()
    return value or os.path.abspath(os.path.join(LOCAL_OUTPUT_DIR, local))


def model_dir() -> str:
    """AIP_MODEL_DIR, or ./vtrain-out/model when run outside a launcher."""
    return _dir("AIP_MODEL_DIR", "model")


def checkpoint_dir() -> str:
    """AIP_CHECKPOINT_DIR, or ./vtrain-out/checkpoints when run outside a launcher."""
    return _dir("AIP_CHECKPOINT_DIR", "checkpoints")


def tensorboard_dir() -> str:
    """AIP_TENSORBOARD_LOG_DIR, or ./vtrain-out/logs when run outside a launcher."""
    return _dir("AIP_TENSORBOARD_LOG_DIR", "logs")


def scratch_dir(final: str | None = None) -> str:
    """Where a non-chief replica writes what the chief writes to `final`: a sibling per replica."""
    final = (final or model_dir()).rstrip("/")
    task_type, task_index = _role(os.environ)[:2]
    parent = posixpath.dirname(final) if "://" in final else os.path.dirname(final)
    return join(parent, "workertemp", f"{task_type}-{task_index}")


def write_dir(final: str | None = None) -> str:
    """`final` for the chief, scratch_dir(final) for everyone else (TF's multi-worker saving pattern).

    Under multi-worker strategies every replica must save (saving runs collectives), but
    only the chief's copy is kept; the others remove theirs with :func:`remove_scratch`.
    """
    final = final or model_dir()
    return final if is_chief() else scratch_dir(final)


def remove_scratch(path: str) -> None:
    """Delete a non-chief replica's scratch copy; a no-op on the chief."""
    import tensorflow as tf

    if not is_chief() and tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)


def _to_array(value: Any) -> Any:
    import numpy as np

    return np.ascontiguousarray(value.numpy() if hasattr(value, "numpy") else np.asarray(value))


def weights_checksum(values: Iterable[Any]) -> str:
    """sha256 over dtype, shape and bytes of each value: equal across replicas iff they agree."""
    digest = hashlib.sha256()
    for value in values:
        array = _to_array(value)
        digest.update(f"{array.dtype.str}{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def write_weights_record(values: Iterable[Any], final: str | None = None, **extra: Any) -> dict[str, Any]:
    """Write weights.json (checksum and role) in this replica's output dir; log it too.

    Chief: `<final>/weights.json`. Others: `<scratch_dir(final)>/weights.json`, kept after the
    scratch model is removed so a launcher can prove every replica ended with the same weights.
    """
    import tensorflow as tf

    final = final or model_dir()
    task_type, task_index, chief = _role(os.environ)[:3]
    record = {
        "sha256": weights_checksum(values),
        "task_type": task_type,
        "task_index": task_index,
        "is_chief": chief,
        "strategy": _cached()[0].strategy,
        **extra,
    }
    where = final if chief else scratch_dir(final)
    tf.io.gfile.makedirs(where)
    with tf.io.gfile.GFile(join(where, WEIGHTS_FILE), "w") as f:
        f.write(json.dumps(record, indent=2) + "\n")
    log.info("vtrain: %s/%d weights sha256=%s", task_type, task_index, record["sha256"])
    return record


def save_model(model: Any, final: str | None = None) -> dict[str, Any]:
    """Save on every replica, keep only the chief's copy, write weights.json; returns its record.

    Keras 3 models are exported (SavedModel for serving), tf_keras models saved as a
    SavedModel directory, anything else through tf.saved_model.save.
    """
    import tensorflow as tf

    final = final or model_dir()
    target = final if is_chief() else join(scratch_dir(final), "model")
    family = type(model).__module__.split(".")[0]
    if family == "keras" and hasattr(model, "export"):
        model.export(target, verbose=False)
    elif family in ("keras", "tf_keras"):
        model.save(target)
    else:
        tf.saved_model.save(model, target)
    remove_scratch(target)
    return write_weights_record(model.weights, final, model_path=target if is_chief() else None)


class Checkpoints:
    """tf.train checkpoints for custom loops: the chief keeps them, the others write and discard.

    restore() reads the chief's latest checkpoint on every replica, so a restarted worker resumes.
    """

    def __init__(self, checkpoint: Any, directory: str | None = None, max_to_keep: int = 3) -> None:
        import tensorflow as tf

        self.checkpoint = checkpoint
        self.directory = directory or join(checkpoint_dir(), "ckpt")
        self._own = _learner_dir() is not None  # a DiLoCo learner keeps its own (its optimizer state is its own)
        if self._own:
            self.directory = join(self.directory, str(_learner_dir()))
        self._write_dir = self.directory if self._own else write_dir(self.directory)
        self._manager = tf.train.CheckpointManager(checkpoint, self._write_dir, max_to_keep=max_to_keep)

    def restore(self) -> str | None:
        import tensorflow as tf

        latest: str | None = tf.train.latest_checkpoint(self.directory)
        if latest:
            self.checkpoint.restore(latest)
            log.info("vtrain: resumed from %s", latest)
        return latest

    def save(self, step: int | None = None) -> None:
        self._manager.save(checkpoint_number=step)
        if not self._own:
            remove_scratch(self._write_dir)


def backup_and_restore(keras_module: ModuleType | None = None, save_freq: str | int = "epoch") -> Any:
    """A BackupAndRestore callback on checkpoint_dir(), so a restarted replica resumes mid-training.

    Every worker passes the same directory; Keras lets only the chief write it. `save_freq` "epoch"
    resumes at the first epoch not finished; an int backs up every that many steps (tf_keras then
    resumes at that step, Keras 3 at the start of that step's epoch, with the newer weights). DiLoCo
    learners each train alone, so each gets its own directory (backup/worker-0, ...).
    """
    module = keras_module or keras()
    _check_keras_fits(module, _cached()[0])
    own = _learner_dir()
    backup = join(checkpoint_dir(), "backup") if own is None else join(checkpoint_dir(), "backup", own)
    if str(getattr(module, "__version__", "")).startswith("3"):
        return _atomic_backup_class(module)(backup_dir=backup, save_freq=save_freq)
    return module.callbacks.BackupAndRestore(backup_dir=backup, save_freq=save_freq)


#: Keras 3 BackupAndRestore internals the atomic writer relies on; without them, Keras' own writer runs.
_KERAS3_BACKUP_STATE = ("_weights_path", "_training_metadata_path", "_current_epoch", "_last_batch_seen")


def _atomic_backup_class(module: ModuleType) -> Any:
    """Keras 3's BackupAndRestore whose backup on disk is always whole.

    Keras 3 writes ``latest.weights.h5`` in place: a replica killed mid-write (SIGKILL, a Spot VM's
    end, the OOM killer) leaves a file the restarted replica cannot open, and it then fails at every
    restart ("bad object header version number"), so the job fails for good. Here each file is
    written beside the old one and renamed over it (atomic on a local disk; one object on Cloud
    Storage), so a restart finds either the previous backup or the new one.
    """

    class AtomicBackupAndRestore(module.callbacks.BackupAndRestore):  # type: ignore[misc,name-defined]
        def _save_model(self) -> None:
            if not all(hasattr(self, name) for name in _KERAS3_BACKUP_STATE):
                super()._save_model()
                return
            import tensorflow as tf

            gfile, tag = tf.io.gfile, f"tmp-{os.getpid()}"
            gfile.makedirs(self.backup_dir)
            weights = self._weights_path
            tmp = f"{weights[: -len('.weights.h5')]}.{tag}.weights.h5"  # Keras wants the suffix
            self.model.save_weights(filepath=tmp, overwrite=True)
            gfile.rename(tmp, weights, overwrite=True)
            meta, tmp_meta = self._training_metadata_path, f"{self._training_metadata_path}.{tag}"
            with gfile.GFile(tmp_meta, "w") as f:
                f.write(json.dumps({"epoch": self._current_epoch, "batch": self._last_batch_seen}))
            gfile.rename(tmp_meta, meta, overwrite=True)

    return AtomicBackupAndRestore


def _learner_dir() -> str | None:
    """'worker-0' for a DiLoCo learner (its own checkpoints), None otherwise."""
    d = _cached()[0]
    return f"{d.task_type}-{d.task_index}" if d.row.standalone_replicas else None


