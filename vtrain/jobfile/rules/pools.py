"""A pool's own storage, GPU partitions and reservation, and the job's PSC interface, Experiment and
protected-artifact region: what Vertex AI refuses at create time, or accepts and then fails on.

Sources: the installed `aiplatform_v1` protos' field docs (NfsMount: `path` starts with '/', mounted under
/mnt/nfs/MOUNT_POINT; LustreMount under /mnt/lustre/MOUNT_POINT; MachineSpec.gpu_partition_size: "the
accelerator_count should be set to 1"; DnsPeeringConfig.domain "must end with a dot"; CustomJobSpec.experiment
and experiment_run formats; protected_artifact_location_id "only when the location is different"); MIG
profiles per GPU in the catalog's accelerator rows (sources.MIG); reservation names in its three forms
(:mod:`vtrain.catalog.capacity`).
"""

from __future__ import annotations

import ipaddress
import re

from vtrain import catalog
from vtrain.catalog.capacity import RESERVATION_FORMS, reservation_form
from vtrain.jobfile.config import JobConfig, PoolConfig, ReservationConfig
from vtrain.jobfile.nodes import did_you_mean
from vtrain.jobfile.rules.base import (
    _PROJECT,
    _REGION,
    Rules,
    checked_fix,
    pool_path,
    with_suggestion,
)
from vtrain.jobfile.yamlpos import PathKey

#: MIG profiles (gpu_partition_size) each GPU offers (the catalog's accelerator rows).
MIG_PROFILES: dict[str, tuple[str, ...]] = {a.enum: a.mig for a in catalog.ACCELERATORS if a.mig}
_MOUNT_POINT = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.:-]{0,252})$")
_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
#: Managed Lustre's file system name (the instance's --filesystem): up to 8 letters and digits, a letter first.
_LUSTRE_FS = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,7}$")
#: A Managed Lustre volume: PROJECT/ZONE/INSTANCE (as the GKE Lustre CSI driver's volumeHandle).
_VOLUME_HANDLE = re.compile(r"^[a-z][a-z0-9.:-]{0,62}/[a-z0-9-]+/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_ATTACHMENT = re.compile(r"^projects/[^/]+/regions/(?P<region>[^/]+)/networkAttachments/(?P<name>[^/]+)$")
_RUN_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_CONTEXT = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/metadataStores/(?P<store>[^/]+)"
                      r"/contexts/(?P<name>[^/]+)$")


def _own(config: JobConfig, pool: PoolConfig, key: str) -> bool:
    """Whether this pool's value is its own to report (the chief's, or one that differs from the chief's)."""
    return pool.role == "chief" or getattr(pool, key) != getattr(config.chief, key)


def check_pools(r: Rules, config: JobConfig) -> None:
    pools = [p for p in (config.chief, config.workers, config.parameter_servers, config.reduction_server,
                         config.evaluator, config.second_learners) if p is not None]
    for pool in pools:
        if _own(config, pool, "gpu_partition_size"):
            _check_partition(r, pool)
        if _own(config, pool, "nfs_mounts"):
            _check_mounts(r, pool, "nfs_mounts", "server", "/mnt/nfs")
        if _own(config, pool, "lustre_mounts"):
            _check_mounts(r, pool, "lustre_mounts", "instance_ip", "/mnt/lustre")
        if pool.reservation is not None and _own(config, pool, "reservation"):
            check_reservation(r, pool.reservation, pool_path(pool, "reservation"))
    mounted = [(p, key) for p in pools for key in ("nfs_mounts", "lustre_mounts") if getattr(p, key)]
    if r.target == "local" and mounted:
        pool, key = mounted[0]
        root = "/mnt/nfs" if key == "nfs_mounts" else "/mnt/lustre"
        r.warn(pool_path(pool, key), f"`vtrain local` mounts nothing: {root}/... exists only on Vertex AI; "
                                     "point the trainer at a local copy for local runs")
    if any(p.nfs_mounts for p in pools) and not config.network and config.psc_interface is None:
        first = next(p for p in pools if p.nfs_mounts)
        r.warn(pool_path(first, "nfs_mounts"), "an NFS server is reached through your VPC: set network (peering) "
                                               "or psc_interface, or the replicas cannot mount it")


def _check_partition(r: Rules, pool: PoolConfig) -> None:
    size = pool.gpu_partition_size
    if size is None:
        return
    path = pool_path(pool, "gpu_partition_size")
    profiles = MIG_PROFILES.get(pool.accelerator or "")
    if profiles is None:
        gpus = ", ".join(MIG_PROFILES)
        r.add(path, f"GPU partitions (NVIDIA MIG) need an A100, H100 or H200 GPU ({gpus}), and this pool has "
                    f"{pool.accelerator or 'no accelerator'}; remove gpu_partition_size or use e.g. a2-highgpu-1g")
        return
    if size not in profiles:
        r.add(path, with_suggestion(f"'{size}' is not a MIG partition size of {pool.accelerator}; allowed: "
                                    f"{', '.join(profiles)}", did_you_mean(size, profiles)))
    if pool.accelerator_count != 1:
        single = sorted(m for m, g in catalog.GPU_MACHINES.items()
                        if g.accelerator == pool.accelerator and g.count == 1)
        fix = f"use a 1-GPU machine such as {single[0]}" if single else "set accelerator_count: 1"
        r.add(path, f"gpu_partition_size splits one GPU per replica, and this pool has {pool.accelerator_count}; "
                    f"{fix}")


def mount_point_like(point: str) -> str | None:
    """The valid mount point nearest `point`: its directory names with what a name cannot hold turned into
    '-', the empty, '.' and '..' ones left out ('../../etc' → 'etc', '/data' → 'data', 'my data' → 'my-data');
    None when no name is left to suggest."""
    names = [re.sub(r"[^A-Za-z0-9._-]+", "-", part).strip("-") for part in point.split("/")]
    kept = "/".join(n for n in names if n.strip(".-"))
    return kept if kept and _MOUNT_POINT.match(kept) else None


def _host_problem(value: str, ip_only: bool) -> str | None:
    """What is wrong with a mount's server (an IP address or host name; `ip_only`: an IP address), or None."""
    try:
        ipaddress.ip_address(value)
        return None
    except ValueError:
        pass
    head, colon, port = value.rpartition(":")
    if colon and port.isdigit() and head.strip("[]"):
        above = "; a port is at most 65535 anyway" if int(port) > 65535 else ""
        return (f"'{value}' has a port (:{port}): the mount uses the file system's standard port, so give the "
                f"address alone, e.g. '{head.strip('[]')}'{above}")
    if ip_only:
        return f"'{value}' is not an IP address (IPv4 such as 10.90.1.4, or IPv6)"
    labels = value.rstrip(".").split(".")
    if not value or len(value) > 253 or not all(_LABEL.match(label) for label in labels):
        return f"'{value}' is not an IP address or host name, e.g. 10.76.0.10"
    return None


def _check_mounts(r: Rules, pool: PoolConfig, key: str, host: str, root: str) -> None:
    seen: dict[str, int] = {}
    for i, mount in enumerate(getattr(pool, key)):
        where = pool_path(pool, key)
        problem = _host_problem(mount[host], ip_only=key == "lustre_mounts")
        if problem:
            r.add((*where, i, host), problem)
        if key == "lustre_mounts":
            if not _LUSTRE_FS.match(mount["filesystem"]):
                fixed = (re.sub(r"[^A-Za-z0-9]", "", mount["filesystem"]).lstrip("0123456789") or "lfs")[:8]
                r.add((*where, i, "filesystem"), f"'{mount['filesystem']}' is not a Lustre file system name: at most "
                                                 f"8 letters and digits, starting with a letter (the instance's "
                                                 f"--filesystem), e.g. '{fixed}'")
            handle = mount["volume_handle"]
            if not handle.strip() or not handle.isprintable() or any(c.isspace() for c in handle):
                r.add((*where, i, "volume_handle"), f"{handle!r} is not a Lustre volume handle: it holds no text or "
                                                    "spaces; e.g. my-project/us-central1-a/my-lustre")
            elif not _VOLUME_HANDLE.match(handle):
                r.warn((*where, i, "volume_handle"), f"'{handle}' does not look like a Managed Lustre volume handle, "
                                                     "PROJECT/ZONE/INSTANCE (e.g. my-project/us-central1-a/my-lustre)")
        if key == "nfs_mounts" and not mount["path"].startswith("/"):
            r.add((*where, i, "path"), f"the exported path must start with '/'; write '/{mount['path']}'")
        point = mount["mount_point"]
        if not _MOUNT_POINT.match(point) or ".." in point.split("/"):
            nearest = mount_point_like(point)
            r.add((*where, i, "mount_point"), f"'{point}' is not a directory name under {root}/ (letters, digits, "
                                              f". _ - and /, no leading /, no ..)"
                                              + (f"; try '{nearest}'" if nearest else ""))
        elif point in seen:
            r.add((*where, i, "mount_point"), f"{root}/{point} is already the mount point of {key}[{seen[point]}]; "
                                              "give each mount its own")
        seen.setdefault(point, i)


def check_reservation(r: Rules, res: ReservationConfig, path: PathKey) -> None:
    """`reservation:` job-wide or a pool's own: affinity and name agree, and the name is a reservation's."""
    if res.affinity == "specific" and not res.name:
        r.add((*path, "name"), "affinity specific needs the reservation name projects/P/zones/Z/reservations/R",
              at=(*path, "affinity"))
    elif res.name and res.affinity != "specific":
        r.add((*path, "affinity"), "a reservation name is only used with affinity: specific")
    elif res.name and reservation_form(res.name) is None:
        forms = "; ".join(f"a {f.name}: {f.template}" for f in RESERVATION_FORMS)
        r.add((*path, "name"), f"'{res.name}' is not the resource name of a reservation, a reservation block or a "
                               f"sub-block; the forms are {forms}")


def check_services(r: Rules, config: JobConfig) -> None:
    """psc_interface, experiment / experiment_run and protected_artifact_location_id."""
    psc = config.psc_interface
    if psc is not None:
        if config.network:
            r.add(("psc_interface",), "Vertex connects a job to your VPC by network (peering) or by psc_interface, "
                                      "not both; remove one of them", at=("psc_interface", "network_attachment"))
        attachment = _ATTACHMENT.match(psc.network_attachment)
        if attachment is not None and attachment["region"] != config.region:
            r.add(("psc_interface", "network_attachment"), f"the network attachment is in {attachment['region']}, "
                                                           f"the job in {config.region}; it must be in the job's "
                                                           "region")
        elif attachment is None and not _NAME.match(psc.network_attachment):
            r.add(("psc_interface", "network_attachment"), "expected a network attachment name (lower-case letters, "
                                                           "digits and -) or projects/P/regions/R/"
                                                           f"networkAttachments/NAME, got '{psc.network_attachment}'")
        for i, peer in enumerate(psc.dns_peering):
            where = ("psc_interface", "dns_peering", i)
            if not peer["domain"].endswith("."):
                r.add((*where, "domain"), f"a peered DNS domain ends with a dot: write '{peer['domain']}.'")
            if not _PROJECT.match(peer["target_project"]):
                r.add((*where, "target_project"), f"'{peer['target_project']}' is not a project ID")
            if not _NAME.match(peer["target_network"]):
                r.add((*where, "target_network"), f"'{peer['target_network']}' is not a VPC network name (lower-case "
                                                  "letters, digits and -)")
    short = config.experiment is not None and "/" not in config.experiment  # a name submit finds or makes
    experiment = None if short else _check_context(r, config, "experiment")
    run_name = config.experiment_run if config.experiment_run and "/" not in config.experiment_run else None
    run = None if run_name else _check_context(r, config, "experiment_run")
    if config.experiment_run and not config.experiment:
        r.add(("experiment_run",), "an experiment run belongs to an experiment: set experiment too")
    elif run_name is not None:
        _check_run_name(r, run_name, config.experiment if short else experiment["name"] if experiment else None)
    elif short and run is not None and not run["name"].startswith(f"{config.experiment}-"):
        r.add(("experiment_run",), f"the run must be contexts/{config.experiment}-RUN (the experiment's name, a dash, "
                                   "the run's)")
    elif experiment is not None and run is not None:
        parent, own = experiment.group(0).rsplit("/", 1)[0], run.group(0).rsplit("/", 1)[0]
        if parent != own or not run["name"].startswith(experiment["name"] + "-"):
            r.add(("experiment_run",), f"the run must be {parent}/{experiment['name']}-RUN (its experiment's "
                                       "store, and the experiment's name, a dash, the run's)")
    location = config.protected_artifact_location_id
    if location is not None:
        path = ("protected_artifact_location_id",)
        if not _REGION.match(location):
            r.add(path, with_suggestion(f"'{location}' is not a region name like europe-west4",
                                        did_you_mean(location, catalog.REGIONS)))
        elif location not in catalog.REGIONS:
            r.warn(path, with_suggestion(f"'{location}' is not a known Vertex AI region",
                                         did_you_mean(location, catalog.REGIONS)))
        elif location == config.region:
            r.warn(path, f"{location} is the job's own region, where the artifacts are kept anyway; Vertex wants this "
                         "key only for another region: remove it")


def _check_run_name(r: Rules, run: str, experiment: str | None) -> None:
    """`experiment_run: RUN`, the run's own name: its context is EXPERIMENT-RUN, as the SDK names it."""
    from vtrain.constants import RUN_ID_MAX

    if not _RUN_NAME.match(run):
        room = RUN_ID_MAX - (len(experiment) + 1 if experiment is not None else 0)  # the context ID's length
        fixed = checked_fix(lambda n: bool(_RUN_NAME.match(n)) and len(n) <= room,
                            re.sub(r"[^a-z0-9-]", "-", run.lower()).strip("-")[:room].strip("-"), "run-1")
        r.add(("experiment_run",), f"a run name is lowercase letters, digits and '-' (not starting with '-'): its "
                                   f"context is EXPERIMENT-RUN; got '{run}'" + (f", try '{fixed}'" if fixed else ""))
    elif experiment is not None and len(f"{experiment}-{run}") > RUN_ID_MAX:
        r.add(("experiment_run",), f"the run's context ID '{experiment}-{run}' has {len(experiment) + len(run) + 1} "
                                   f"characters; the SDK allows at most {RUN_ID_MAX}: shorten the run's name")


def _check_context(r: Rules, config: JobConfig, key: str) -> re.Match[str] | None:
    value = getattr(config, key)
    if not value:
        return None
    match = _CONTEXT.match(value)
    if match is None:
        name = value.rsplit("/", 1)[-1] if "/" not in value or value.count("/") < 2 else "NAME"
        r.add((key,), f"{key} is a Vertex ML Metadata context: projects/{config.project or 'PROJECT'}/locations/"
                      f"{config.region}/metadataStores/default/contexts/{name}, got '{value}'")
        return None
    if match["location"] != config.region:
        r.add((key,), f"the {key.replace('_', ' ')} is in {match['location']}, the job in {config.region}; Vertex "
                      "keeps a job's experiments in its own region")
    return match


__all__ = ["MIG_PROFILES", "check_pools", "check_reservation", "check_services"]
