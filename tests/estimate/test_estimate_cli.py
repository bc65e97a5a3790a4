"""`vtrain estimate` through the real CLI group: exact text, JSON schema, prices, plots, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from vtrain.cli import cli
from vtrain.estimate import estimate_hint
from vtrain.jobfile.load import load_config

IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest"
HEAD = f"name: {{name}}\ntrainer:\n  container:\n    image_uri: {IMAGE}\ncluster:\n"
BERT = HEAD.format(name="bert-finetune") + (
    "  chief: {machine_type: a2-highgpu-8g}\n"
    "  workers: {replicas: 7, machine_type: a2-highgpu-8g}\n"
    "  reduction_server: {replicas: 20, machine_type: n1-highcpu-16}\n"
)
SMALL = HEAD.format(name="small") + (
    "  chief: {machine_type: n1-standard-16, accelerator: t4, accelerator_count: 2}\n  workers: {replicas: 3}\n"
)
PS = HEAD.replace("tf-gpu", "tf-cpu").format(name="ps") + (
    "  chief: {machine_type: n1-standard-8}\n  workers: {replicas: 3}\n  parameter_servers: {replicas: 2}\n"
)
ONE = HEAD.format(name="one") + "  chief: {machine_type: a2-highgpu-8g}\n"
PRICES = "machines:\n  a2-highgpu-8g: 10.0\n  n1-highcpu-16: 0.5\naccelerators:\n  a100: 2.5\n"


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in {
        "bert.yaml": BERT,
        "small.yaml": SMALL,
        "one.yaml": ONE,
        "ps.yaml": PS,
        "prices.yaml": PRICES,
    }.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["estimate", *args])


SMALL_TEXT = """\
small (small.yaml)
  workers     4 × n1-standard-16 (chief + workers), 2 GPUs each (8 ring ranks), 32 Gbps NIC
  reducers    4 × n1-highcpu-16, 32 Gbps (assumed: the job has none)
  gradient    110M params × 2 B (bf16) = 220.00 MB
  compute     100.0 ms per step
  model       α = 30 µs per hop; per-VM NIC bound; no compute/comm overlap

                             ring all-reduce  reduction server
  sent per worker per step         385.00 MB         220.00 MB
  communication per step             96.7 ms           55.1 ms
  steps/sec                             5.08              6.45
  speed-up                             1.00×             1.27×
  VM-hours / 1,000 steps               0.219             0.172
  GPU-hours / 1,000 steps              0.437             0.345
  reducer-hours / 1,000                    -             0.172

  sizing      ⌈4 × 32 Gbps / 32 Gbps⌉ = 4 reducers: 6.45 steps/sec, 1.27× the ring
              (bandwidth alone caps it at 2(N−1)/N = 1.75×; the ring also waits 2(N−1) = 14 hops of α)
              fewer than 3 reducers are slower than the ring

  low-communication training: per-worker bandwidth to keep compute ≥ 90% busy
    sync data-parallel   S every step        needs 158 Gbps       (at 32 Gbps: a step must compute ≥ 495.0 ms)
    DiLoCo H=50          S every 50 steps    needs 3.17 Gbps      (at 32 Gbps: a step must compute ≥ 9.9 ms)
  DiLoCo per step: each learner sends its change once every H steps; syncer n1-highcpu-16 (assumed)
    H=50                 sent per learner    8.80 MB   syncer in/out   35.20 MB   communication 8.8 ms

verdict: reducers pay in time: 1.27× the steps/sec of the ring; in cost while one reducer-hour costs less \
than 0.268 worker-VM-hours (give --prices for money).

  memory per replica (adam, fp32: 16 B/param)
    state        weights 440.00 MB + gradients 440.00 MB + optimizer 880.00 MB = 1.76 GB
    activations  not given: the verdict covers the training state only
    chief+workers n1-standard-16 NVIDIA_TESLA_T4 16.00 GB: fits, 89% headroom
  precision    NVIDIA_TESLA_T4: mixed_fp16 (mixed_float16 with loss scaling)
               compute capability 7.5: float16 tensor cores but no bfloat16; float16 needs loss scaling
               state 1.76 GB fp32 → 1.98 GB mixed, activations halved; compute at most 8× faster

recommendation: data parallel + Reduction Server (4 reducers)
  - 1.27× the ring's steps/sec with 4 reducers (sizing rule)
  - compute 64% busy with reducers against 51% with the ring
  use: cluster.reduction_server: {replicas: 4}
  use: distribution_strategy: auto (NCCL)
"""


def test_exact_text_output(jobs: Path) -> None:
    result = run("small.yaml", "--params", "110M", "--grad-dtype", "bf16", "--step-compute", "100ms",
                 "--inner-steps", "50")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == SMALL_TEXT


def test_json_schema_for_the_published_bert_job(jobs: Path) -> None:
    result = run("bert.yaml", "--params", "340M", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["gradient_bytes"] == 340_000_000 * 4
    for key in ("ring", "reduction_server"):
        for field in ("bytes_sent_per_worker", "comm_seconds", "steps_per_sec"):
            assert isinstance(data[key][field], float), (key, field)
    assert data["reduction_server"]["reducers"] == 20
    assert data["reduction_server"]["reducer_bound"] is True
    assert data["recommended_reducers"] == 25
    assert 1.5 <= data["speedup"] <= 2.0
    assert data["speedup"] == pytest.approx(data["reduction_server"]["steps_per_sec"] / data["ring"]["steps_per_sec"])
    assert data["cluster"]["job_reducers"] == 20 and data["cluster"]["gpus_per_worker"] == 8
    assert [row["inner_steps"] for row in data["low_communication"]] == [1, 10, 100, 500]
    assert data["costs"] is None
    assert data["verdict"].startswith("verdict: reducers pay in time")


def test_reducers_override_and_reducer_machine(jobs: Path) -> None:
    data = json.loads(run("bert.yaml", "--params", "340M", "--reducers", "25", "-o", "json").stdout)
    assert data["reduction_server"]["reducer_bound"] is False
    assert data["speedup"] == pytest.approx(2.0, abs=0.01)
    data = json.loads(run("bert.yaml", "--params", "340M", "--reducer-machine", "n1-highcpu-32", "-o", "json").stdout)
    assert data["cluster"]["reducer_machine"] == "n1-highcpu-32"
    assert data["recommended_reducers"] == 25  # n1 caps at 32 Gbps too


def test_prices_give_money_and_a_break_even(jobs: Path) -> None:
    result = run("bert.yaml", "--params", "340M", "--step-compute", "0.4s", "--prices", "prices.yaml", "-o", "json")
    assert result.exit_code == 0, result.output
    costs = json.loads(result.stdout)["costs"]
    assert costs["worker_price_per_hour"] == 8 * (10.0 + 8 * 2.5)
    assert costs["reducer_price_per_hour"] == 0.5
    assert costs["reducers_cheaper"] is True
    assert costs["break_even_reducer_price"] > 0.5
    text = run("bert.yaml", "--params", "340M", "--step-compute", "0.4s", "--prices", "prices.yaml").stdout
    assert "cost / 1,000 steps" in text and "they stop paying above $" in text


def test_the_example_price_file_holds_no_prices(jobs: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "prices.example.yaml"
    result = run("bert.yaml", "--params", "340M", "--prices", str(example))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: price file {example} has no price for machines.a2-highgpu-8g, accelerators.NVIDIA_TESLA_A100, "
        "machines.n1-highcpu-16; vtrain never guesses prices, add them"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--params", "abc"), "Invalid value for '--params': cannot read 'abc' as a parameter count"),
        (("--params", "0"), "Invalid value for '--params': '0' is less than one parameter"),
        (("--params", "340M", "--step-compute", "fast"), "Invalid value for '--step-compute': cannot read 'fast'"),
        (("--params", "340M", "--alpha", "-1s"), "Invalid value for '--alpha': cannot read '-1s' as a duration"),
        (("--params", "340M", "--reducers", "0"), "Invalid value for '--reducers': 0 is not in the range x>=1"),
        (("--params", "340M", "--reducer-machine", "n9-huge-7"),
         "Invalid value for '--reducer-machine': unknown machine type 'n9-huge-7'"),
        (("--params", "340M", "--reducer-machine", "n1-highcpu16"),
         "Invalid value for '--reducer-machine': unknown machine type 'n1-highcpu16' (did you mean n1-highcpu-16?)"),
        (("--params", "340M", "--inner-steps", "0"), "Invalid value for '--inner-steps': 0 is not in the range x>=1"),
        (("--params", "340M", "--regions", "0"), "Invalid value for '--regions': 0 is not in the range x>=1"),
        (("--params", "340M", "--prices", "nope.yaml"),
         "Invalid value for '--prices': price file not found: nope.yaml"),
        (("--params", "340M", "--activations", "lots"),
         "Invalid value for '--activations': cannot read 'lots' as a size"),
        (("--params", "340M", "--batch-per-replica", "0"), "Invalid value for '--batch-per-replica': 0 is not in"),
        (("--params", "340M", "--optimizer", "lion"), "Invalid value for '--optimizer': 'lion' is not one of"),
        (("--params", "340M", "--activations", "1GB", "--batch-per-replica", "8", "--activation-bytes-per-example",
          "1MB"), "give --activations, or --batch-per-replica with --activation-bytes-per-example, not both"),
        (("--params", "340M", "--batch-per-replica", "8"),
         "--batch-per-replica and --activation-bytes-per-example go together"),
    ],
)  # fmt: skip
def test_bad_flags_are_click_usage_errors_naming_the_flag(jobs: Path, args: tuple[str, ...], message: str) -> None:
    result = run("bert.yaml", *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == f"Error: {message}" or result.stderr.splitlines()[-1].startswith(
        f"Error: {message}"
    ), result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_machine_in_the_job_file_is_a_config_error(jobs: Path) -> None:
    (jobs / "bad.yaml").write_text(BERT.replace("a2-highgpu-8g}", "a2-gigagpu-8g}", 1), encoding="utf-8")
    result = run("bad.yaml", "--params", "340M")
    assert result.exit_code == 2
    assert "a2-gigagpu-8g" in result.stderr and "Traceback" not in result.output
    assert result.stderr.splitlines()[0].startswith("bad.yaml:")


def test_single_replica_exchanges_nothing(jobs: Path) -> None:
    data = json.loads(run("one.yaml", "--params", "340M", "-o", "json").stdout)
    assert data["ring"]["comm_seconds"] == 0 and data["ring"]["steps_per_sec"] is None
    assert data["verdict"].startswith("verdict: one replica")


def test_hypothetical_comparisons_say_so(jobs: Path) -> None:
    result = run("ps.yaml", "--params", "10M")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == [
        "note: this job uses parameter servers, not all-reduce: the numbers show what switching would give",
        "note: Vertex's Reduction Server needs GPU workers using NCCL all-reduce; this is hypothetical",
    ]
    assert estimate_hint(load_config("ps.yaml")) is None
    assert len(json.loads(run("ps.yaml", "--params", "10M", "-o", "json").stdout)["notes"]) == 2


def test_plot_writes_a_png(jobs: Path) -> None:
    pytest.importorskip("matplotlib")
    result = run("bert.yaml", "--params", "340M", "--plot", "scaling.png")
    assert result.exit_code == 0, result.output
    assert (jobs / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.stdout.endswith("plot: scaling.png\n")


def test_plot_without_matplotlib_says_how_to_get_it(jobs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package looks like to import
    result = run("bert.yaml", "--params", "340M", "--plot", "scaling.png")
    assert result.exit_code == 1
    assert result.stderr == "error: plotting needs matplotlib: pip install 'vtrain[plot]'\n"


def test_hint_for_render(jobs: Path) -> None:
    hint = estimate_hint(load_config("small.yaml"))
    assert hint is not None
    assert "4 GPU replicas" in hint and "4 × n1-highcpu-16" in hint and "vtrain estimate small.yaml" in hint
    assert estimate_hint(load_config("bert.yaml")) is None  # already has reducers
    assert estimate_hint(load_config("one.yaml")) is None  # nothing to exchange


def test_module_entry_point(jobs: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "VTRAIN_"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run(
        [sys.executable, "-m", "vtrain", "estimate", "bert.yaml", "--params", "340M", "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["recommended_reducers"] == 25
