"""Cross-field rules, table-driven: what is legal, how it is normalized, what only warns."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from vtrain import catalog
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.config import DEFAULT_PS_MACHINE, JobConfig
from vtrain.jobfile.load import load_config, parse_config
from vtrain.jobfile.schema import parse_duration

TRAINER = """\
name: demo
trainer:
  container:
    image_uri: us-docker.pkg.dev/my-proj/repo/trainer:1
"""


def job(cluster: str, extra: str = "", trainer: str = TRAINER) -> str:
    return trainer + extra + "cluster:\n" + textwrap.indent(textwrap.dedent(cluster).strip("\n"), "  ") + "\n"


def ok(cluster: str, extra: str = "", **kwargs: object) -> JobConfig:
    text = job(cluster, extra)
    try:
        return parse_config(text, "job.yaml", **kwargs)  # type: ignore[arg-type]
    except ConfigError as err:
        pytest.fail(f"expected valid, got:\n{err}\n---\n{text}")


def errors(cluster: str, extra: str = "", **kwargs: object) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        parse_config(job(cluster, extra), "job.yaml", **kwargs)  # type: ignore[arg-type]
    return info.value.problems


# --------------------------------------------------------------------------- legal machines


@pytest.mark.parametrize("machine", sorted(catalog.GPU_MACHINES))
def test_gpu_machine_without_accelerator_gets_its_own(machine: str) -> None:
    fixed = catalog.GPU_MACHINES[machine]
    chief = ok(f"chief: {{machine_type: {machine}}}", "scheduling: {strategy: spot}\n").chief
    assert (chief.accelerator, chief.accelerator_count, chief.gpus) == (fixed.accelerator, fixed.count, fixed.count)


@pytest.mark.parametrize("machine", sorted(catalog.GPU_MACHINES))
def test_gpu_machine_with_its_own_accelerator(machine: str) -> None:
    fixed = catalog.GPU_MACHINES[machine]
    chief = ok(
        f"chief: {{machine_type: {machine}, accelerator: {fixed.accelerator}, accelerator_count: {fixed.count}}}",
        "scheduling: {strategy: spot}\n",
    ).chief
    assert (chief.accelerator, chief.accelerator_count) == (fixed.accelerator, fixed.count)


N1_LEGAL = [(accel, count) for accel, counts in catalog.N1_GPUS.items() for count in counts]


@pytest.mark.parametrize(("accel", "count"), N1_LEGAL)
def test_n1_gpu_legal_counts(accel: str, count: int) -> None:
    chief = ok(f"chief: {{machine_type: n1-standard-4, accelerator: {accel}, accelerator_count: {count}}}").chief
    assert (chief.accelerator, chief.accelerator_count, chief.gpus) == (accel, count, count)


@pytest.mark.parametrize(("accel", "count"), N1_LEGAL)
def test_n1_gpu_vcpu_limit_is_inclusive(accel: str, count: int) -> None:
    limit = catalog.N1_GPUS[accel][count]
    excluded = catalog.N1_GPU_EXCLUDED.get(accel, frozenset())
    at_limit = [m for m, v in catalog.CPU_MACHINES.items() if m.startswith("n1-") and v == limit and m not in excluded]
    over = sorted((v, m) for m, v in catalog.CPU_MACHINES.items() if m.startswith("n1-standard") and v > limit)
    for machine in at_limit:
        ok(f"chief: {{machine_type: {machine}, accelerator: {accel}, accelerator_count: {count}}}")
    if over:
        machine = over[0][1]
        (problem,) = errors(f"chief: {{machine_type: {machine}, accelerator: {accel}, accelerator_count: {count}}}")
        assert problem.path == "cluster.chief.machine_type"
        assert f"allows at most {limit}" in problem.message


@pytest.mark.parametrize(
    ("machine", "accel", "count", "fragment"),
    [
        ("n1-standard-32", "t4", 1, "allows at most 16; nearest legal: n1-standard-32 with 2 × NVIDIA_TESLA_T4"),
        ("n1-highmem-32", "p100", 1, "allows at most 16"),
        ("n1-standard-96", "p100", 4, "allows at most 64"),
        ("n1-standard-64", "p100", 4, "use n1-highcpu-64"),
        ("n1-highmem-64", "p100", 4, "too much memory"),
    ],
)  # fmt: skip
def test_n1_gpu_combinations_vertex_refuses(machine: str, accel: str, count: int, fragment: str) -> None:
    (problem,) = errors(f"chief: {{machine_type: {machine}, accelerator: {accel}, accelerator_count: {count}}}")
    assert problem.path == "cluster.chief.machine_type" and fragment in problem.message


@pytest.mark.parametrize(
    ("machine", "accel", "count"),
    [("n1-standard-32", "t4", 2), ("n1-highcpu-64", "p100", 4), ("n1-standard-16", "t4", 1),
     ("n1-highmem-96", "v100", 8)],
)  # fmt: skip
def test_n1_gpu_combinations_vertex_accepts(machine: str, accel: str, count: int) -> None:
    chief = ok(f"chief: {{machine_type: {machine}, accelerator: {accel}, accelerator_count: {count}}}").chief
    assert chief.gpus == count


@pytest.mark.parametrize("count", [0, 3, 5, 16])
def test_n1_illegal_counts_suggest_the_nearest(count: int) -> None:
    problems = errors(f"chief: {{machine_type: n1-standard-4, accelerator: v100, accelerator_count: {count}}}")
    (problem,) = problems
    assert problem.path == "cluster.chief.accelerator_count"
    assert "1, 2, 4, 8" in problem.message


@pytest.mark.parametrize("accel", ["tpu-v2", "TPU_V2", "tpu-v3", "TPU_V3", "v3"])
@pytest.mark.parametrize("count", [8, 32, 128])
def test_cloud_tpu_devices_and_pods(accel: str, count: int) -> None:
    chief = ok(f"chief: {{machine_type: cloud-tpu, accelerator: {accel}, accelerator_count: {count}}}").chief
    assert chief.accelerator in catalog.TPU_TYPES and chief.accelerator_count == count


@pytest.mark.parametrize("count", [1, 4, 16, 33])
def test_cloud_tpu_illegal_counts(count: int) -> None:
    (problem,) = errors(f"chief: {{machine_type: cloud-tpu, accelerator: TPU_V3, accelerator_count: {count}}}")
    assert problem.path == "cluster.chief.accelerator_count" and "set accelerator_count: 8" in problem.message


TPU_VM_TOPOLOGIES = [(m, t) for m, vm in catalog.TPU_VM_MACHINES.items() for t in vm.topologies]


@pytest.mark.parametrize(("machine", "topology"), TPU_VM_TOPOLOGIES)
def test_tpu_vm_topologies(machine: str, topology: str) -> None:
    chief = ok(f"chief: {{machine_type: {machine}, tpu_topology: '{topology}'}}").chief
    assert (chief.tpu_topology, chief.accelerator, chief.accelerator_count) == (topology, None, 0)


@pytest.mark.parametrize("machine", sorted(catalog.TPU_VM_MACHINES))
def test_tpu_vm_default_topology_is_the_single_host_one(machine: str) -> None:
    chief = ok(f"chief: {{machine_type: {machine}}}").chief
    assert chief.tpu_topology == catalog.TPU_VM_MACHINES[machine].topologies[0]


@pytest.mark.parametrize(
    "machine", ["n1-standard-4", "n2-highmem-8", "n4-highcpu-2", "e2-standard-4", "c2-standard-8", "m1-ultramem-40"],
)
def test_cpu_machines(machine: str) -> None:
    chief = ok(f"chief: {{machine_type: {machine}}}").chief
    assert (chief.accelerator, chief.gpus) == (None, 0)


# --------------------------------------------------------------------------- normalization


@pytest.mark.parametrize(
    ("machine", "alias", "count", "enum"),
    [
        ("a2-highgpu-1g", "a100", 1, "NVIDIA_TESLA_A100"),
        ("a2-ultragpu-2g", "a100-80gb", 2, "NVIDIA_A100_80GB"),
        ("a3-highgpu-8g", "h100", 8, "NVIDIA_H100_80GB"),
        ("g2-standard-4", "l4", 1, "NVIDIA_L4"),
        ("g2-standard-4", "L4", 1, "NVIDIA_L4"),
        ("n1-standard-8", "t4", 2, "NVIDIA_TESLA_T4"),
        ("n1-standard-8", "T4", 2, "NVIDIA_TESLA_T4"),
        ("n1-standard-8", "nvidia_tesla_v100", 1, "NVIDIA_TESLA_V100"),
        ("cloud-tpu", "tpu-v3", 8, "TPU_V3"),
        ("cloud-tpu", "tpu_v2", 32, "TPU_V2"),
    ],
)
def test_accelerator_aliases_become_enum_names(machine: str, alias: str, count: int, enum: str) -> None:
    chief = ok(f"chief: {{machine_type: {machine}, accelerator: {alias}, accelerator_count: {count}}}").chief
    assert (chief.accelerator, chief.accelerator_count) == (enum, count)


def test_workers_and_evaluator_inherit_chief_machine_and_accelerators() -> None:
    config = ok("""
        chief: {machine_type: n1-standard-8, accelerator: t4, accelerator_count: 2}
        workers: {replicas: 3}
        evaluator: {}
    """)
    for pool in (config.workers, config.evaluator):
        assert pool is not None
        assert (pool.machine_type, pool.accelerator, pool.accelerator_count) == (
            "n1-standard-8", "NVIDIA_TESLA_T4", 2)
    assert config.workers is not None and config.workers.replicas == 3
    assert config.evaluator is not None and config.evaluator.replicas == 1


def test_workers_naming_the_same_machine_still_inherit_accelerators() -> None:
    workers = ok("""
        chief: {machine_type: n1-standard-8, accelerator: t4, accelerator_count: 2}
        workers: {replicas: 2, machine_type: n1-standard-8}
    """).workers
    assert workers is not None and (workers.accelerator, workers.accelerator_count) == ("NVIDIA_TESLA_T4", 2)


def test_workers_naming_another_machine_do_not_inherit_accelerators() -> None:
    workers = ok("""
        chief: {machine_type: n1-standard-8, accelerator: t4, accelerator_count: 2}
        workers: {replicas: 2, machine_type: n1-standard-16}
    """).workers
    assert workers is not None
    assert (workers.machine_type, workers.accelerator, workers.accelerator_count, workers.gpus) == (
        "n1-standard-16", None, 0, 0)


def test_workers_may_override_one_inherited_field() -> None:
    workers = ok("""
        chief: {machine_type: n1-standard-8, accelerator: t4, accelerator_count: 2}
        workers: {replicas: 2, accelerator_count: 1}
    """).workers
    assert workers is not None and (workers.accelerator, workers.accelerator_count) == ("NVIDIA_TESLA_T4", 1)


@pytest.mark.parametrize(
    ("chief", "expected"),
    [
        ("{machine_type: n1-highmem-16}", "n1-highmem-16"),  # CPU chief: PS reuse its machine
        ("{machine_type: n1-standard-8, accelerator: t4, accelerator_count: 1}", DEFAULT_PS_MACHINE),
        ("{machine_type: a2-highgpu-1g}", DEFAULT_PS_MACHINE),
    ],
)
def test_parameter_server_default_machine(chief: str, expected: str) -> None:
    config = ok(f"""
        chief: {chief}
        workers: {{replicas: 2}}
        ps: {{replicas: 2}}
    """)
    ps = config.parameter_servers
    assert ps is not None and (ps.machine_type, ps.accelerator, ps.replicas) == (expected, None, 2)


REDUCER_SIZING = [
    # chief machine + GPUs, workers, reducer machine, expected reducers
    ("{machine_type: a2-highgpu-8g}", 7, "n1-highcpu-16", 25),  # 8 × 100 / 32
    ("{machine_type: a2-highgpu-1g}", 1, "n1-highcpu-16", 2),  # 2 × 24 / 32 = 1.5
    ("{machine_type: a2-highgpu-2g}", 3, "n1-highcpu-16", 4),  # 4 × 32 / 32, exact
    ("{machine_type: n1-standard-16, accelerator: v100, accelerator_count: 2}", 3, "n1-highcpu-16", 4),
    ("{machine_type: n1-standard-4, accelerator: t4, accelerator_count: 1}", 1, "n1-highcpu-16", 1),  # 2 × 8
    ("{machine_type: a3-highgpu-8g}", 3, "n1-highcpu-32", 125),  # 4 × 1000 / 32 (NIC capped)
    ("{machine_type: g2-standard-48}", 4, "e2-highcpu-16", 16),  # 5 × 50 / 16
]


@pytest.mark.parametrize(("chief", "workers", "reducer", "expected"), REDUCER_SIZING)
def test_reduction_server_auto_sizing(chief: str, workers: int, reducer: str, expected: int) -> None:
    config = ok(f"""
        chief: {chief}
        workers: {{replicas: {workers}}}
        reduction_server: {{replicas: auto, machine_type: {reducer}}}
    """, "scheduling: {strategy: spot}\n")
    red = config.reduction_server
    assert red is not None and red.replicas == expected
    demand = config.training_replicas() * catalog.nic_gbps(config.chief.machine_type)
    assert red.replicas * catalog.nic_gbps(reducer) >= demand > (red.replicas - 1) * catalog.nic_gbps(reducer)


def test_reduction_server_defaults_to_auto_on_the_default_machine() -> None:
    red = ok("""
        chief: {machine_type: a2-highgpu-8g}
        workers: {replicas: 7}
        reducers: {}
    """).reduction_server
    assert red is not None
    assert (red.machine_type, red.replicas, red.accelerator) == (catalog.REDUCTION_SERVER_DEFAULT_MACHINE, 25, None)


def test_reduction_server_explicit_replicas_are_kept() -> None:
    red = ok("""
        chief: {machine_type: a2-highgpu-8g}
        workers: {replicas: 7}
        reduction_server: {replicas: 3}
    """).reduction_server
    assert red is not None and red.replicas == 3


@pytest.mark.parametrize(
    "chief",
    [
        "{machine_type: n1-standrad-8}",
        "{machine_type: n1-standard-96, accelerator: v100, accelerator_count: 1}",
        "{machine_type: n1-standard-8, accelerator: t4, accelerator_count: 3}",
        "{machine_type: a2-highgpu-1g, tpu_topology: 2x2}",
    ],
)
def test_inherited_machine_problems_are_reported_once_at_the_chief(chief: str) -> None:
    problems = errors(f"""
        chief: {chief}
        workers: {{replicas: 2}}
        evaluator: {{}}
    """)
    assert [p.path.split(".")[1] for p in problems] == ["chief"]


def test_a_pool_with_its_own_bad_machine_is_reported_too() -> None:
    problems = errors("""
        chief: {machine_type: n1-standrad-8}
        workers: {replicas: 2, machine_type: n1-standrad-16}
    """)
    assert [p.path for p in problems] == ["cluster.chief.machine_type", "cluster.workers.machine_type"]


def test_one_breakage_shared_by_several_pools_is_one_problem() -> None:
    env = "".join(f"    V{i}: x\n" for i in range(100))
    trainer = TRAINER + "  env:\n" + env
    with pytest.raises(ConfigError) as info:
        parse_config(job("chief: {machine_type: n1-standard-4}\nworkers: {replicas: 2}\nevaluator: {}",
                         trainer=trainer), "job.yaml")
    (problem,) = info.value.problems
    assert (problem.path, problem.line) == ("trainer.env", 5)
    assert problem.message.startswith("cluster.chief, cluster.workers, cluster.evaluator would get up to 101 ")
    assert problem.message.endswith("Vertex allows at most 100: remove 1")


def test_cpu_image_alias_with_reduction_server_is_reported_once() -> None:
    trainer = "name: demo\ntrainer:\n  package_uris: [gs://b-1/t.tar.gz]\n  module: t.task\n  image: tf-cpu.2-17\n"
    with pytest.raises(ConfigError) as info:
        parse_config(job("chief: {machine_type: a2-highgpu-1g}\nworkers: {replicas: 1}\nreduction_server: {}",
                         trainer=trainer), "job.yaml")
    assert [(p.path, p.line) for p in info.value.problems] == [("trainer.image", 5)]
    assert "use tf-gpu.2-17" in info.value.problems[0].message


# --------------------------------------------------------------------------- warnings do not fail


@pytest.mark.parametrize(
    ("cluster", "extra", "path", "fragment"),
    [
        ("chief: {machine_type: n1-standard-4}", "region: us-central9\n", "region",
         "not a known Vertex AI training region; did you mean 'us-central1'?"),
        ("chief: {machine_type: n1-standard-4}", "region: mars-north1\n", "region", "not a known"),
        ("chief: {machine_type: a3-highgpu-1g}", "", "cluster.chief.machine_type", "set scheduling.strategy"),
        ("chief: {machine_type: a3-highgpu-4g}", "scheduling: {strategy: standard}\n",
         "cluster.chief.machine_type", "only as Spot or flex-start"),
        ("chief: {machine_type: n1-standard-4, accelerator: t4, accelerator_count: 1}",
         "distribution_strategy: mirrored\n", "distribution_strategy", "one_device is equivalent"),
        ("chief: {machine_type: a2-highgpu-2g}", "distribution_strategy: one_device\n",
         "distribution_strategy", "use mirrored"),
    ],
)  # fmt: skip
def test_warnings_do_not_fail(cluster: str, extra: str, path: str, fragment: str) -> None:
    config = ok(cluster, extra)
    (warning,) = config.warnings
    assert (warning.severity, warning.path) == ("warning", path)
    assert fragment in warning.message
    assert warning.line is not None
    assert str(warning).startswith(f"job.yaml:{warning.line}:{warning.column}: warning: {path}: ")


@pytest.mark.parametrize("strategy", ["spot", "flex_start"])
def test_spot_only_machines_are_fine_with_spot_or_flex(strategy: str) -> None:
    assert ok("chief: {machine_type: a3-highgpu-1g}", f"scheduling: {{strategy: {strategy}}}\n").warnings == ()


def test_warnings_ride_along_with_errors() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(job("chief: {machine_type: n1-standard-4, replicas: 2}", "region: us-central9\n"), "job.yaml")
    assert [p.path for p in info.value.problems] == ["cluster.chief.replicas"]
    assert [p.path for p in info.value.warnings] == ["region"]


# --------------------------------------------------------------------------- legal strategies


@pytest.mark.parametrize(
    ("strategy", "cluster"),
    [
        ("one_device", "chief: {machine_type: n1-standard-4, accelerator: t4, accelerator_count: 1}"),
        ("mirrored", "chief: {machine_type: a2-highgpu-4g}"),
        ("multi_worker_mirrored", "chief: {machine_type: n1-standard-4}\nworkers: {replicas: 2}"),
        ("parameter_server", "chief: {machine_type: n1-standard-4}\nworkers: {replicas: 2}\nps: {replicas: 1}"),
        ("tpu", "chief: {machine_type: ct5lp-hightpu-4t}"),
        ("tpu", "chief: {machine_type: cloud-tpu, accelerator: tpu-v3, accelerator_count: 8}"),
        ("auto", "chief: {machine_type: n1-standard-4}\nworkers: {replicas: 2}\nps: {replicas: 1}"),
        ("multi-worker-mirrored", "chief: {machine_type: n1-standard-4}\nworkers: {replicas: 1}"),
    ],
)
def test_strategies_that_fit_the_cluster(strategy: str, cluster: str) -> None:
    config = ok(cluster, f"distribution_strategy: {strategy}\n")
    assert config.distribution_strategy == strategy.replace("-", "_")
    assert config.warnings == ()


@pytest.mark.parametrize("labels", ["{équipe: données}", "{team: ml-infra_2}", "{k: ''}"])
def test_labels_may_use_international_lower_case_letters(labels: str) -> None:
    assert ok("chief: {machine_type: n1-standard-4}", f"labels: {labels}\n").labels


@pytest.mark.parametrize("labels", ["{Équipe: x}", "{team: Données}", "{2team: x}"])
def test_labels_reject_upper_case_even_when_international(labels: str) -> None:
    (problem,) = errors("chief: {machine_type: n1-standard-4}", f"labels: {labels}\n")
    assert problem.path.startswith("labels.")


def test_no_tpu_image_for_tf_2_17_and_tpu_pools_default_to_2_15() -> None:
    from vtrain.request.custom_job import executor_image

    trainer = "name: demo\ntrainer:\n  package_uris: [gs://b-1/t.tar.gz]\n  module: t.task\n"
    with pytest.raises(ConfigError) as info:
        parse_config(job("chief: {machine_type: ct5lp-hightpu-4t}", trainer=trainer + "  image: tf-tpu.2-17\n"),
                     "job.yaml")
    (problem,) = info.value.problems
    assert problem.path == "trainer.image" and "available: 2-12, 2-15" in problem.message
    config = parse_config(job("chief: {machine_type: ct5lp-hightpu-4t}", "region: us-west1\n", trainer=trainer),
                          "job.yaml")
    assert executor_image(config, config.chief) == "us-docker.pkg.dev/vertex-ai/training/tf-tpu.2-15.cp310:latest"


def test_flex_start_timeout_is_at_most_seven_days() -> None:
    week = ok("chief: {machine_type: a2-highgpu-1g}", "scheduling: {strategy: flex_start, timeout: 7d}\n")
    assert week.warnings == ()
    (problem,) = errors("chief: {machine_type: a2-highgpu-1g}", "scheduling: {strategy: flex_start, timeout: 8d}\n")
    assert problem.path == "scheduling.timeout" and "at most 7 days" in problem.message
    assert ok("chief: {machine_type: a2-highgpu-1g}", "scheduling: {timeout: 30d}\n").scheduling.timeout_s == 30 * 86400


@pytest.mark.parametrize(
    ("cluster", "fragment"),
    [("chief: {machine_type: n1-standard-8, accelerator: t4, accelerator_count: 1}", "NVIDIA_TESLA_T4"),
     ("chief: {machine_type: n1-standard-8}", "CPU-only jobs")],
)  # fmt: skip
def test_flex_start_outside_the_documented_gpus_warns(cluster: str, fragment: str) -> None:
    (warning,) = ok(cluster, "scheduling: {strategy: flex_start}\n").warnings
    assert warning.path == "scheduling.strategy" and fragment in warning.message


def test_flex_start_with_one_machine_everywhere_and_max_wait() -> None:
    config = ok("""
        chief: {machine_type: a2-highgpu-8g}
        workers: {replicas: 3}
    """, "scheduling: {strategy: flex_start, max_wait: 2h}\n")
    assert (config.scheduling.strategy, config.scheduling.max_wait_s) == ("flex_start", 7200)


# --------------------------------------------------------------------------- trainer sources


def _package(tmp_path: Path, module: str = "trainer/task.py", layout: str = ".") -> Path:
    root = tmp_path / "pkg"
    (root / layout / module).parent.mkdir(parents=True, exist_ok=True)
    (root / layout / module).write_text("")
    (root / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "0.1"\n')
    return root


@pytest.mark.parametrize(
    ("file", "layout", "module"),
    [
        ("trainer/task.py", ".", "trainer.task"),
        ("trainer/task.py", "src", "trainer.task"),
        ("trainer/__main__.py", ".", "trainer"),
        ("trainer/__main__.py", "src", "trainer"),
        ("task.py", ".", "task"),
    ],
)
def test_package_layouts_find_the_module(tmp_path: Path, file: str, layout: str, module: str) -> None:
    _package(tmp_path, file, layout)
    (tmp_path / "job.yaml").write_text(
        f"name: demo\nstaging_bucket: gs://my-bucket/staging\ntrainer:\n  package: pkg\n  module: {module}\n"
        "cluster:\n  chief: {machine_type: n1-standard-4}\n"
    )
    config = load_config(tmp_path / "job.yaml")
    assert config.trainer.package == (tmp_path / "pkg").resolve()


def test_local_target_needs_no_staging_bucket(tmp_path: Path) -> None:
    _package(tmp_path)
    (tmp_path / "job.yaml").write_text(
        "name: demo\nbase_output_dir: ./out\ntrainer:\n  package: pkg\n  module: trainer.task\n"
        "cluster:\n  chief: {machine_type: n1-standard-4}\n"
    )
    assert load_config(tmp_path / "job.yaml", target="local").base_output_dir == str(tmp_path.resolve() / "out")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "job.yaml")
    assert sorted(p.path for p in info.value.problems) == ["base_output_dir", "trainer.package"]


# --------------------------------------------------------------------------- --set overrides


BASE = job("""
    chief: {machine_type: n1-standard-4}
    workers: {replicas: 2}
""")


def test_set_beats_the_file_and_later_set_beats_earlier() -> None:
    config = parse_config(BASE, "job.yaml", overrides=["cluster.workers.replicas=4"])
    assert config.workers is not None and config.workers.replicas == 4
    config = parse_config(BASE, "job.yaml", overrides=["cluster.workers.replicas=4", "cluster.workers.replicas=6"])
    assert config.workers is not None and config.workers.replicas == 6


def test_set_creates_missing_sections_and_parses_yaml_values() -> None:
    config = parse_config(BASE, "job.yaml", overrides=[
        "scheduling.timeout=1h30m", "labels={team: ml}", "cluster.chief.accelerator=t4",
        "cluster.chief.accelerator_count=1", "trainer.args=[--epochs, '3']",
    ])  # fmt: skip
    assert config.scheduling.timeout_s == 5400
    assert dict(config.labels) == {"team": "ml"}
    assert (config.chief.accelerator, config.chief.accelerator_count) == ("NVIDIA_TESLA_T4", 1)
    assert config.workers is not None and config.workers.accelerator == "NVIDIA_TESLA_T4"  # inherits
    assert config.trainer.args == ("--epochs", "3")


def test_set_does_not_touch_the_callers_data() -> None:
    first = parse_config(BASE, "job.yaml", overrides=["cluster.workers.replicas=4"])
    second = parse_config(BASE, "job.yaml")
    assert first.workers is not None and second.workers is not None
    assert (first.workers.replicas, second.workers.replicas) == (4, 2)


@pytest.mark.parametrize(
    ("override", "path", "fragment"),
    [
        ("cluster.workers.replicas=many", "cluster.workers.replicas", "expected a whole number"),
        ("cluster.chief.machine_type=n1-standrad-4", "cluster.chief.machine_type", "did you mean 'n1-standard-4'?"),
        ("cluster.workerz.replicas=2", "cluster.workerz", "did you mean 'workers'?"),
        ("scheduling.timeout=soon", "scheduling.timeout", "expected a duration"),
        ("name.first=x", "name", "is not a mapping"),
        ("replicas", "", "--set expects KEY.PATH=VALUE"),
        ("=3", "", "needs a key path"),
        ("cluster..workers.replicas=3", "", "key path 'cluster..workers.replicas' has an empty part; write "
                                            "cluster.workers.replicas"),
        ("cluster.workers.replicas.=3", "", "has an empty part"),
    ],
)
def test_set_errors_point_at_the_flag(override: str, path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(BASE, "job.yaml", overrides=[override])
    (problem,) = info.value.problems
    assert (problem.file, problem.path, problem.line) == (f"--set {override}", path, None)
    assert fragment in problem.message
    assert str(problem).startswith(f"--set {override}: ")


def test_set_inside_a_list_says_to_set_the_whole_list() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(BASE, "job.yaml", overrides=["trainer.container.command=[a, b]", "trainer.container.command.0=c"])
    (problem,) = info.value.problems
    assert str(problem) == ("--set trainer.container.command.0=c: trainer.container.command: is not a mapping; cannot "
                            "set a key inside it; set the whole list: trainer.container.command=[...]")


def test_file_errors_keep_file_positions_next_to_set_errors() -> None:
    text = BASE.replace("replicas: 2", "replicas: two")
    with pytest.raises(ConfigError) as info:
        parse_config(text, "job.yaml", overrides=["scheduling.timeout=soon"])
    assert [(p.file, p.path) for p in info.value.problems] == [
        ("--set scheduling.timeout=soon", "scheduling.timeout"), ("job.yaml", "cluster.workers.replicas")]


def test_set_fixes_a_broken_file() -> None:
    text = BASE.replace("replicas: 2", "replicas: two")
    config = parse_config(text, "job.yaml", overrides=["cluster.workers.replicas=3"])
    assert config.workers is not None and config.workers.replicas == 3


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("24h", 86400), ("7d", 604800), ("1h30m", 5400), ("1d12h", 129600),
     ("3600", 3600), (3600, 3600), ("1.5h", 5400), ("2H", 7200), ("1h 30m", 5400)],
)  # fmt: skip
def test_durations(text: str | int, seconds: int) -> None:
    assert parse_duration(text) == seconds
    value = f"'{text}'" if isinstance(text, str) else text
    config = ok("chief: {machine_type: n1-standard-4}", f"scheduling: {{timeout: {value}}}\n")
    assert config.scheduling.timeout_s == seconds


@pytest.mark.parametrize("text", ["", "h", "1x", "30m1", "m30", "-5", "1h-30m", "forever"])
def test_bad_durations(text: str) -> None:
    assert parse_duration(text) is None
    (problem,) = errors("chief: {machine_type: n1-standard-4}", f"scheduling: {{timeout: '{text}'}}\n")
    assert problem.path == "scheduling.timeout" and "90s, 30m, 24h or 7d" in problem.message


def test_zero_duration_is_rejected() -> None:
    (problem,) = errors("chief: {machine_type: n1-standard-4}", "scheduling: {timeout: 0s}\n")
    assert problem.message == "must be longer than 0s"


def test_relative_local_staging_and_output_dirs_start_at_the_job_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As trainer.package does (and the job file `vtrain init` writes says): not at the current directory."""
    _package(tmp_path)
    (tmp_path / "job.yaml").write_text(
        "name: demo\nstaging_bucket: stage\nbase_output_dir: ../out\ntrainer:\n  package: pkg\n"
        "  module: trainer.task\ncluster:\n  chief: {machine_type: n1-standard-4}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(tmp_path / "job.yaml", target="local")
    assert config.staging_bucket == str(tmp_path.resolve() / "stage")
    assert config.base_output_dir == str(tmp_path.resolve().parent / "out")
    gcs = load_config(tmp_path / "job.yaml", ["staging_bucket=gs://bkt/s", "base_output_dir=gs://bkt/o"])
    assert (gcs.staging_bucket, gcs.base_output_dir) == ("gs://bkt/s", "gs://bkt/o")
