"""Hostile input is refused before the work it would cost, not after (issue 10, class 11).

Each test proves the work is bounded without timing it (timings and memory are in
benchmarks/hostile_input.py): parsing stops before the end of a document that is too big, a file
that is not a regular file is never read, the plot samples a bounded number of worker counts,
and numbers that would overflow are refused as input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from vtrain.cli import cli
from vtrain.errors import ConfigError
from vtrain.estimate import estimate
from vtrain.estimate.plot import MAX_POINTS, scaling_curves, worker_counts
from vtrain.jobfile.load import parse_config
from vtrain.jobfile.yamlpos import MAX_BYTES, MAX_NODES, load_yaml

GPU_JOB = """\
name: big
trainer: {container: {image_uri: us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest}}
cluster:
  chief: {machine_type: a2-highgpu-8g}
  workers: {replicas: %d}
  reduction_server: {replicas: auto}
"""

# ---------------------------------------------------------------------------- YAML: stop while parsing

TOO_MANY = [
    ("flow list", "x: [" + "1, " * MAX_NODES + "1]\n"),
    ("keys", "".join(f"k{i}: {i}\n" for i in range(MAX_NODES // 2 + 1))),
    ("block list", "x:\n" + "- 1\n" * MAX_NODES),
    ("mappings", "x: [" + "{a: [1, 2], b: c}, " * (MAX_NODES // 6) + "]\n"),
]


@pytest.mark.parametrize("text", [t for _, t in TOO_MANY], ids=[n for n, _ in TOO_MANY])
def test_the_node_limit_stops_the_parser_before_the_end_of_the_text(text: str) -> None:
    """A syntax error after the limit is never reached: the parser stopped counting there.

    Before, the whole document was composed first (1e6 keys: 95 s and 1.4 GB), and the
    syntax error at its end would have been the problem reported.
    """
    assert len(text) < MAX_BYTES
    data, _, problems = load_yaml(text + "oops: [unclosed\n", "job.yaml")
    assert data is None
    assert [p.message for p in problems] == [
        f"the YAML has or expands to more than {MAX_NODES:,} values (aliases?); a job file needs far fewer"]


def test_just_under_the_limit_parses() -> None:
    data, _, problems = load_yaml("x: [" + "1, " * (MAX_NODES - 10) + "1]\n", "job.yaml")
    assert problems == [] and len(data["x"]) == MAX_NODES - 9


def test_text_over_the_byte_limit_is_refused_before_parsing() -> None:
    """The syntax error on line 1 is never seen: the size alone decides."""
    text = "oops: [unclosed\n" + "# padding\n" * (MAX_BYTES // 10)
    data, _, problems = load_yaml(text, "job.yaml")
    assert data is None
    assert [p.message for p in problems] == [
        f"the file is {len(text):,} characters long; a job file needs far fewer than {MAX_BYTES:,}"]


def test_a_million_keys_through_the_cli_is_one_line(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    with job.open("w", encoding="utf-8") as f:
        f.writelines(f"k{i}: {i}\n" for i in range(1_000_000))
    result = CliRunner().invoke(cli, ["validate", str(job)])
    assert result.exit_code == 2
    assert result.output == (f"{job}: cannot read the job file: it is larger than {MAX_BYTES:,} bytes\n"
                             "error: 1 problem in the job file\n")


@pytest.mark.parametrize("option", ["--prices", "JOB"])
def test_a_fifo_for_any_input_file_of_estimate_does_not_hang(tmp_path: Path, option: str) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(GPU_JOB % 3, encoding="utf-8")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = [str(job), "--prices", str(fifo)] if option == "--prices" else [str(fifo)]
    done = subprocess.run([sys.executable, "-m", "vtrain", "estimate", *args, "--params", "1B"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "it is a FIFO (named pipe), not a regular file" in done.stderr
    assert "Traceback" not in done.stderr


# ---------------------------------------------------------------------------- numbers past their types


@pytest.mark.parametrize("params", ["1e308", "1e400", "2e15", "999999T"])
def test_estimate_params_past_any_model_are_a_usage_error(tmp_path: Path, params: str) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(GPU_JOB % 3, encoding="utf-8")
    result = CliRunner().invoke(cli, ["estimate", str(job), "--params", params])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == (
        f"Error: Invalid value for '--params': {params!r} is too large to be a parameter count (at most 1e+15, "
        "1,000 times the largest models trained)"
    )
    assert CliRunner().invoke(cli, ["estimate", str(job), "--params", "1e15"]).exit_code == 0


def test_auto_reducers_past_an_int64_count_are_a_problem_not_a_rendered_number() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(GPU_JOB % (2**63 - 2), "job.yaml")
    (problem,) = err.value.problems
    assert (problem.path, problem.line) == ("cluster.reduction_server.replicas", 6)
    assert problem.message.startswith("'auto' sizes the reducer pool to ")
    assert problem.message.endswith("replicas, more than a replica count can hold (9,223,372,036,854,775,807); "
                                    "give fewer workers")


def test_auto_reducers_on_a_huge_cluster_that_still_fits_render(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(GPU_JOB % 10**12, encoding="utf-8")
    result = CliRunner().invoke(cli, ["render", str(job)])
    assert result.exit_code == 0, result.output
    counts = [pool.get("replicaCount") for pool in json.loads(result.output)["jobSpec"]["workerPoolSpecs"]]
    assert counts[1] == str(10**12) and int(counts[2]) <= 2**63 - 1


# ---------------------------------------------------------------------------- --plot: sampled, bounded


@pytest.mark.parametrize("workers", [1, 3, 100, 101, 10**8, 2**62])
def test_worker_counts_are_bounded_and_keep_the_ends_and_the_job(workers: int) -> None:
    counts = worker_counts(workers)
    assert len(counts) <= MAX_POINTS + 1
    assert counts == sorted(set(counts))
    assert counts[0] == 1 and counts[-1] == 2 * workers and workers in counts
    if 2 * workers <= MAX_POINTS:
        assert counts == list(range(1, 2 * workers + 1))  # small jobs: every count, as before


def test_the_plot_of_a_hundred_million_workers_is_a_few_hundred_estimates() -> None:
    est = estimate(10**8, 100.0, 3, 32.0, 4e9, 0.4, 30e-6, 8)
    curves = scaling_curves(est)
    assert all(0 < len(points) <= MAX_POINTS + 1 for points in curves.values())
    assert max(n for points in curves.values() for n, _ in points) == 2 * 10**8
