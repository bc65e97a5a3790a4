"""Issue 20, class 5: every input gets the job file's limits, error messages stay short, every check
is linear. The job file was guarded (size, values, depth, FIFOs); the inputs beside it were not: a
222-character `--set` alias bomb took 25 s and 1.5 GB, a 296-byte `--prices` file made a 226 MB
error message, `diff --against` a FIFO hung and /dev/zero ate memory, a huge `diloco.fragments` made
validate spin for hours and `scheduling.fallback` was checked in O(n²). Before/after numbers:
benchmarks/hostile_input.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import write_job
from vtrain.cli import cli
from vtrain.jobfile.load import MAX_FALLBACKS
from vtrain.jobfile.rules.diloco import MAX_FRAGMENTS
from vtrain.jobfile.yamlpos import load_plain

SMALL = """
name: small
trainer: {container: {image_uri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest}}
cluster:
  chief: {machine_type: n1-standard-4}
"""
#: 9^8 values from 90 characters of aliases: the "billion laughs" in one flag value.
BOMB = "[&a [1,1,1,1,1,1,1,1,1]," + ",".join(
    f"&{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(7)) + "]"
DEEP = "[" * 50_000 + "]" * 50_000
#: Each shape the limits cover, written as a --set value, a price file and a saved request.
HOSTILE = {"aliases": BOMB, "depth": DEEP, "size": "[" + "1," * 600_000 + "1]"}


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    assert not isinstance(result.exception, (RecursionError, MemoryError)), result.exception
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_the_one_loader_refuses_each_shape_in_one_short_line(shape: str) -> None:
    with pytest.raises(ValueError) as caught:
        load_plain(HOSTILE[shape], "x", what="a test input")
    assert len(str(caught.value)) < 200 and "\n" not in str(caught.value)
    assert load_plain("{a: [1, 2]}", "x", what="a test input") == {"a": [1, 2]}


@pytest.mark.parametrize("shape", ["aliases", "depth"])
def test_set_values_get_the_job_files_limits(tmp_path: Path, shape: str) -> None:
    code, out = _run("validate", str(write_job(tmp_path, SMALL)), "--set", f"trainer.args={HOSTILE[shape]}")
    assert code == 2 and len(out) < 1000, out[:2000]
    assert "--set" in out  # the flag is blamed, not the file


def test_set_text_yaml_cannot_read_stays_text(tmp_path: Path) -> None:
    job = write_job(tmp_path, SMALL)
    code, out = _run("render", str(job), "--set", "trainer.args=[--x, 'a: b']", "--set", "name=a: b: c")
    assert code == 0 and '"displayName": "a: b: c"' in out, out


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_a_price_file_gets_the_limits_and_a_short_message(tmp_path: Path, shape: str) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(f"currency: {HOSTILE[shape]}\nmachines: {{n1-standard-4: 1}}\n")
    code, out = _run("estimate", str(write_job(tmp_path, SMALL)), "--params", "1B", "--prices", str(prices))
    assert code == 2 and len(out) < 1500, out[:2000]


def test_a_price_file_value_is_shown_short(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("machines: {n1-standard-4: &a [" + ",".join(["1"] * 9) + "], x: [" + ",".join(["*a"] * 999)
                      + "]}\n")
    code, out = _run("estimate", str(write_job(tmp_path, SMALL)), "--params", "1B", "--prices", str(prices))
    assert code == 2 and len(out) < 1500, out[:2000]


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "aliases", "depth", "size"])
def test_diff_against_reads_only_a_bounded_regular_file(tmp_path: Path, kind: str) -> None:
    saved = tmp_path / "saved"
    if kind == "fifo":
        os.mkfifo(saved)
    elif kind == "device":
        saved = Path("/dev/zero")
    elif kind == "directory":
        saved.mkdir()
    else:
        saved.write_text(HOSTILE[kind])
    code, out = _run("diff", str(write_job(tmp_path, SMALL)), "--against", str(saved))
    assert code == 2 and len(out) < 1000 and "Traceback" not in out, out[:2000]
    assert "--against" in out


def test_diloco_fragments_and_fallbacks_are_bounded(tmp_path: Path) -> None:
    huge = SMALL.replace("name: small", "name: small\ndistribution_strategy: diloco\n"
                                        "diloco: {inner_steps: 999999999989, fragments: 999999999988}")
    huge = huge.replace("chief: {machine_type: n1-standard-4}", "chief: {machine_type: n1-standard-4}\n"
                                                                "  workers: {replicas: 2}")
    code, out = _run("validate", str(write_job(tmp_path, huge)))
    assert code == 2 and f"at most {MAX_FRAGMENTS}" in out, out
    many = SMALL + "scheduling:\n  fallback:\n" + "".join(f"    - {{region: us-east{1 + i % 4}}}\n"
                                                           for i in range(MAX_FALLBACKS + 1))
    code, out = _run("validate", str(write_job(tmp_path, many)))
    assert code == 2 and f"at most {MAX_FALLBACKS} fallbacks" in out, out
    ok = SMALL + "scheduling:\n  fallback:\n" + "".join(f"    - {{region: us-east{1 + i % 4}}}\n"
                                                         for i in range(MAX_FALLBACKS))
    assert _run("validate", str(write_job(tmp_path, ok)))[0] == 0


@pytest.mark.parametrize("table", ["machines: {n1-standard-4: 1, n1-standard-4: 2}",
                                   "accelerators: {a100: 1, NVIDIA_TESLA_A100: 2}"])
def test_a_price_given_twice_is_refused_not_last_wins(tmp_path: Path, table: str) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(table + "\n")
    code, out = _run("estimate", str(write_job(tmp_path, SMALL)), "--params", "1B", "--prices", str(prices))
    assert code == 2 and ("duplicate key" in out or "both price" in out), out
