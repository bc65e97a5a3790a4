"""What the guard tests of issue 19 share: every leaf key of the job file's schema, its node, and a
minimal job file in which that key has an effect (the context a key needs: `diloco.*` only acts under
`distribution_strategy: diloco`, `dtensor.*` under dtensor, an accelerator count only with an
accelerator, ...). The tests set each
key from what its node declares (examples, choices, default), so a key added to the schema is covered
without touching them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from vtrain.jobfile.assemble import build_config
from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.json_schema import key_paths
from vtrain.jobfile.schema import JOB_SCHEMA, Bool, Obj, Str, check_job
from vtrain.jobfile.yamlpos import Positions

Path_ = tuple[Any, ...]

MINIMAL: dict[str, Any] = {
    "name": "guard",
    "staging_bucket": "gs://guard-bucket/staging",
    "trainer": {"module": "guard.task", "package_uris": ["gs://guard-bucket/guard-0.1.tar.gz"]},
    "cluster": {"chief": {"machine_type": "n1-standard-4"}},
}
_TUNING = {"metric": {"name": "accuracy", "goal": "maximize"},
           "parameters": {"lr": {"type": "double", "min": 0.001, "max": 0.1}}, "max_trials": 4}
#: (key-path prefix, what the job file needs besides for a key under it to act). `*` is any one part.
CONTEXT: tuple[tuple[str, dict[str, Any]], ...] = (
    ("diloco", {"distribution_strategy": "diloco", "cluster.workers.replicas": 2}),
    ("dtensor", {"distribution_strategy": "dtensor", "cluster.workers.replicas": 1}),
    ("tuning", {"tuning": _TUNING}),
    ("cluster.reduction_server", {"cluster.reduction_server.replicas": 1}),  # `auto` is sized by validate
    ("staging_bucket", {"trainer.package": "trainer"}),  # the bucket names where a built package goes
    ("trainer.build", {"trainer.package": "trainer", "trainer.package_uris": [], "trainer.module": "guard.task",
                       "trainer.build.repository": "us-central1-docker.pkg.dev/p/r/guard"}),  # its tag hashes the rest
    ("trainer.container.command", {"trainer.container.image_uri": "us-docker.pkg.dev/p/r/guard:1"}),
    ("cluster.*.accelerator_count", {"cluster.*.accelerator": "NVIDIA_TESLA_T4"}),
    ("diloco.second_learner_pool.accelerator_count", {"diloco.second_learner_pool.accelerator": "NVIDIA_TESLA_T4"}),
    ("psc_interface.dns_peering", {"psc_interface.network_attachment": "guard-attachment"}),
    ("cluster.*.container.command", {"cluster.*.container.image_uri": "us-docker.pkg.dev/p/r/guard:1"}),
    ("diloco.second_learner_pool.container.command",
     {"diloco.second_learner_pool.container.image_uri": "us-docker.pkg.dev/p/r/guard:1"}),
)


def node_at(path: Path_) -> Any:
    node: Any = JOB_SCHEMA
    for part in path:
        node = node.fields[part]
    return node


def leaves() -> list[Path_]:
    """Every key path whose node is a value, not a mapping of further keys."""
    return [p for p in key_paths() if not isinstance(node_at(p), Obj)]


def dotted(path: Path_) -> str:
    return ".".join(map(str, path))


def _matches(prefix: str, path: Path_) -> bool:
    parts = prefix.split(".")
    return len(parts) <= len(path) and all(a in ("*", str(b)) for a, b in zip(parts, path[:len(parts)], strict=True))


def put(data: dict[str, Any], path: Path_, value: Any) -> None:
    for part in path[:-1]:
        data = data.setdefault(part, {})
    data[path[-1]] = value


def get(data: dict[str, Any], path: Path_) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def baseline(path: Path_, *, without: bool = False) -> dict[str, Any]:
    """A minimal job file in which `path` acts: its context, its parent mappings present; `without`: the key
    itself left out (to see what the model builds in its absence)."""
    data = copy.deepcopy(MINIMAL)
    for prefix, needs in CONTEXT:
        if _matches(prefix, path):
            for key, value in needs.items():  # `*` stands for the key's own part there (its pool)
                where = tuple(path[i] if part == "*" else part for i, part in enumerate(key.split(".")))
                put(data, where, copy.deepcopy(value))
    for i in range(1, len(path)):  # the mappings above the key, e.g. cluster.evaluator: {}
        if get(data, path[:i]) is None and not node_at(path[:i]).required:  # trainer.container needs its image
            put(data, path[:i], {})
    if without and len(path) > 0:
        parent = get(data, path[:-1]) if len(path) > 1 else data
        parent.pop(path[-1], None)
    return data


def candidates(path: Path_, data: dict[str, Any]) -> list[Any]:
    """Valid values for `path` other than its default and than what `data` already has there."""
    node = node_at(path)
    values = list(node.examples)
    if isinstance(node, Str):
        values += [c for c in node.choices if c not in values]
    if isinstance(node, Bool):
        values += [True, False]
    return [v for v in values if v != node.default and v != get(data, path)]


def build(data: dict[str, Any], root: Path) -> JobConfig:
    """The job config of `data` as a job file in `root` would give it (schema-checked; no cross-key rules)."""
    checked, problems = check_job(copy.deepcopy(data), Positions())
    assert not problems, problems
    assert checked is not None
    return build_config(checked, source=root / "job.yaml", positions=Positions())


def write_trainer(root: Path) -> None:
    """The package `trainer.package: trainer` names, so a package trainer's URIs can be planned."""
    package = root / "trainer"
    (package / "guard").mkdir(parents=True, exist_ok=True)
    (package / "pyproject.toml").write_text('[project]\nname = "guard"\nversion = "0.1"\n')
    (package / "guard" / "__init__.py").write_text("")
    (package / "guard" / "task.py").write_text("print('guard')\n")
