"""Job file → CustomJob on Vertex AI, and finding jobs again: the SDK behind `vtrain submit`,
`status`, `logs`, `cancel` and `list`. Commands only parse, call these, and print.

    job = vtrain.submit("vtrain.yaml")          # a VertexJob: the JobHandle run_local returns too
    job.wait(); job.exit_code

The steps of a submission, each usable on its own:

- :func:`plan_submit`: the exact request, offline. Loads and validates the job file, resolves
  project, region and endpoint, builds the REST body with the package URIs the packages *will*
  have (they are content-addressed), adds vtrain's labels. Reads files only (and runs
  `gcloud config get-value` when nothing else names the project or region).
- :func:`vtrain.cloud.dryrun.dry_run`: the plan plus a local build of the trainer sdist, so a broken package
  fails in CI; nothing is uploaded, no API is called, no credentials are read.
- :func:`submit_job`: plan → connect (credentials) → `if_changed` lookup → build and stage
  (packages already staged are neither rebuilt nor uploaded) → create.

Labels on every job: ``vtrain-version`` (dots as dashes: label values allow no dots) and
``vtrain-config-hash``, the first 16 hex digits of the sha256 of the canonical JSON (sorted
keys, no spaces, unredacted) of the body `vtrain render -o json` prints for the same file and
region, i.e. before vtrain's labels: display name, user labels, encryption spec and the whole
jobSpec, including the package URIs, which carry the content hash of the trainer's sources and
of vtrain's runtime. Same file, same trainer code, same vtrain → same hash. Project and region
are not hashed (`if_changed` looks only in the target project and region anyway). The backend
adds ``vtrain-submit-id``, one per create call, for duplicate-free retries; `submit_job` also
remembers it until the create's answer arrives (:mod:`vtrain.cloud.vertex.pending`), so a
submit whose answer was lost is found, not repeated, by the next submit of the same job.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from vtrain.cloud.target import Target, Where
from vtrain.cloud.vertex import VertexBackend, VertexJob  # cheap: Google libraries load on use
from vtrain.constants import VERSION
from vtrain.errors import BackendError, CreateOutcomeUnknown, VtrainError
from vtrain.handle import TERMINAL_STATES
from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.load import load_config
from vtrain.request.build import CUSTOM_JOB, TUNING_JOB, Kind, build_request

if TYPE_CHECKING:
    from vtrain.cloud.preflight import Report
    from vtrain.cloud.vertex.resources import Resolved
    from vtrain.cloud.vertex.retry import RetryPolicy
    from vtrain.request.custom_job import Planned
    from vtrain.trainer.image.build import Pushed
    from vtrain.trainer.select import Scan
    from vtrain.trainer.staging import StagedObject

VERSION_LABEL = "vtrain-version"
HASH_LABEL = "vtrain-config-hash"
ATTEMPT_LABEL = "vtrain-attempt"  # `submit --recover`: 1, 2, ... (vtrain.cloud.recover)
PREVIOUS_LABEL = "vtrain-previous-attempt"  # the job ID the attempt replaced
CONFIG_HASH_LENGTH = 16
#: Tests swap this for a fast policy; None means the backend's default (6 attempts, 1 s doubling).
DEFAULT_RETRY: RetryPolicy | None = None


# ---- where calls go ---------------------------------------------------------------------------
def connect(
    target: Target, *, retry: RetryPolicy | None = None, poll: float | None = None, credentials: Any = None
) -> VertexBackend:
    """A backend on the official client: the regional endpoint with Application Default
    Credentials, or an http:// emulator with anonymous ones. No credentials → one-line error."""
    backend = VertexBackend.from_endpoint(
        target.project, target.region, target.api_endpoint, credentials=credentials, retry=retry or DEFAULT_RETRY
    )
    if poll is not None:
        backend.poll = poll
    return backend


# ---- the plan ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class PackagePlan:
    """One entry of packageUris: what it is, where it comes from, where it will be."""

    role: str  # trainer, runtime (vtrain itself) or prebuilt (listed in the job file)
    source: str
    uri: str


@dataclass(frozen=True)
class SubmitPlan:
    config: JobConfig
    target: Target
    body: dict[str, Any]  # the create body (CustomJob or tuning job); the backend adds vtrain-submit-id
    config_hash: str
    packages: tuple[PackagePlan, ...]
    kind: Kind = CUSTOM_JOB
    #: The trainer files a `trainer.build` image's name was hashed from: the push builds from them.
    selection: Scan | None = field(default=None, compare=False, repr=False)

    @property
    def is_tuning(self) -> bool:
        return self.kind == TUNING_JOB

    @property
    def url(self) -> str:
        return f"{self.target.endpoint}/v1/{self.target.parent}/{self.kind}"

    def request(self, *, show_secrets: bool = False) -> dict[str, Any]:
        from vtrain.request.render import redact

        return {"method": "POST", "url": self.url, "body": self.body if show_secrets else redact(self.body)}


def config_hash(body: Mapping[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:CONFIG_HASH_LENGTH]


def version_label(version: str = VERSION) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "-" for c in version.lower())[:63]


def _packages(config: JobConfig, uris: list[str]) -> tuple[PackagePlan, ...]:
    trainer = config.trainer
    if trainer.container is not None or trainer.build is not None:
        return ()
    if trainer.package is None:
        return tuple(PackagePlan("prebuilt", "", uri) for uri in uris)
    return (
        PackagePlan("trainer", str(trainer.package), uris[0]),
        PackagePlan("runtime", f"vtrain {VERSION}", uris[1]),
    )


def with_submit_labels(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body as submit sends it: with the vtrain version and the hash of the rest as labels
    (`vtrain diff` adds the same to a fresh render to compare it with a saved plan)."""
    labels = {**body.get("labels", {}), VERSION_LABEL: version_label(), HASH_LABEL: config_hash(body)}
    return {**body, "labels": labels}


def _plan(config: JobConfig, target: Target, package_uris: list[str] | None = None) -> SubmitPlan:
    """The plan for `config` at `target` (checked): its artifacts planned from the files, or with the package
    URIs staging returned."""
    from vtrain.jobfile.artifacts import Artifacts, plan_artifacts
    from vtrain.request.custom_job import trainer_package_uris

    artifacts: Planned
    # regional image URIs follow the region; the Experiments contexts name the project
    artifacts = plan_artifacts(config, region=target.region) if package_uris is None else package_uris
    uris = trainer_package_uris(config, artifacts)
    request = build_request(config, artifacts, region=target.region, project=target.project)
    body = with_submit_labels(request.body)
    return SubmitPlan(request.config, target, body, body["labels"][HASH_LABEL], _packages(config, uris),
                      request.kind, selection=artifacts.selection if isinstance(artifacts, Artifacts) else None)


def plan_submit(
    config: JobConfig | str | os.PathLike[str],
    *,
    overrides: Iterable[str] = (),
    where: Where | None = None,
) -> SubmitPlan:
    """The exact request `submit_job` would send, with no network and no credentials."""
    if not isinstance(config, JobConfig):
        config = load_config(config, overrides)
    elif list(overrides):
        raise ValueError("overrides apply to a job file path, not to a loaded JobConfig")
    return _plan(config, (where or Where()).resolve(config=config))


# ---- submitting -------------------------------------------------------------------------------
@dataclass(frozen=True)
class SubmitResult:
    job: VertexJob
    plan: SubmitPlan
    staged: tuple[StagedObject, ...] = ()
    skipped: bool = False  # if_changed found a live job with the same config hash: that is `job`
    recovered: bool = False  # an earlier submit of this job lost its create's answer; `job` is what it made
    preflight: Report | None = None  # its warnings are worth showing; a failure raised before this
    linked: tuple[Resolved, ...] = ()  # the TensorBoard / Experiment found or made for the job
    images: tuple[Pushed, ...] = ()  # trainer.build: each image pushed before the create


def recover_lost_create(backend: VertexBackend, plan: SubmitPlan) -> VertexJob | None:
    """The job an earlier submit of this job created although its answer was lost, if any.
    Every record looked at is settled: found or not, it is not looked up again."""
    from vtrain.cloud.vertex import pending

    for record in pending.find(plan.target.parent, plan.config_hash):
        job = backend.submitted(record.submit_id)
        pending.forget(record)
        if job is not None:
            return job
    return None


def _create(backend: VertexBackend, plan: SubmitPlan) -> VertexJob:
    """Create, with the submit id on record until the answer is known (see recover_lost_create)."""
    from vtrain.cloud.vertex import pending
    from vtrain.request.custom_job import to_proto

    record = pending.new(plan.target.parent, plan.config_hash, uuid.uuid4().hex, plan.config.name)
    pending.record(record)
    try:
        job = backend.create(to_proto(plan.body), submit_id=record.submit_id)
    except CreateOutcomeUnknown as err:  # the record stays: the next submit looks for the job first
        raise CreateOutcomeUnknown(
            f"{err}; `vtrain submit` of this job looks for it before creating another",
            submit_id=err.submit_id,
            find_command=err.find_command,
        ) from None
    except VtrainError:  # a definite refusal: nothing was created
        pending.forget(record)
        raise
    pending.forget(record)
    return job


def find_live(backend: VertexBackend, digest: str, tuning: bool = False) -> VertexJob | None:
    """The newest job (of the kind submitted) with this config hash that has not ended."""
    from vtrain.cloud.vertex.tuning import list_tuning

    label = f'labels.{HASH_LABEL}="{digest}"'
    jobs: list[VertexJob] = list(list_tuning(backend, label, 50)) if tuning else backend.list(filter=label, limit=50)
    return next((job for job in jobs if job.state not in TERMINAL_STATES), None)


def submit_job(
    config: JobConfig | str | os.PathLike[str],
    *,
    overrides: Iterable[str] = (),
    where: Where | None = None,
    if_changed: bool = False,
    allow_credentials: bool = False,
    progress: bool = False,
    backend: VertexBackend | None = None,
    storage_client: Any = None,
    poll: float | None = None,
    preflight: bool = True,
    labels: Mapping[str, str] | None = None,
) -> SubmitResult:
    """Validate, connect, preflight, stage, create. Nothing is uploaded before the credentials, the
    job file and the cloud side (:mod:`vtrain.cloud.preflight`: bucket region and access, service
    account, API) are known good; nothing is created before every package is staged. `backend`
    (tests, or a custom client) fixes project and region. `labels`: vtrain's own extra labels (the
    attempt labels of `--recover`), added after the config hash."""
    where = where or Where()
    if backend is not None:
        where = replace(where, project=where.project or backend.project, region=where.region or backend.region)
    plan = plan_submit(config, overrides=overrides, where=where)
    if backend is None:
        backend = connect(plan.target, poll=poll)
    elif (backend.project, backend.region) != (plan.target.project, plan.target.region):
        raise BackendError(f"the backend is for {backend.parent}, the job for {plan.target.parent}")
    report = None
    if preflight:
        from vtrain.cloud.preflight import run_preflight

        report = run_preflight(plan.target, plan.config, backend=backend, storage_client=storage_client,
                               body=plan.body)
        report.raise_for_failures()
    earlier = recover_lost_create(backend, plan)
    if earlier is not None:
        return SubmitResult(earlier, plan, recovered=True)
    if if_changed:
        live = find_live(backend, plan.config_hash, tuning=plan.is_tuning)
        if live is not None:
            return SubmitResult(live, plan, skipped=True, preflight=report)
    linked = None
    if plan.config.tensorboard or plan.config.experiment:  # found or made before anything is uploaded
        from vtrain.cloud.vertex.experiment_run import link_resources
        from vtrain.request.experiment import run_names

        linked = link_resources(backend, plan.config.tensorboard, plan.config.experiment, run_names(plan.config))
    staged: tuple[StagedObject, ...] = ()
    images: tuple[Pushed, ...] = ()
    trainer = plan.config.trainer
    if trainer.build is not None:  # pushed (manifest last) before the create: a failed push creates no job
        from vtrain.cloud.images import body_images, push_images, stderr_progress

        images = push_images(plan.config, body_images(plan.body), allow_credentials=allow_credentials,
                             on_blob=stderr_progress if progress else None, selection=plan.selection)
    elif trainer.package is not None:
        from vtrain.trainer.packaging import build_and_stage, builds_dir

        staged = tuple(
            build_and_stage(
                trainer.package,
                plan.config.staging_bucket or "",
                trainer.module,
                allow_credentials=allow_credentials,
                progress=progress,
                client=storage_client,
                skip=plan.config.job_files(),
                builds=builds_dir(),
            )
        )
        uris = [s.uri for s in staged]
        if uris != [p.uri for p in plan.packages]:  # the trainer changed since planning
            plan = _plan(plan.config, plan.target, uris)
    if labels:
        plan = replace(plan, body={**plan.body, "labels": {**plan.body["labels"], **labels}})
    made: tuple[Resolved, ...] = ()
    if linked is not None:
        plan, made = replace(plan, body=linked.apply(plan.body)), linked.resolved
    if plan.is_tuning:
        from vtrain.cloud.vertex.tuning import create_tuning
        from vtrain.request.tuning_job import to_tuning_proto

        job = create_tuning(backend, to_tuning_proto(plan.body))
        return SubmitResult(job, plan, staged, preflight=report, linked=made, images=images)
    return SubmitResult(_create(backend, plan), plan, staged, preflight=report, linked=made, images=images)


def submit(
    config: JobConfig | str | os.PathLike[str],
    *,
    overrides: Iterable[str] = (),
    project: str | None = None,
    region: str | None = None,
    api_endpoint: str | None = None,
    if_changed: bool = False,
    allow_credentials: bool = False,
    preflight: bool = True,
    wait: bool = False,
    timeout: float | None = None,
    poll: float | None = None,
    backend: VertexBackend | None = None,
) -> VertexJob:
    """Submit a job file (or a loaded JobConfig) to Vertex AI and return its handle: `state`, `wait()`,
    `result()`, `cancel()`, `logs()`, as `run_local`'s. See :func:`submit_job`; `preflight=False` skips the cloud
    side's checks, as ``--no-preflight`` does.

    With `wait`, it returns once the job ended (WaitTimeout after `timeout` seconds; `poll` seconds between
    polls) and, as `vtrain submit --wait` does, registers the model of a job that SUCCEEDED with a `model:` block
    in Model Registry: ``job.registered`` is its version (:class:`~vtrain.cloud.vertex.registered.Registered`).
    A job that FAILED is returned as it is (``job.state``, or ``job.result()``, which raises JobFailed); its model
    is not uploaded."""
    result = submit_job(
        config,
        overrides=overrides,
        where=Where(project, region, api_endpoint),
        if_changed=if_changed,
        allow_credentials=allow_credentials,
        backend=backend,
        poll=poll,
        preflight=preflight,
    )
    job = result.job
    if wait:
        from vtrain.cloud.model_registry import register_after

        register_after(job, result.plan.config, job.wait(timeout, poll), tuning=result.plan.is_tuning)
    return job
