"""Will the job fit the region's Vertex AI training quota? Checked in preflight, before anything is staged.

Vertex refuses a create whose machines exceed a quota with RESOURCE_EXHAUSTED, after the trainer has
been built and uploaded; users then learn the metric's name from the error. Preflight instead adds up
what the request asks for, per quota metric, and compares it with:

- the limit: the Cloud Quotas API's QuotaInfo for the metric (``GET cloudquotas.googleapis.com/v1/
  projects/P/locations/global/services/aiplatform.googleapis.com/quotaInfos``), the region's
  dimension entry or else the default one (a value of -1 is unlimited). Called over REST with
  google-auth's AuthorizedSession, as the IAM check is: no extra client library, and the emulator
  answers it;
- the usage: Cloud Quotas reports limits only, so "in use" is what this project's running and
  pending CustomJobs in the region hold (listed through the Vertex client). Jobs of other tools that
  hold the same quota (notebooks, endpoints) are not seen; the console page shows the full number.

Metrics (``aiplatform.googleapis.com/custom_model_training_*``): accelerators by type
(``nvidia_t4_gpus``, ``nvidia_a100_80gb_gpus``, ...), vCPUs of N1/E2 machines as ``cpus`` and of other
general-purpose families as ``FAMILY_cpus`` (``c2_cpus``); Spot and Flex-start jobs use the
``preemptible_`` ones. Accelerator-optimized machines (A2, A3, G2, ...) and TPU machines count their
accelerators only (vtrain's catalog has no vCPU count for them, and a false refusal costs more than
a missed one: Vertex still refuses at create). A hyperparameter tuning job needs its trial spec times its
parallel trials. A job on a persistent resource is not checked (its machines are held already).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vtrain import catalog
from vtrain.foreign import printable
from vtrain.foreign.data import Doc, parse_json
from vtrain.foreign.data import Unreadable as ForeignUnreadable

SERVICE = "aiplatform.googleapis.com"
CLOUD_QUOTAS = "https://cloudquotas.googleapis.com"
QUOTA_PAGE = "https://console.cloud.google.com/iam-admin/quotas?project={project}&metric={metric}"
PERMISSION = "cloudquotas.quotas.get"
#: The quota suffix Vertex names each accelerator by (``custom_model_training_<suffix>``): the catalog's rows.
ACCELERATOR_SUFFIX: dict[str, str] = {a.enum: a.quota for a in catalog.ACCELERATORS if a.quota}
_PREEMPTIBLE = ("SPOT", "FLEX_START")
_CPU_FAMILIES_AS_CPUS = ("n1", "e2")
LIVE_STATES = ("JOB_STATE_PENDING", "JOB_STATE_RUNNING")


def metric(suffix: str, preemptible: bool = False) -> str:
    return f"{SERVICE}/custom_model_training_{'preemptible_' if preemptible else ''}{suffix}"


def accelerator_metric(accelerator: str, preemptible: bool = False) -> str:
    return metric(ACCELERATOR_SUFFIX.get(accelerator, f"{accelerator.lower()}s"), preemptible)


def cpu_metric(machine_type: str, preemptible: bool = False) -> str:
    family = machine_type.split("-", 1)[0]
    return metric("cpus" if family in _CPU_FAMILIES_AS_CPUS else f"{family}_cpus", preemptible)


@dataclass(frozen=True)
class Need:
    metric: str
    what: str  # "vCPUs" or "NVIDIA_TESLA_T4 accelerators", for messages
    amount: int


def needs(body: Mapping[str, Any]) -> list[Need]:
    """What a CustomJob or HyperparameterTuningJob REST body holds while it runs, per quota metric."""
    spec = body.get("jobSpec") or body.get("trialJobSpec") or {}
    times = int(body.get("parallelTrialCount", 1) or 1) if "trialJobSpec" in body else 1
    preemptible = (spec.get("scheduling") or {}).get("strategy") in _PREEMPTIBLE
    total: dict[str, Need] = {}

    def add(name: str, what: str, amount: int) -> None:
        if amount > 0:
            before = total.get(name)
            total[name] = Need(name, what, amount + (before.amount if before else 0))

    for pool in spec.get("workerPoolSpecs", []):
        machine = pool.get("machineSpec") or {}
        replicas = int(pool.get("replicaCount", 0) or 0) * times
        machine_type = str(machine.get("machineType", ""))
        if not replicas or not machine_type:
            continue
        accelerator = machine.get("acceleratorType")
        if accelerator:
            add(accelerator_metric(accelerator, preemptible), f"{accelerator} accelerators",
                replicas * int(machine.get("acceleratorCount", 0) or 0))  # fmt: skip
        if catalog.is_tpu_machine(machine_type):
            continue
        vcpus = catalog.vcpus(machine_type)
        if vcpus:
            add(cpu_metric(machine_type, preemptible), f"{machine_type.split('-')[0].upper()} vCPUs", replicas * vcpus)
    return list(total.values())


def in_use(bodies: Iterable[Mapping[str, Any]]) -> tuple[dict[str, int], int]:
    """Per metric, what these live jobs hold; and how many jobs they are."""
    used: dict[str, int] = {}
    count = 0
    for body in bodies:
        count += 1
        for need in needs(body):
            used[need.metric] = used.get(need.metric, 0) + need.amount
    return used, count


class Unreadable(Exception):
    """The quotas could not be read: a warning, never a failure."""


#: A page of QuotaInfos is ~100 KB; an answer past this is no Cloud Quotas answer.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
_INT64 = re.compile(r"-?[0-9]{1,19}")


def _limit(details: Doc) -> int | None:
    """A QuotaInfo's ``details.value``: an int64 (proto3 JSON may spell it as a string); -1 is unlimited."""
    value = details.value.get("value")
    if isinstance(value, str) and _INT64.fullmatch(value.strip()):
        details = Doc({**details.value, "value": int(value)}, details.source, details.path)
    return details.integer("value", minimum=-1, whole_floats=True)


def region_limit(info: Mapping[str, Any], region: str, source: str = "a QuotaInfo", path: str = "") -> int | None:
    """The limit a QuotaInfo sets in `region`: its region entry, else its default; None if neither.

    A field of the wrong type or range raises :class:`vtrain.foreign.data.Unreadable` naming it."""
    fallback = None
    for entry in Doc(info, source, path).require_object().items("dimensionsInfos"):
        entry.require_object()
        dims = entry.mapping_or_empty("dimensions")
        value = _limit(entry.mapping_or_empty("details"))
        if value is None:
            continue
        places = [where.string() for where in entry.items("applicableLocations")]
        if dims.text("region") == region:
            return value
        if "region" not in dims.value or region in places:
            fallback = value if fallback is None else fallback
    return fallback


def _body(answer: Any, source: str) -> bytes:
    """The answer's body, at most MAX_ANSWER_BYTES of it (the response was asked for streamed)."""
    chunks, size = [], 0
    try:
        for chunk in answer.iter_content(65536):
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise ForeignUnreadable(source, f"more than {MAX_ANSWER_BYTES:,} bytes")
            chunks.append(chunk)
    finally:
        answer.close()
    return b"".join(chunks)


def _page(body: bytes, source: str) -> Doc:
    if body.lstrip()[:1] == b"<":
        raise ForeignUnreadable(source, "an HTML page, not JSON (a proxy's or a sign-in page?)")
    return Doc(parse_json(body, source, max_bytes=MAX_ANSWER_BYTES), source).require_object()


def read_limits(session: Any, endpoint: str, project: str, region: str, metrics: Iterable[str],
                timeout: float = 30) -> dict[str, int | None]:  # fmt: skip
    """The limit of each metric in `region` (None: no such quota), paging through the service's QuotaInfos.

    Every answer is read bounded and checked (:mod:`vtrain.foreign.data`): HTML, an array, a string or
    ``1e999`` where a limit belongs is :class:`Unreadable`, which preflight turns into its warning."""
    from requests.exceptions import RequestException

    wanted = set(metrics)
    url = f"{endpoint}/v1/projects/{project}/locations/global/services/{SERVICE}/quotaInfos"
    found: dict[str, int | None] = dict.fromkeys(wanted)
    token = ""
    for number in range(1, 101):  # a bound: the service has a few hundred quotas
        params = {"pageSize": "500", **({"pageToken": token} if token else {})}
        source = "the Cloud Quotas API's answer" + (f" (page {number})" if number > 1 else "")
        try:
            answer = session.get(url, params=params, timeout=timeout, stream=True)
            body = _body(answer, source)
        except RequestException as err:
            raise Unreadable(f"cannot reach the Cloud Quotas API at {endpoint} ({type(err).__name__})") from None
        except ForeignUnreadable as err:
            raise Unreadable(str(err)) from None
        if answer.status_code >= 400:
            raise Unreadable(_refusal(answer, body))
        try:
            page = _page(body, source)
            for info in page.items("quotaInfos"):
                metric = info.require_object().text("metric")
                if metric in wanted:
                    found[metric] = region_limit(info.value, region, source, info.path)
            token = page.text("nextPageToken") or ""
        except ForeignUnreadable as err:
            raise Unreadable(str(err)) from None
        if not token:
            break
    return found


def _refusal(answer: Any, body: bytes) -> str:
    message = status = ""
    try:
        error = Doc(parse_json(body, "the answer", max_bytes=MAX_ANSWER_BYTES), "the answer").mapping("error")
        if error is not None:
            message, status = error.text("message", limit=2000) or "", error.text("status", limit=100) or ""
    except ForeignUnreadable:  # not Google's error shape
        message = str(answer.reason or "")
    if answer.status_code == 403 and (b"SERVICE_DISABLED" in body or "has not been used" in message):
        return ("the Cloud Quotas API is not enabled; `gcloud services enable cloudquotas.googleapis.com` "
                "lets preflight read the limits")  # fmt: skip
    if answer.status_code == 403:
        return f"you may not read them (no {PERMISSION}; roles/cloudquotas.viewer has it)"
    said = f"{printable(status, limit=100)}: {printable(message, limit=500)}".strip(": ")
    return f"the Cloud Quotas API answered {answer.status_code} {said}".rstrip(": ").rstrip()


def verdict(needed: list[Need], limits: Mapping[str, int | None], used: Mapping[str, int], jobs: int,
            region: str, project: str) -> tuple[str, str]:  # fmt: skip
    """("ok" | "warn" | "FAIL", the line): every number the user needs to act on it."""
    over, unknown, fits = [], [], []
    for need in needed:
        limit = limits.get(need.metric)
        short = need.metric.removeprefix(f"{SERVICE}/")
        if limit is None:
            unknown.append(f"{short} ({need.amount} {need.what})")
            continue
        busy = used.get(need.metric, 0)
        if limit < 0:
            fits.append(f"{need.amount} {short} (unlimited)")
            continue
        if need.amount > limit - busy:
            page = QUOTA_PAGE.format(project=project, metric=need.metric)
            held = f"{busy} in use by {jobs} running or pending job{'s' if jobs != 1 else ''}" if busy else "0 in use"
            fix = "no job of this size can run until it is raised" if need.amount > limit else \
                "wait for those jobs, or raise it"  # fmt: skip
            over.append(f"needs {need.amount} {need.what} ({need.metric}) in {region}, the limit is {limit} with "
                        f"{held}: {fix} at {page}")  # fmt: skip
        else:
            fits.append(f"{need.amount} of {limit} {short} ({busy} in use)")
    if over:
        return "FAIL", "; ".join(over)
    if unknown:
        fit = f"; fits: {', '.join(fits)}" if fits else ""
        return "warn", f"the Cloud Quotas API names no quota {', '.join(unknown)}, so it is not checked{fit}"
    return "ok", f"fits in {region}: " + ", ".join(fits) if fits else f"nothing counted against quota in {region}"
