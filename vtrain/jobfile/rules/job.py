"""Job-level fields: names, regions, URIs, labels, env, scheduling and reservations."""

from __future__ import annotations

import re

from vtrain import catalog
from vtrain.constants import FLEX_START, MAX_DISPLAY_NAME, MAX_ENV, MAX_LABELS, STRATEGY_ENV, VTRAIN_LABELS
from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.nodes import did_you_mean
from vtrain.jobfile.rules.base import (
    _BUCKET,
    _ENV_NAME,
    _EXPERIMENT,
    _GCS_URI,
    _KMS_KEY,
    _NETWORK,
    _PROJECT,
    _REGION,
    _SERVICE_ACCOUNT,
    _TENSORBOARD,
    Rules,
    check_label,
    checked_fix,
    pool_path,
    try_fix,
    with_suggestion,
)
from vtrain.jobfile.rules.pools import check_reservation
from vtrain.jobfile.yamlpos import PathKey
from vtrain.userpaths import path_problem

#: https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws#requirements
FLEX_START_MAX_TIMEOUT_S = 7 * 24 * 3600
FLEX_START_GPUS = frozenset(a.enum for a in catalog.ACCELERATORS if a.flex_start)

# --------------------------------------------------------------------------- job-level fields


def check_gcs(r: Rules, path: PathKey, uri: str) -> bool:
    match = _GCS_URI.match(uri)
    if not match or not _BUCKET.match(match["bucket"]) or ".." in match["bucket"] or "//" in (match["path"] or ""):
        r.add(path, f"'{uri}' is not a well-formed Cloud Storage URI; expected gs://BUCKET/PATH "
                    "(bucket: 3-63 lower-case letters, digits, dashes, dots)")
        return False
    return True


def check_job_fields(r: Rules, config: JobConfig) -> None:
    if not config.name.strip():
        r.add(("name",), "the job name must not be empty")
    elif len(config.name) > MAX_DISPLAY_NAME:
        r.add(("name",), f"the job name is {len(config.name)} characters; Vertex allows at most {MAX_DISPLAY_NAME}")
    if not _REGION.match(config.region):
        r.add(("region",), with_suggestion(f"'{config.region}' is not a region name like us-central1",
                                 did_you_mean(config.region, catalog.REGIONS)))
    elif config.region not in catalog.REGIONS:
        r.warn(("region",), with_suggestion(f"'{config.region}' is not a known Vertex AI training region",
                                  did_you_mean(config.region, catalog.REGIONS)))
    for key in ("staging_bucket", "base_output_dir"):
        value = getattr(config, key)
        if value is None:
            continue
        if value.startswith(("gs:", "gs/")):
            check_gcs(r, (key,), value)
        elif r.target == "local" and (bad := path_problem(value, utf8=True)):
            r.add((key,), f"the local path {bad}")
        elif r.target == "vertex":
            r.add((key,), f"'{value}' is a local path; Vertex AI needs gs://BUCKET/PATH "
                          "(local paths work only with `vtrain local`)")
    if config.project and not _PROJECT.match(config.project):  # what render and submit would refuse
        r.add(("project",), f"'{config.project}' is not a project ID (6-30 lower-case letters, digits or "
                            "hyphens, starting with a letter) or a project number")
    room = MAX_LABELS - len(VTRAIN_LABELS)
    if len(config.labels) > room:
        r.add(("labels",), f"at most {room} labels (Vertex allows {MAX_LABELS}; vtrain adds "
                           f"{', '.join(VTRAIN_LABELS)}), got {len(config.labels)}")
    for key in config.labels:  # (vtrain-fault is the user's: it asks the emulator for a fault)
        if key in VTRAIN_LABELS:
            r.add(("labels", key), f"label '{key}' is set by vtrain itself; use another key")
    for key, value in config.labels.items():
        check_label(r, ("labels", key), key, value, VTRAIN_LABELS)
    if config.service_account and not _SERVICE_ACCOUNT.match(config.service_account):
        r.add(("service_account",), f"'{config.service_account}' is not a service account email like "
                                    "NAME@PROJECT.iam.gserviceaccount.com")
    if config.network and not _NETWORK.match(config.network):
        r.add(("network",), f"network must look like projects/PROJECT_NUMBER/global/networks/NAME, "
                            f"got '{config.network}'")
    if config.reserved_ip_ranges and not config.network:
        r.add(("reserved_ip_ranges",), "reserved_ip_ranges need a peered network: set network too")
    if config.kms_key and not _KMS_KEY.match(config.kms_key):
        r.add(("kms_key",), "kms_key must look like projects/P/locations/L/keyRings/R/cryptoKeys/K")
    if config.tensorboard:
        if "/" in config.tensorboard and not _TENSORBOARD.match(config.tensorboard):
            r.add(("tensorboard",), "a full tensorboard name looks like projects/P/locations/L/tensorboards/ID; "
                                    "or give a display name (no '/'), or `create`")  # fmt: skip
        elif len(config.tensorboard) > MAX_DISPLAY_NAME:
            r.add(("tensorboard",), f"a TensorBoard display name has at most {MAX_DISPLAY_NAME} characters, got "
                                    f"{len(config.tensorboard)}")  # fmt: skip
        if not config.service_account:
            r.add(("tensorboard",), "Vertex requires service_account when tensorboard is set")
        if not config.base_output_dir:
            r.add(("tensorboard",), "Vertex requires base_output_dir when tensorboard is set (logs go there)")
    _experiment(config, r)


def _experiment(config: JobConfig, r: Rules) -> None:
    if config.experiment is None or "/" in config.experiment:  # a full name: checked with experiment_run
        return
    if not _EXPERIMENT.match(config.experiment):
        fixed = checked_fix(lambda e: bool(_EXPERIMENT.match(e)),
                            re.sub(r"[^a-z0-9-]", "-", config.experiment.lower()).strip("-")[:128], "my-experiment")
        r.add(("experiment",), f"an experiment name is lowercase letters, digits and '-' (at most 128, not starting "
                               f"with '-'), as Vertex requires; got '{config.experiment}', try '{fixed}'")


def check_env(r: Rules, config: JobConfig) -> None:
    base = dict(config.trainer.env)
    for key in base:
        if not _ENV_NAME.match(key):
            r.add(("trainer", "env", key), _env_name_message(key))
    over: dict[str, int] = {}
    added = dict.fromkeys((STRATEGY_ENV, *config.strategy.env), "")  # what the builder adds to every pool
    for pool in config.pools():
        merged = {**base, **(pool.env or {}), **added}
        for key in pool.env or {}:
            if not _ENV_NAME.match(key):
                r.add(pool_path(pool, "env", key), _env_name_message(key))
        if len(merged) > MAX_ENV and pool.role != "reduction_server":
            over[f"cluster.{pool.role}"] = len(merged)
    if over:  # one message for one breakage, however many pools share trainer.env
        most = max(over.values())
        r.add(("trainer", "env"), f"{', '.join(over)} would get up to {most} environment variables (vtrain adds "
                                  f"{', '.join(added)}); Vertex allows at most {MAX_ENV}: remove {most - MAX_ENV}")


def _env_name_message(key: str) -> str:
    fixed = re.sub(r"[^A-Za-z0-9_]", "_", key)
    fixed = fixed if fixed[:1].isascii() and (fixed[:1].isalpha() or fixed[:1] == "_") else f"_{fixed}"
    return (f"'{key}' is not a valid environment variable name (letters, digits and _, not starting with a "
            "digit)" + try_fix(lambda k: bool(_ENV_NAME.match(k)), fixed))


def check_scheduling(r: Rules, config: JobConfig) -> None:
    sched = config.scheduling
    if sched.max_wait_s is not None and sched.strategy != FLEX_START:
        r.add(("scheduling", "max_wait"), "max_wait only applies to strategy: flex_start; set "
                                          "scheduling.strategy: flex_start or remove max_wait")
    if sched.strategy == FLEX_START:
        machines = {(p.machine_type, p.accelerator, p.accelerator_count) for p in config.pools()}
        if len(machines) > 1:
            r.add(("scheduling", "strategy"), "flex_start needs the same machine (type and accelerators) in every "
                                              f"pool; found {len(machines)}: "
                                              + ", ".join(sorted(m[0] for m in machines)))
        if sched.timeout_s is not None and sched.timeout_s > FLEX_START_MAX_TIMEOUT_S:
            r.add(("scheduling", "timeout"), f"flex_start jobs must have a timeout of at most 7 days (604800s), got "
                                             f"{sched.timeout_s}s; set scheduling.timeout: 7d or less")
        gpus = {p.accelerator for p in config.pools() if p.gpus and p.accelerator}
        if not gpus or gpus - FLEX_START_GPUS:
            r.warn(("scheduling", "strategy"), "Dynamic Workload Scheduler (flex_start) is documented for L4, A100, "
                                               "H100, H200 and B200 GPUs only; use spot or standard for "
                                               + (", ".join(sorted(gpus - FLEX_START_GPUS)) or "CPU-only jobs"))
    if sched.strategy not in ("spot", "flex_start"):
        for pool in config.pools():
            if pool.machine_type in catalog.SPOT_OR_FLEX_ONLY:
                r.warn(pool_path(pool, "machine_type"), f"{pool.machine_type} is offered only as Spot or "
                                                         "flex-start capacity; set scheduling.strategy")
    if config.reservation is not None:
        check_reservation(r, config.reservation, ("reservation",))
