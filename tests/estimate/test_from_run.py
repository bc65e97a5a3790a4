"""`vtrain estimate --from-run`: inputs from a rehearsal's profile, each with its source, and every bad run.

The profiles here are written in the runtime's own format (`write_profile`) with the numbers a real
quickstart rehearsal wrote; tests/runtime/test_profiler.py and the slow test at the end make real ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.conftest import REPO
from tests.helpers import QuickstartRun
from vtrain.cli import cli
from vtrain.jobfile.load import load_config
from vtrain.request.build import build_request
from vtrain.runtime.profile_record import PROFILE_VERSION, shape_hash, write_profile

CPU_JOB = """\
name: rehearsed
base_output_dir: {out}
trainer:
  package: {pkg}
  module: trainer.task
  image: tf-cpu.2-17
  args: [--epochs=2, --steps-per-epoch=20, --batch-size=64]
distribution_strategy: multi_worker_mirrored
cluster:
  chief: {{machine_type: n1-standard-4}}
  workers: {{replicas: 2}}
"""
GPU_JOB = CPU_JOB.replace("tf-cpu", "tf-gpu").replace(
    "chief: {{machine_type: n1-standard-4}}", "chief: {{machine_type: a2-highgpu-1g}}")


def profile(replica: str = "chief-0", **over: Any) -> dict[str, Any]:
    """A profile as the keras template writes it for the quickstart (the numbers of a real run)."""
    record: dict[str, Any] = {
        "replica": replica, "job_id": "local-1", "config_hash": None, "complete": True,
        "strategy": "multi_worker_mirrored", "replicas_in_sync": 3,
        "device": {"kind": "cpu", "name": "x86_64", "count": 2}, "examples_per_step": 192,
        "steps": {"count": 40, "warmup": 4, "timed": 36, "median_s": 0.0609, "p90_s": 0.109,
                  "input_wait_share": 0.066, "input_wait_method": "probe"},
        "memory": {"kind": "rss", "peak_bytes": 711745536, "baseline_bytes": 650993664},
        "precision": "float32",
        "parameters": {"trainable": 161, "non_trainable": 0,
                       "by_dtype": {"float32": {"count": 161, "bytes": 644, "trainable": 161}}},
        "count_params": 161, "gradient_bytes": 644,
        "optimizer": {"name": "SGD", "slot_bytes": 644, "slots_per_param": 1.0},
        "activation_bytes_per_example": 68,
        "flops": {"per_step": 41134, "per_example": 642.7, "batch": 64, "ratio_to_6n": 0.665},
    }  # fmt: skip
    record.update(over)
    return record


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "job.yaml"
    path.write_text(CPU_JOB.format(out=tmp_path / "out", pkg=REPO / "trainer_templates" / "keras"), encoding="utf-8")
    return path


def job_hash(path: Path) -> str | None:
    """What `vtrain local` puts in CLUSTER_SPEC's job, hashed as the runtime hashes it."""
    return shape_hash(build_request(load_config(path, (), target="local"), ["a", "b"]).body["jobSpec"])


def make_run(job: Path, state: str | None = "JOB_STATE_SUCCEEDED", replicas: int = 3, **over: Any) -> Path:
    """OUTPUT/vtrain-local/local-1 with the job's hash, a result.json and `latest` pointing at it."""
    runs = job.parent / "out" / "vtrain-local"
    folder = runs / "local-1"
    labels = ["chief-0", *[f"worker-{i}" for i in range(replicas - 1)]]
    for label in labels:
        write_profile(str(folder / "profile"), label, {**profile(label, config_hash=job_hash(job)), **over})
    if state is not None:
        (folder / "result.json").write_text(json.dumps({"state": state}), encoding="utf-8")
    (runs / "latest").symlink_to("local-1")
    return folder


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["estimate", *args])


def as_json(*args: str) -> dict[str, Any]:
    result = run(*args, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_every_input_is_measured_and_says_so(job: Path) -> None:
    folder = make_run(job)
    data = as_json(str(job), "--from-run", str(folder))
    sources = data["from_run"]["inputs"]
    assert {k: v["source"] for k, v in sources.items()} == dict.fromkeys(
        ("params", "grad_dtype", "optimizer", "precision", "activations", "step_compute_s"), "measured")
    assert (data["params"], data["optimizer"], data["precision"], data["grad_dtype"]) == (161, "momentum", "fp32",
                                                                                          "fp32")
    assert sources["activations"]["value"] == 68 * 64  # per example × the per-replica batch (192 / 3)
    assert sources["step_compute_s"]["value"] == pytest.approx(0.0609)  # a CPU job rehearsed on a CPU
    assert data["from_run"]["run"] == str(folder) and data["from_run"]["job_id"] == "local-1"
    assert {v["run"] for v in sources.values()} == {str(folder)}
    assert data["from_run"]["warnings"] == []
    check = data["from_run"]["memory_check"]
    assert check["measured_state_bytes"] == check["model_state_bytes"] == 3 * 644  # weights + gradients + slots


def test_the_text_puts_the_measured_numbers_first(job: Path) -> None:
    make_run(job)
    result = run("job.yaml", "--last", "--params", "2M")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"from run {job.parent / 'out' / 'vtrain-local' / 'local-1'} (local-1, succeeded")
    kinds = [line.split()[0] for line in lines[1:7]]
    assert kinds == ["measured"] * 5 + ["given"]
    assert "  given    parameters      2,000,000     the flag; the run measured 161" in lines
    assert lines.index("rehearsed (job.yaml)") > 7  # the ordinary report follows the inputs


def test_from_run_gives_the_advice_of_the_same_numbers_typed_by_hand(job: Path) -> None:
    folder = make_run(job)
    measured = as_json(str(job), "--from-run", str(folder))
    i = {k: v["value"] for k, v in measured["from_run"]["inputs"].items()}
    typed = as_json(str(job), "--params", str(i["params"]), "--optimizer", i["optimizer"], "--precision",
                    i["precision"], "--grad-dtype", i["grad_dtype"], "--activations", str(i["activations"]),
                    "--step-compute", f"{i['step_compute_s']}s")
    measured.pop("from_run")
    assert measured == typed


def test_a_gpu_target_derives_step_compute_from_flops_and_shows_the_range(job: Path) -> None:
    job.write_text(GPU_JOB.format(out=job.parent / "out", pkg=REPO / "trainer_templates" / "keras"), encoding="utf-8")
    make_run(job)
    data = as_json(str(job), "--last")
    step = data["from_run"]["inputs"]["step_compute_s"]
    assert step["value"] == pytest.approx(41134 / (156e12 * 0.4))  # A100's TF32 peak at the default 40%
    assert "FLOPs per step" in step["detail"]
    assert data["from_run"]["inputs"]["utilisation"] == {"value": 0.4, "source": "assumed",
                                                         "detail": "of the target's peak FLOPs", "run": None}
    span = data["from_run"]["utilisation_range"]
    assert [row["utilisation"] for row in span] == [0.3, 0.6]
    assert span[0]["step_compute_s"] == pytest.approx(2 * span[1]["step_compute_s"])
    assert isinstance(data["from_run"]["verdict_changes_in_range"], bool)
    given = as_json(str(job), "--last", "--utilisation", "0.5")["from_run"]["inputs"]
    assert given["utilisation"]["source"] == "given"
    assert given["step_compute_s"]["value"] == pytest.approx(41134 / (156e12 * 0.5))
    text = run(str(job), "--last").output
    assert "the recommendation" in text and "between 30% and 60% utilisation" in text


def test_a_run_of_another_job_warns_and_strict_refuses(job: Path) -> None:
    folder = make_run(job)
    job.write_text(job.read_text().replace("--batch-size=64", "--batch-size=128"), encoding="utf-8")
    data = as_json(str(job), "--from-run", str(folder))
    assert len(data["from_run"]["warnings"]) == 1
    assert "is a run of another job shape (profile config hash" in data["from_run"]["warnings"][0]
    strict = run(str(job), "--from-run", str(folder), "--strict")
    assert strict.exit_code == 2
    assert "another job shape" in strict.output and "(--strict)" in strict.output


def test_a_failed_or_unfinished_run_says_what_it_used(job: Path) -> None:
    make_run(job, state="JOB_STATE_FAILED", complete=False)
    warnings = as_json(str(job), "--last")["from_run"]["warnings"]
    assert any("ended FAILED: the measurements it reached are used" in w for w in warnings)
    assert any("chief-0, worker-0, worker-1 wrote an incomplete profile" in w for w in warnings)
    assert run(str(job), "--last", "--strict").exit_code == 2


def test_a_run_without_result_is_still_running_or_killed(job: Path) -> None:
    make_run(job, state=None)
    assert any("has no result.json" in w for w in as_json(str(job), "--last")["from_run"]["warnings"])


def test_too_few_steps_falls_back_to_the_flag_or_the_ceiling(job: Path) -> None:
    make_run(job, steps={"count": 4, "warmup": 2, "timed": 2, "median_s": None, "p90_s": None})
    data = as_json(str(job), "--last")
    assert data["from_run"]["inputs"]["step_compute_s"]["source"] == "assumed"
    assert data["step_compute_s"] is None
    assert "only 2 steps timed after warm-up (need 5): no measured step time" in data["from_run"]["warnings"]
    assert "step compute falls back to --step-compute, else the communication-bound ceiling" in (
        data["from_run"]["warnings"])
    given = as_json(str(job), "--last", "--step-compute", "200ms")["from_run"]["inputs"]["step_compute_s"]
    assert (given["source"], given["value"]) == ("given", 0.2)


def test_an_older_profile_is_left_out(job: Path) -> None:
    folder = make_run(job, replicas=2)
    older = profile("worker-0")
    (folder / "profile" / "worker-0.json").write_text(json.dumps({**older, "version": 0}), encoding="utf-8")
    data = as_json(str(job), "--last")
    assert data["from_run"]["replicas"] == ["chief-0"]
    assert any(f"profile version 0 is from an older vtrain (this one reads {PROFILE_VERSION})" in w
               for w in data["from_run"]["warnings"])
    (folder / "profile" / "chief-0.json").write_text(json.dumps({**older, "version": 0}), encoding="utf-8")
    result = run(str(job), "--last")
    assert result.exit_code == 2 and "no readable profile" in result.output


def test_a_trainer_that_attached_no_model_needs_params(job: Path) -> None:
    bare = {k: v for k, v in profile().items() if k in ("replica", "job_id", "complete", "strategy", "device",
                                                          "replicas_in_sync", "memory", "steps")}
    folder = job.parent / "out" / "vtrain-local" / "local-1"
    write_profile(str(folder / "profile"), "chief-0", {**bare, "note": "no model attached"})
    (folder / "result.json").write_text(json.dumps({"state": "JOB_STATE_SUCCEEDED"}), encoding="utf-8")
    result = run(str(job), "--from-run", str(folder))
    assert result.exit_code == 2
    assert "the profile has no parameter count (the trainer attached no model" in result.output
    sources = as_json(str(job), "--from-run", str(folder), "--params", "10M")["from_run"]["inputs"]
    assert sources["params"] == {"value": 10_000_000, "source": "given", "detail": "the flag", "run": None}
    assert sources["optimizer"]["source"] == sources["precision"]["source"] == "assumed"
    assert sources["step_compute_s"]["source"] == "measured"  # the steps were timed all the same


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give --params N, or --from-run DIR / --last"),
        (("--last", "--from-run", "."), "give --from-run DIR or --last, not both"),
        (("--params", "1M", "--strict"), "--strict and --utilisation go with --from-run or --last"),
        (("--last",), "--last: "),
        (("--from-run", "."), "no profile/ here"),
        (("--from-run", "nowhere"), "nowhere"),
        (("--last", "--utilisation", "0"), "--utilisation"),
    ],
)
def test_bad_from_run_flags_are_one_line_and_exit_2(job: Path, args: tuple[str, ...], message: str) -> None:
    result = run(str(job), *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_vertex_jobs_profiles_copied_to_a_folder_are_a_run(job: Path) -> None:
    copied = job.parent / "copied"  # gs://BASE/vtrain-profile/JOB_ID, copied: REPLICA.json alone
    for label in ("chief-0", "worker-0"):
        write_profile(str(copied), label, profile(label, config_hash=job_hash(job), job_id="123"))
    data = as_json(str(job), "--from-run", str(copied))
    assert (data["from_run"]["job_id"], data["from_run"]["state"], data["from_run"]["warnings"]) == ("123", None, [])
    result = run(str(job), "--from-run", "gs://bucket/out/vtrain-profile/123")
    assert result.exit_code == 2 and "copy a Vertex job's profiles first" in result.output


def test_last_needs_a_local_output_dir(job: Path) -> None:
    job.write_text(job.read_text().replace(f"base_output_dir: {job.parent / 'out'}", "base_output_dir: gs://bucket/x"))
    result = run(str(job), "--last")
    assert result.exit_code == 2 and "--last needs the job's base_output_dir to be a local folder" in result.output


@pytest.mark.slow
def test_a_real_quickstart_rehearsal_gives_the_advice_of_its_numbers_typed_by_hand(
    quickstart_run: QuickstartRun,
) -> None:
    """The acceptance: `vtrain local` the quickstart (the quickstart page's run, shared with the tests that read
    it: `quickstart_run` in tests/conftest.py), then --from-run vs the same numbers by hand."""
    quickstart_run.assert_succeeded()
    quickstart = str(REPO / "configs" / "quickstart.yaml")
    profiles = sorted(p.name for p in (quickstart_run.run_dir / "profile").iterdir())
    assert profiles == ["chief-0.json", "worker-0.json", "worker-1.json"]
    measured = as_json(quickstart, "--from-run", str(quickstart_run.run_dir))
    assert measured["from_run"]["warnings"] == []  # the same job shape, a succeeded run
    i = {k: v["value"] for k, v in measured["from_run"]["inputs"].items()}
    assert i["params"] == 8 * 16 + 16 + 16 + 1  # the template's Dense(16) and Dense(1) over 8 features
    typed = as_json(quickstart, "--params", str(i["params"]), "--optimizer", i["optimizer"], "--precision",
                    i["precision"], "--grad-dtype", i["grad_dtype"], "--activations", str(i["activations"]),
                    "--step-compute", f"{i['step_compute_s']}s")
    measured.pop("from_run")
    assert measured == typed


@pytest.mark.parametrize(
    ("ran", "device", "same"),
    [
        ({"kind": "cpu", "name": "x86_64"}, ("cpu", "n1-standard-4 host RAM", None), True),
        ({"kind": "gpu", "name": "NVIDIA H200"}, ("gpu", "NVIDIA_H200_141GB", "NVIDIA_H200_141GB"), True),
        ({"kind": "gpu", "name": "Tesla T4"}, ("gpu", "NVIDIA_TESLA_T4", "NVIDIA_TESLA_T4"), True),
        ({"kind": "gpu", "name": "NVIDIA A100-SXM4-40GB"}, ("gpu", "NVIDIA_H100_80GB", "NVIDIA_H100_80GB"), False),
        ({"kind": "cpu", "name": "x86_64"}, ("gpu", "NVIDIA_L4", "NVIDIA_L4"), False),
    ],
)
def test_a_rehearsal_on_the_targets_device_counts_as_measured(ran: dict[str, str], device: tuple[str, str, str | None],
                                                              same: bool) -> None:
    from vtrain.estimate.fromrun import same_device
    from vtrain.estimate.memory import Device

    assert same_device({"device": ran}, Device(device[0], device[1], None, 1, device[2])) is same


def test_peak_flops_come_from_the_catalog_per_device() -> None:
    from vtrain.estimate.fromrun import _peak_flops
    from vtrain.estimate.memory import Device

    a100 = Device("gpu", "NVIDIA_TESLA_A100", 40e9, 1, "NVIDIA_TESLA_A100")
    assert _peak_flops(a100, "fp32") == 156e12 and _peak_flops(a100, "mixed_bf16") == 312e12
    assert _peak_flops(Device("tpu", "TPU v3 core", 16e9, 8, "v3"), "mixed_bf16") == 123e12 / 2  # 2 cores a chip
    assert _peak_flops(Device("gpu", "NVIDIA_RTX_PRO_6000", 96e9, 1, "NVIDIA_RTX_PRO_6000"), "fp32") is None
