"""The job file's shape (version 1), checked on the raw YAML before any object is built.

Every problem is collected, never just the first: unknown keys get the nearest
valid key suggested, wrong types say what was expected. What passes comes out
normalized (durations in seconds, enum words lower-case, env values as text),
ready for :mod:`vtrain.jobfile.model` to turn into dataclasses.
"""

from __future__ import annotations

from typing import Any

from vtrain.constants import DILOCO_COMPRESSIONS, MAX_REPLICAS, SCHEDULING_STRATEGIES, STRATEGIES
from vtrain.errors import Problem
from vtrain.jobfile.nodes import (  # noqa: F401 - the node types, also reachable from here
    MAX_DURATION_S,
    Bool,
    Checker,
    Duration,
    EnvValue,
    Int,
    ListOf,
    MapOf,
    Number,
    Obj,
    OneOrList,
    Scalar,
    Seconds,
    Str,
    _type_name,
    did_you_mean,
    parse_duration,
)
from vtrain.jobfile.yamlpos import Positions

RESERVATION_AFFINITIES = ("none", "any", "specific")
#: `tuning:` words; vtrain/tuning/model.py maps them to StudySpec's enums.
TUNING_GOALS = ("maximize", "minimize")
TUNING_PARAMETER_TYPES = ("double", "integer", "discrete", "categorical")
TUNING_SCALES = ("linear", "log", "reverse_log")
TUNING_ALGORITHMS = ("default", "random", "grid")
TUNING_EARLY_STOPPING = ("median", "none")
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")



_machine_fields = {
    "machine_type": Str(),
    "accelerator": Str(),
    "accelerator_count": Int(minimum=0),
    "tpu_topology": Str(),
    "boot_disk": Obj({"type": Str(BOOT_DISK_TYPES), "size_gb": Int()}),
}


def _pool(allow_auto: bool = False) -> Obj:
    return Obj(
        {
            "replicas": Int(minimum=0, maximum=MAX_REPLICAS, allow_auto=allow_auto),
            **_machine_fields,
            "args": ListOf(Str(), single_ok=True),
            "env": MapOf(EnvValue()),
        },
        aliases={"replica_count": "replicas"},
    )


JOB_SCHEMA = Obj(
    {
        "version": Int(minimum=1, maximum=1),
        "name": Str(),
        "project": Str(),
        "region": Str(),
        "staging_bucket": Str(),
        "base_output_dir": Str(),
        "service_account": Str(),
        "network": Str(),
        "reserved_ip_ranges": ListOf(Str(), single_ok=True),
        "labels": MapOf(Str()),
        "tensorboard": Str(),
        "enable_web_access": Bool(),
        "enable_dashboard_access": Bool(),
        "persistent_resource_id": Str(),
        "kms_key": Str(),
        "trainer": Obj(
            {
                "package": Str(),
                "package_uris": ListOf(Str(), single_ok=True),
                "container": Obj(
                    {"image_uri": Str(), "command": ListOf(Str(), single_ok=True)},
                    required=("image_uri",),
                ),
                "module": Str(),
                "image": Str(),
                "args": ListOf(Str(), single_ok=True),
                "env": MapOf(EnvValue()),
            }
        ),
        "distribution_strategy": Str(STRATEGIES),
        "cluster": Obj(
            {
                "chief": _pool(),
                "workers": _pool(),
                "parameter_servers": _pool(),
                "reduction_server": _pool(allow_auto=True),
                "evaluator": _pool(),
            },
            required=("chief",),
            aliases={"worker": "workers", "ps": "parameter_servers", "reducers": "reduction_server"},
        ),
        "scheduling": Obj(
            {
                "timeout": Duration(),
                "restart_job_on_worker_restart": Bool(),
                "disable_retries": Bool(),
                "strategy": Str(SCHEDULING_STRATEGIES),
                "max_wait": Duration(),
                # `submit --recover`: tried in order after a stock-out (vtrain's own; never sent to Vertex)
                "fallback": ListOf(
                    Obj({"region": Str(), "machine_type": Str(), "accelerator": Str(), "accelerator_count": Int(1)})
                ),
            }
        ),
        "reservation": Obj({"affinity": Str(RESERVATION_AFFINITIES), "name": Str()}),
        "diloco": Obj(
            {
                "inner_steps": Int(minimum=1),
                "outer_lr": Number(above=0),
                "outer_momentum": Number(minimum=0, below=1),
                "min_quorum": Int(minimum=1),
                "grace": Seconds(),
                "straggler_timeout": Seconds(),
                "compression": Str(DILOCO_COMPRESSIONS),
                "fragments": Int(minimum=1),
                "token_weighting": Bool(),
                "registration_timeout": Seconds(),
                "checkpoint_every": Seconds(),
                "max_staleness": Int(minimum=0),
                "overlap": Bool(),
                "second_learner_pool": _pool(),
            }
        ),
        "tuning": Obj(
            {
                "metric": OneOrList(Obj({"name": Str(), "goal": Str(TUNING_GOALS)}, required=("name", "goal"))),
                "parameters": MapOf(
                    Obj(
                        {
                            "type": Str(TUNING_PARAMETER_TYPES),
                            "min": Number(as_written=True),
                            "max": Number(as_written=True),
                            "scale": Str(TUNING_SCALES),
                            "values": ListOf(Scalar()),
                        },
                        required=("type",),
                    )
                ),
                "algorithm": Str(TUNING_ALGORITHMS),
                "max_trials": Int(minimum=1, maximum=2**31 - 1),
                "parallel_trials": Int(minimum=1, maximum=2**31 - 1),
                "max_failed_trials": Int(minimum=0, maximum=2**31 - 1),
                "early_stopping": Str(TUNING_EARLY_STOPPING),
            },
            required=("metric", "parameters", "max_trials"),
            aliases={"metrics": "metric"},
        ),
    },
    required=("name", "trainer", "cluster"),
)


def check_job(data: Any, positions: Positions) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Check raw job-file data against the schema; return (normalized data or None, problems)."""
    ck = Checker(positions)
    if data is None:
        ck.add((), "the job file is empty; it needs at least name, trainer and cluster")
        return None, ck.problems
    out = JOB_SCHEMA.check(data, (), ck)
    return out, ck.problems
