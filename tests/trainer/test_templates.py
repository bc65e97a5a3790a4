"""The trainer templates: real TensorFlow runs, single-process (the keras template's multi-worker run is the
quickstart's, shared: tests/local/test_local_run.py::test_multi_worker_training_is_really_synchronised)."""

from __future__ import annotations

import fnmatch
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from vtrain.commands.trainer import TEMPLATES, template_files, templates_root

ROOT = Path(__file__).resolve().parents[2]
CLEAR = (
    "GOOGLE_",
    "CLOUDSDK_",
    "VTRAIN_",
    "AIP_",
    "TPU_",
    "TF_CONFIG",
    "CLUSTER_SPEC",
    "TF_USE_LEGACY_KERAS",
)
TINY = ["--epochs=2", "--steps-per-epoch=3", "--batch-size=8"]


def trainer_env(template: str, out: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEAR)}
    return {
        **env,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "trainer_templates" / template)]),
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "AIP_MODEL_DIR": str(out / "model"),
        "AIP_CHECKPOINT_DIR": str(out / "checkpoints"),
        "AIP_TENSORBOARD_LOG_DIR": str(out / "logs"),
        **extra,
    }


def start(template: str, out: Path, args: list[str], **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "trainer.task", *args],
        cwd=out.parent,
        env=trainer_env(template, out, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        output, _ = proc.communicate()
        pytest.fail(f"trainer timed out:\n{output[-3000:]}")
    assert proc.returncode == 0, output[-3000:]
    return output


def weights(path: Path) -> dict:
    return json.loads((path / "weights.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("template", TEMPLATES)
def test_single_process_saves_model_and_checksum(template: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    log = finish(start(template, out, TINY))
    assert ("DTensor client 0 of 1" if template == "model-parallel" else "using default strategy") in log
    assert "steps/sec" in log
    assert (out / "model" / "saved_model.pb").is_file()
    record = weights(out / "model")
    assert record["is_chief"] and record["task_type"] == "chief" and len(record["sha256"]) == 64
    if template == "custom-loop":
        # Checkpoints every epoch: a second run with more epochs resumes and trains only the rest.
        (out / "model" / "saved_model.pb").unlink()
        log = finish(start(template, out, ["--epochs=3", *TINY[1:]]))
        assert "resumed from" in log and "epoch 3:" in log and "epoch 1:" not in log
        assert weights(out / "model")["sha256"] != record["sha256"]


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_templates_are_installable_packages() -> None:
    for template in TEMPLATES:
        meta = tomllib.loads((templates_root() / template / "pyproject.toml").read_text())
        assert meta["build-system"]["build-backend"] == "setuptools.build_meta"
        assert meta["tool"]["setuptools"]["packages"] == ["trainer"]
        deps = meta["project"]["dependencies"]
        assert not [d for d in deps if d.split("~")[0].split("=")[0].strip() in ("tensorflow", "keras")]
        files = {str(p) for p in template_files(template)}
        assert {"pyproject.toml", "trainer/__init__.py", "trainer/task.py"} <= files


def test_every_template_file_ships_in_the_package() -> None:
    """package-data must cover each template file, or `vtrain init` breaks once installed."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["vtrain"]
    assert (ROOT / "vtrain" / "trainer_templates").resolve() == (ROOT / "trainer_templates").resolve()
    for template in TEMPLATES:
        for rel in template_files(template):
            path = f"trainer_templates/{template}/{rel.as_posix()}"
            assert any(fnmatch.fnmatch(path, p) for p in patterns), f"{path} is not in package-data"


def test_keras_template_pins_tf_keras_to_the_image() -> None:
    """tf-keras pins TensorFlow's minor version: it must match the image vtrain init writes."""
    from vtrain.commands.trainer import JOB_FILE

    deps = tomllib.loads((templates_root() / "keras" / "pyproject.toml").read_text())["project"]["dependencies"]
    image = next(line.split()[1] for line in JOB_FILE.splitlines() if line.strip().startswith("image:"))
    minor = image.rsplit(".", 1)[1].replace("-", ".")  # tf-cpu.2-17 -> 2.17
    assert deps == [f"tf-keras~={minor}.0"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("template", "policy", "dtype"),
    [("keras", "mixed_bfloat16", "bfloat16"), ("custom-loop", "mixed_float16", "float16")],
)
def test_mixed_precision_flag_and_env_override(template: str, policy: str, dtype: str, tmp_path: Path) -> None:
    """--mixed-precision asks for auto; the job's env (VTRAIN_MIXED_PRECISION) overrides it. On CPU, auto
    would leave float32, so the override is what trains 16-bit here: float16 exercises the custom loop's
    loss scaling, bfloat16 Keras' model.fit."""
    out = tmp_path / "out"
    log = finish(start(template, out, [*TINY, "--mixed-precision"], VTRAIN_MIXED_PRECISION=policy))
    assert f"precision {policy} (VTRAIN_MIXED_PRECISION (CPU only: expect slower steps))" in log
    assert f"global batch 8, {'keras keras, ' if template == 'keras' else ''}{policy}" in log
    assert "loss nan" not in log.lower()
    assert (out / "model" / "saved_model.pb").is_file()
