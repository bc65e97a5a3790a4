"""`vtrain local` with `model:` checks the export as Vertex's prediction container needs it: a SavedModel
that loads, with a `serving_default` signature; otherwise the rehearsal fails with one line naming the dir."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import REPO
from tests.helpers import write_job
from vtrain.cli import cli
from vtrain.local.savedmodel import check_saved_model

PROBE = REPO / "tests" / "data" / "trainers" / "probe"
_SAVE = """
import sys
import tensorflow as tf

class Double(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def __call__(self, x):
        return {"y": 2 * x}

m = Double()
tf.saved_model.save(m, sys.argv[1], signatures={"serving_default": m.__call__})
tf.saved_model.save(m, sys.argv[2], signatures={"other": m.__call__})
"""


def test_no_saved_model_is_one_line_naming_the_dir(tmp_path: Path) -> None:
    problem = check_saved_model(tmp_path / "model", sys.executable)
    assert problem == (f"model: {tmp_path / 'model'} (AIP_MODEL_DIR) holds no SavedModel (no saved_model.pb), which "
                       "Vertex's prediction container serves; save one with vtrain.runtime.save_model(model) (or "
                       "model.export(os.environ['AIP_MODEL_DIR']) for a Keras 3 model)")


@pytest.mark.slow
def test_a_broken_saved_model_is_one_line_too(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "saved_model.pb").write_bytes(b"\x1b[31mnot a proto")
    broken = check_saved_model(tmp_path / "model", sys.executable)
    assert broken is not None and broken.startswith(f"model: {tmp_path / 'model'} (AIP_MODEL_DIR): the SavedModel "
                                                    "does not load with tf.saved_model.load: ")
    assert "\x1b" not in broken  # what TensorFlow said is foreign text: printed escaped


@pytest.mark.slow
def test_a_saved_model_needs_the_serving_signature(tmp_path: Path) -> None:
    good, other = tmp_path / "good", tmp_path / "other"
    subprocess.run([sys.executable, "-c", _SAVE, str(good), str(other)], check=True, capture_output=True)
    assert check_saved_model(good, sys.executable) is None
    problem = check_saved_model(other, sys.executable)
    assert problem is not None and "has no serving signature 'serving_default' (it has: other)" in problem


@pytest.mark.slow
def test_vtrain_local_fails_a_trainer_that_saves_no_model(tmp_path: Path, cache: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(cache))
    job = write_job(tmp_path, f"""
        name: probe-model
        base_output_dir: out
        trainer: {{package: {PROBE}, module: trainer.task, image: tf-cpu.2-15}}
        cluster: {{chief: {{machine_type: n1-standard-4}}}}
        model: {{display_name: probe}}
        """)
    result = CliRunner().invoke(cli, ["local", str(job), "--plain"])
    assert result.exit_code == 10, result.output
    model_dir = tmp_path / "out" / "model"
    assert "ended JOB_STATE_FAILED after" in result.stderr
    assert f": model: {model_dir} (AIP_MODEL_DIR) holds no SavedModel (no saved_model.pb)" in result.stderr
    without = CliRunner().invoke(cli, ["local", str(job), "--plain", "--set", "model=null"])
    assert without.exit_code == 0, without.output  # the same trainer passes when no model is registered
