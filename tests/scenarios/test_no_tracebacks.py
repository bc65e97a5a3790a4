"""Issue 20, class 8: a user's mistake is one line, never a Python traceback. Lone surrogates and
non-UTF-8 argv bytes passed validate and crashed render/submit; a control character crashed the YAML
reader before its errors were caught; 400-digit numbers in DiLoCo, tuning and price fields raised
OverflowError; `--plot x.txt` raised matplotlib's ValueError; a damaged cache marker crashed
`cache info`. Each input below runs the real CLI in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import write_job

BIG = "9" * 400
SMALL = """
name: small
trainer: {container: {image_uri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest}}
cluster:
  chief: {machine_type: n1-standard-4}
"""
DILOCO = SMALL.replace("name: small", f"name: small\ndistribution_strategy: diloco\ndiloco: {{outer_lr: {BIG}}}"
                       ).replace("n1-standard-4}", "n1-standard-4}\n  workers: {replicas: 2}")
TUNED = SMALL + f"""tuning:
  metric: {{name: loss, goal: minimize}}
  max_trials: 2
  parameters: {{n: {{type: integer, min: 1, max: {BIG}}}, lr: {{type: double, min: 0, max: {BIG}}}}}
"""


def _cli(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **({"VTRAIN_CACHE_DIR": str(cache)} if cache else {})}
    return subprocess.run([sys.executable, "-m", "vtrain", *args], cwd=REPO, capture_output=True, timeout=120,
                          env=env)


def _one_line(done: subprocess.CompletedProcess[bytes], code: int = 2) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == code and "Traceback" not in err, err[-3000:]
    return err


@pytest.mark.slow
@pytest.mark.parametrize("command", ["validate", "render", "submit"])
def test_argv_that_is_not_utf8_is_refused_by_every_command(tmp_path: Path, command: str) -> None:
    job = str(write_job(tmp_path, SMALL))
    extra = ["--dry-run"] if command == "submit" else []
    err = _one_line(_cli(command, job, *extra, "--set", "name=a\udcff"))
    assert "is not valid UTF-8 text" in err


@pytest.mark.slow
@pytest.mark.parametrize(("name", "text"), [("diloco", DILOCO), ("tuning", TUNED),
                                            ("control character", SMALL.replace("name: small", 'name: "a\x07b"')),
                                            ("5,000-digit integer", SMALL + f"labels: {{a: {'9' * 5000}}}\n")])
def test_job_files_that_used_to_raise(tmp_path: Path, name: str, text: str) -> None:
    job = tmp_path / "job.yaml"
    job.write_bytes(text.replace('"a\x07b"', "a\x07b").encode())
    err = _one_line(_cli("validate", str(job)))
    assert f"{job}:" in err


@pytest.mark.slow
def test_estimate_inputs_that_used_to_raise(tmp_path: Path) -> None:
    job = str(write_job(tmp_path, SMALL))
    prices = tmp_path / "prices.yaml"
    prices.write_text(f"machines: {{n1-standard-4: {BIG}}}\n")
    assert "bits" in _one_line(_cli("estimate", job, "--params", "1B", "--prices", str(prices)))
    assert "name the file .png" in _one_line(_cli("estimate", job, "--params", "1B", "--plot",
                                                  str(tmp_path / "x.txt")), code=2)


@pytest.mark.slow
@pytest.mark.parametrize("marker", [{"format": 1, "sdists": 5}, {"format": 1, "files": [None]}, [1, 2]])
def test_cache_info_with_a_damaged_marker(tmp_path: Path, marker: object) -> None:
    from vtrain.local.envcache import ENV_FORMAT, READY

    if isinstance(marker, dict):
        marker["format"] = ENV_FORMAT
    env = tmp_path / "cache" / "envs" / "abc"
    env.mkdir(parents=True)
    (env / READY).write_text(json.dumps(marker))
    done = _cli("cache", "info", "-o", "json", cache=tmp_path / "cache")
    _one_line(done, code=0)
    assert json.loads(done.stdout)["envs"][0]["state"] == "incomplete"
