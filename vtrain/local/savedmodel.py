"""What Vertex's prebuilt prediction container needs of a job's export, checked at the end of a `vtrain
local` rehearsal when the job file has `model:`: AIP_MODEL_DIR holds a SavedModel (saved_model.pb) that
loads and has the serving signature `serving_default` the container calls. The load runs in a
subprocess with the trainer's own Python (TensorFlow is never imported by vtrain's CLI), bounded in time;
its answer is read bounded and printed through :func:`vtrain.foreign.printable`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from vtrain.foreign import printable

SERVING_SIGNATURE = "serving_default"
#: Loading a SavedModel imports TensorFlow (seconds) and reads the graph: a generous bound.
LOAD_TIMEOUT = 300.0
_MAX_ANSWER = 64 * 1024
_PROBE = (
    "import json, sys\n"
    "import tensorflow as tf\n"
    "loaded = tf.saved_model.load(sys.argv[1])\n"
    "print(json.dumps(sorted(str(k) for k in loaded.signatures.keys())))\n"
)
_SAVE_HINT = ("save one with vtrain.runtime.save_model(model) (or model.export(os.environ['AIP_MODEL_DIR']) for a "
              "Keras 3 model)")


def check_saved_model(model_dir: Path, python: str) -> str | None:
    """None when `model_dir` is a SavedModel that loads with `python` and has `serving_default`; else
    the one line that says what is missing, naming the dir."""
    where = f"model: {model_dir} (AIP_MODEL_DIR)"
    if not (model_dir / "saved_model.pb").is_file():
        return f"{where} holds no SavedModel (no saved_model.pb), which Vertex's prediction container serves; " \
               f"{_SAVE_HINT}"
    try:
        done = subprocess.run([python, "-c", _PROBE, str(model_dir)], capture_output=True, timeout=LOAD_TIMEOUT,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{where}: the SavedModel could not be loaded to check it: {printable(str(err))[:300]}"
    lines = done.stdout[-_MAX_ANSWER:].decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        why = done.stderr[-_MAX_ANSWER:].decode("utf-8", "replace").strip().splitlines()
        return f"{where}: the SavedModel does not load with tf.saved_model.load: " \
               f"{printable(why[-1] if why else f'exit {done.returncode}')[:300]}"
    try:
        signatures = json.loads(lines[-1])
    except ValueError:
        signatures = None
    if not isinstance(signatures, list) or not all(isinstance(s, str) for s in signatures):
        return f"{where}: the SavedModel's signatures could not be read"
    if SERVING_SIGNATURE not in signatures:
        has = ", ".join(printable(s)[:80] for s in signatures[:10]) or "none"
        return f"{where}: the SavedModel has no serving signature '{SERVING_SIGNATURE}' (it has: {has}), which " \
               f"Vertex's prediction container calls; {_SAVE_HINT}"
    return None


__all__ = ["SERVING_SIGNATURE", "check_saved_model"]
