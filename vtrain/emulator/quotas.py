"""The Cloud Quotas API's QuotaInfos for Vertex AI training (v1 REST), as preflight reads them:

    GET /v1/projects/P/locations/global/services/aiplatform.googleapis.com/quotaInfos       list (pageSize, pageToken)
    GET /v1/projects/P/locations/global/services/aiplatform.googleapis.com/quotaInfos/ID    get

Each QuotaInfo has the real shape (name, quotaId, metric, service, containerType, dimensions,
dimensionsInfos with a per-region entry and a default entry, isConcurrent, ...); int64 values are
strings, as in proto3 JSON. The table (`Quotas`) starts with a default for every training metric
vtrain counts (DEFAULT_LIMIT) and is changed per metric and region (`Emulator.set_quota`).
`deny_projects` and `--projects` answer IAM's 403 (permission ``cloudquotas.quotas.get``).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from vtrain.cloud import quota
from vtrain.emulator.errors import not_found
from vtrain.emulator.projects import authorize
from vtrain.emulator.wire import page_params

_PATH = re.compile(r"^/v1/projects/([^/]+)/locations/global/services/([^/]+)/quotaInfos(?:/([^/:]+))?$")
#: The emulator's limit where none was set: enough for any job the tests submit.
DEFAULT_LIMIT = 1000
DOMAIN = "cloudquotas.googleapis.com"


def handles(path: str) -> bool:
    return bool(_PATH.match(path))


def quota_id(metric: str) -> str:
    """`.../custom_model_training_nvidia_t4_gpus` → CustomModelTrainingNvidiaT4GpusPerProjectPerRegion."""
    words = metric.rsplit("/", 1)[-1].split("_")
    return "".join(w[:1].upper() + w[1:] for w in words) + "PerProjectPerRegion"


def _metrics() -> list[str]:
    cpus = [quota.metric(s) for s in ("cpus", "c2_cpus", "n2_cpus", "a2_cpus", "a3_cpus", "g2_cpus", "m1_cpus")]
    accelerators = [quota.metric(s) for s in quota.ACCELERATOR_SUFFIX.values()]
    both = (b.replace("training_", f"training_{kind}") for b in cpus + accelerators for kind in ("", "preemptible_"))
    return sorted(set(both))


class Quotas:
    """Limits per metric: a default for every region, and per-region values."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limits: dict[str, dict[str | None, int]] = {m: {None: DEFAULT_LIMIT} for m in _metrics()}

    def set(self, metric: str, value: int | None, region: str | None = None) -> None:
        """`value` None removes the metric (the API then has no such quota)."""
        with self._lock:
            if value is None:
                self._limits.pop(metric, None)
            else:
                self._limits.setdefault(metric, {None: DEFAULT_LIMIT})[region] = int(value)

    def infos(self, project: str) -> list[dict[str, Any]]:
        with self._lock:
            table = {m: dict(v) for m, v in sorted(self._limits.items())}
        return [_info(project, metric, limits) for metric, limits in table.items()]


def _info(project: str, metric: str, limits: dict[str | None, int]) -> dict[str, Any]:
    qid = quota_id(metric)
    entries = [{"dimensions": {"region": region}, "details": {"value": str(value)}, "applicableLocations": [region]}
               for region, value in sorted((r, v) for r, v in limits.items() if r is not None)]  # fmt: skip
    if None in limits:
        entries.append({"details": {"value": str(limits[None])}})  # the default: every other region
    short = metric.rsplit("/", 1)[-1]
    return {
        "name": f"projects/{project}/locations/global/services/{quota.SERVICE}/quotaInfos/{qid}",
        "quotaId": qid,
        "metric": metric,
        "service": quota.SERVICE,
        "isPrecise": True,
        "containerType": "PROJECT",
        "dimensions": ["region"],
        "metricDisplayName": short.replace("_", " ").capitalize(),
        "quotaDisplayName": short.replace("_", " ").capitalize() + " per region",
        "metricUnit": "1",
        "quotaIncreaseEligibility": {"isEligible": True},
        "dimensionsInfos": entries,
        "isConcurrent": True,
    }


_SPEC = re.compile(r"^(?P<metric>[a-z0-9_./-]+?)(?:@(?P<region>[a-z]+-[a-z]+[0-9]+))?=(?P<value>-?[0-9]{1,12})$")


def parse_quota(spec: str) -> tuple[str, str | None, int]:
    """`nvidia_t4_gpus@us-central1=4` → (the full metric, region or None, limit); ValueError if malformed."""
    m = _SPEC.match(spec.strip())
    if m is None:
        raise ValueError(f"'{spec}' is not METRIC[@REGION]=N (e.g. nvidia_t4_gpus@us-central1=4 or cpus=16)")
    name = m["metric"]
    if "/" not in name:
        name = quota.metric(name.removeprefix("custom_model_training_"))
    if int(m["value"]) < -1:
        raise ValueError(f"'{spec}': a limit is a count, or -1 for unlimited")
    return name, m["region"], int(m["value"])


def route(server: Any, command: str, path: str, query: dict[str, str]) -> dict[str, Any]:
    m = _PATH.match(path)
    if m is None or command != "GET":
        raise not_found(f"Method {command} not found for {path}.")
    project, service, qid = m.groups()
    resource = f"projects/{project}/locations/global/services/{service}"
    authorize(server, project, resource, quota.PERMISSION, domain=DOMAIN)
    infos: list[dict[str, Any]] = server.quotas.infos(project) if service == quota.SERVICE else []
    if qid is not None:
        for info in infos:
            if info["quotaId"] == qid:
                return info
        raise not_found(f"QuotaInfo {resource}/quotaInfos/{qid} not found.")
    size, token = page_params(query, default=100, most=1000)
    start = int(token) if token else 0
    page = infos[start : start + size]
    answer: dict[str, Any] = {"quotaInfos": page} if page else {}
    if start + size < len(infos):
        answer["nextPageToken"] = str(start + size)
    return answer


__all__ = ["DEFAULT_LIMIT", "Quotas", "handles", "parse_quota", "quota_id", "route"]
