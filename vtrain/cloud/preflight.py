"""Preflight: the cloud side of a job checked before anything is uploaded, created or paid for.

`vtrain submit` runs it after validating the job file and before staging; `submit --dry-run
--preflight` and `vtrain doctor [JOB]` run it alone. Each check is one line, pass or fail, with
the fix:

- credentials: Application Default Credentials found, and for which account (none for an
  http:// emulator endpoint);
- project and Vertex AI: the project resolves and `customJobs.list` answers in the job's region
  (a disabled API, a missing permission or a wrong project show here);
- staging bucket: exists, you may write to it (testIamPermissions), and its location suits the
  job's region: another region is an error, a multi- or dual-region a warning;
- service account: exists, and you hold iam.serviceAccounts.actAs on it (IAM's
  testIamPermissions over REST with google-auth: the IAM admin client speaks only gRPC, which
  the emulator does not);
- base output directory: its bucket exists and you may write to it (the job's service account
  writes there too: that grant is not visible to you);
- quota: what the job's machines need (vCPUs, accelerators, per Vertex quota metric) against the
  region's limits (Cloud Quotas API) less what this project's live jobs hold; refused with the
  numbers when it cannot fit, a warning when the limits cannot be read (:mod:`vtrain.cloud.quota`);
- tensorboard and experiment (when the job names them): found, or to be created at submit (you may
  list them; the job's service account is who uploads the logs);
- model parent (when `model.parent` names one): the model exists, so the version uploaded after the
  job succeeds has somewhere to go.

Every call goes through the official clients (google-cloud-storage, aiplatform's
JobServiceClient, google-auth's AuthorizedSession), so the emulators answer them in tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vtrain.errors import BackendError, PackagingError, PreflightFailed

if TYPE_CHECKING:
    from vtrain.cloud.target import Target
    from vtrain.cloud.vertex import VertexBackend
    from vtrain.jobfile.config import JobConfig

PASS, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"
IAM_ENDPOINT = "https://iam.googleapis.com"
ACT_AS = "iam.serviceAccounts.actAs"
OUTPUT_PERMISSIONS = ("storage.objects.create",)


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok, warn, FAIL, skip
    detail: str

    def __str__(self) -> str:
        return f"{self.status:<4}  {self.name}: {self.detail}"

    def to_dict(self) -> dict[str, str]:
        return {"check": self.name, "status": {PASS: "pass"}.get(self.status, self.status.lower()),
                "detail": self.detail}  # fmt: skip


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status == WARN]

    @property
    def ok(self) -> bool:
        return not self.failed

    def raise_for_failures(self) -> None:
        """PreflightFailed naming every failed check, when any failed."""
        if self.failed:
            raise PreflightFailed([f"{c.name}: {c.detail}" for c in self.failed], len(self.checks))

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_dict() for c in self.checks]}


# ---- credentials --------------------------------------------------------------------------------
def account_of(credentials: Any) -> str:
    """Who the credentials act for, as far as they say without a network call."""
    email = getattr(credentials, "service_account_email", None)
    if email and email != "default":
        return f"service account {email}"
    from vtrain.cloud.target import gcloud_config_value

    account = gcloud_config_value("account")
    kind = type(credentials).__name__
    if account:
        return f"{account} (gcloud's account; {kind})"
    return f"an account the credentials do not name ({kind})"


def _credentials(target: Target, backend: VertexBackend | None) -> tuple[Any, Check]:
    from google.auth.credentials import AnonymousCredentials

    if target.local:
        return AnonymousCredentials(), Check("credentials", PASS, f"none needed: {target.api_endpoint} is an emulator")
    if backend is not None and backend.credentials is not None:
        return backend.credentials, Check("credentials", PASS, account_of(backend.credentials))
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    from vtrain.cloud.vertex.logreader import SCOPES
    from vtrain.cloud.vertex.retry import ADC_HELP

    try:
        credentials, _ = google.auth.default(scopes=SCOPES)
    except DefaultCredentialsError as err:
        return None, Check("credentials", FAIL, f"none found ({str(err).splitlines()[0]}); {ADC_HELP}")
    return credentials, Check("credentials", PASS, account_of(credentials))


# ---- buckets ------------------------------------------------------------------------------------
def bucket_location(client: Any, name: str) -> tuple[str, str] | None:
    """(location, type) of a bucket, e.g. ("us-central1", "region") or ("us", "multi-region"); None
    when you may not read the bucket's metadata. Raises NotFound for a missing bucket."""
    from google.api_core import exceptions as gexc

    from vtrain.trainer.staging import call_policy

    try:
        bucket = client.get_bucket(name, **call_policy(client))  # bounded, a line per retry
    except gexc.Forbidden:
        return None
    location = (bucket.location or "").lower()
    kind = (bucket.location_type or "").lower()
    if not kind:
        from vtrain.cloud.target import REGION_RE

        kind = "region" if REGION_RE.match(location) else "multi-region"
    return location, kind


def _bucket_check(name: str, what: str, uri: str, region: str, client: Any, permissions: tuple[str, ...],
                  mismatch: str) -> Check:  # fmt: skip
    from google.api_core import exceptions as gexc

    from vtrain.trainer import staging

    create = f"`gcloud storage buckets create gs://{uri.split('/')[2]} --location={region}`"
    try:
        located = bucket_location(client, uri.split("/")[2])
        target = staging.StagingTarget(kind="gcs", bucket=uri.split("/")[2], prefix="")
        if permissions == staging.REQUIRED_PERMISSIONS:
            staging.check_target(target, client)
        else:
            granted = set(client.bucket(target.bucket).test_iam_permissions(list(permissions),
                                                                            **staging.call_policy(client)))
            missing = [p for p in permissions if p not in granted]
            if missing:
                return Check(name, FAIL, f"{uri} is not writable for you: missing {', '.join(missing)} "
                                         "(grant roles/storage.objectAdmin on the bucket)")  # fmt: skip
    except staging.network_errors() as err:  # unreachable: one line naming the endpoint, not a traceback
        return Check(name, FAIL, str(staging.unreachable_error(err, client, f"cannot check {uri}")))
    except gexc.NotFound:
        return Check(name, FAIL, f"{uri}: the bucket does not exist; create it in the job's region: {create}")
    except PackagingError as err:
        return Check(name, FAIL, str(err))
    except gexc.GoogleAPICallError as err:
        return Check(name, FAIL, f"{uri}: cannot check it ({staging._reason(err)})")
    if located is None:
        return Check(name, WARN, f"{uri} is writable, but you may not read its location (storage.buckets.get); "
                                 f"make sure it is in {region}")  # fmt: skip
    location, kind = located
    if kind == "region" and location == region:
        return Check(name, PASS, f"{uri} is writable and in {region}, as the job")
    if kind == "region":
        fix = f"use a bucket in {region}: {create}, then set {what} to it (or run the job in {location})"
        return Check(name, mismatch, f"{uri} is in {location}, the job runs in {region}: every replica would read "
                                     f"across regions (slower, and charged as egress); {fix}")  # fmt: skip
    return Check(name, WARN, f"{uri} is in the {kind} location {location.upper()}; the job runs in {region}: a bucket "
                             f"in {region} is faster and avoids cross-region charges ({create})")  # fmt: skip


def _staging(config: JobConfig, region: str, client: Callable[[], Any]) -> Check:
    from vtrain.trainer import staging

    if config.trainer.package is None:
        return Check("staging bucket", SKIP, "nothing to stage: the trainer is package_uris or a container")
    if config.trainer.build is not None:
        return Check("staging bucket", SKIP, "nothing to stage: the trainer goes in the image trainer.build pushes")
    try:
        target = staging.parse_staging(config.staging_bucket)
        if target.kind == "local":
            staging.check_target(target)
            return Check("staging bucket", PASS, f"{target.directory} is writable (a local directory)")
        uri = str(config.staging_bucket).strip().rstrip("/")
        return _bucket_check("staging bucket", "staging_bucket", uri, region, client(), staging.REQUIRED_PERMISSIONS,
                             FAIL)  # fmt: skip
    except PackagingError as err:
        return Check("staging bucket", FAIL, str(err))


def _output(config: JobConfig, region: str, client: Callable[[], Any]) -> Check:
    out = config.base_output_dir
    if not out:
        return Check("output dir", SKIP, "no base_output_dir: AIP_MODEL_DIR and friends are not set")
    if not out.startswith("gs://"):
        return Check("output dir", SKIP, f"{out} is not on Cloud Storage")
    try:
        return _bucket_check("output dir", "base_output_dir", out.rstrip("/"), region, client(), OUTPUT_PERMISSIONS,
                             WARN)  # fmt: skip
    except PackagingError as err:  # no credentials for Cloud Storage: said once, at the staging bucket
        return Check("output dir", FAIL, f"cannot check {out}: {err}".replace(" to reach the staging bucket", ""))


# ---- IAM ----------------------------------------------------------------------------------------
def _service_account(config: JobConfig, target: Target, credentials: Any) -> Check:
    email = config.service_account
    if not email:
        return Check("service account", PASS, "none set: replicas run as Vertex AI's Custom Code Service Agent")
    from google.auth.transport.requests import AuthorizedSession
    from requests.exceptions import RequestException

    endpoint = target.api_endpoint if target.local else IAM_ENDPOINT
    base = f"{endpoint}/v1/projects/-/serviceAccounts/{email}"
    session = AuthorizedSession(credentials)
    try:
        got = session.get(base, timeout=30)
        if got.status_code == 404:
            name, _, project = email.partition("@")
            return Check("service account", FAIL, f"{email} does not exist; create it: `gcloud iam service-accounts "
                                                  f"create {name} --project {project.split('.')[0]}`")  # fmt: skip
        tested = session.post(f"{base}:testIamPermissions", json={"permissions": [ACT_AS]}, timeout=30)
    except RequestException as err:
        return Check("service account", FAIL, f"cannot reach IAM at {endpoint} ({type(err).__name__})")
    if tested.status_code >= 400 and tested.status_code != 403:
        return Check("service account", FAIL, f"IAM answered {tested.status_code} for {email}: {_message(tested)}")
    granted: list[str] = []
    if tested.status_code < 400:
        from vtrain.foreign.data import Doc, Unreadable, parse_json

        source = "IAM's testIamPermissions answer"
        try:
            answer = Doc(parse_json(tested.content, source, max_bytes=1 << 20), source).require_object()
            granted = [item.string(limit=200) for item in answer.items("permissions")]
        except Unreadable as err:
            return Check("service account", WARN, f"{err}; whether you may act as {email} ({ACT_AS}) is not checked, "
                                                  "and a job running as it fails at create if you may not")
    if ACT_AS not in granted:
        grant = f"gcloud iam service-accounts add-iam-policy-binding {email} --member=user:YOU"
        return Check("service account", FAIL, f"you may not act as {email} (no {ACT_AS}), which a job running as it "
                                              f"needs; grant it: `{grant} --role=roles/iam.serviceAccountUser`")
    seen = "exists and you" if got.status_code < 400 else "you"
    return Check("service account", PASS, f"{email} {seen} may act as it ({ACT_AS})")


def _message(response: Any) -> str:
    from vtrain.foreign import printable

    try:
        return printable(str(response.json()["error"]["message"]), limit=500)
    except Exception:  # not Google's error shape (HTML, an array, too deep to parse)
        return printable(str(response.reason or "no message"), limit=200)


# ---- quota --------------------------------------------------------------------------------------
def _quota(body: dict[str, Any], target: Target, credentials: Any, backend: VertexBackend) -> Check:
    from google.auth.transport.requests import AuthorizedSession

    from vtrain.cloud import quota

    spec = body.get("jobSpec") or body.get("trialJobSpec") or {}
    if spec.get("persistentResourceId"):
        return Check("quota", SKIP, f"the job runs on the persistent resource {spec['persistentResourceId']}, whose "
                                    "machines are held already")  # fmt: skip
    needed = quota.needs(body)
    if not needed:
        return Check("quota", PASS, "the job counts against no training quota")
    page = quota.QUOTA_PAGE.format(project=target.project, metric=needed[0].metric)
    endpoint = target.api_endpoint if target.local and target.api_endpoint else quota.CLOUD_QUOTAS
    try:
        limits = quota.read_limits(AuthorizedSession(credentials), endpoint, target.project, target.region,
                                   [n.metric for n in needed])  # fmt: skip
    except quota.Unreadable as err:
        wanted = ", ".join(f"{n.amount} {n.metric.removeprefix(quota.SERVICE + '/')}" for n in needed)
        return Check("quota", WARN, f"cannot read the limits: {err}; the job needs {wanted} in {target.region}, "
                                    f"which Vertex refuses at create if over quota (see {page})")  # fmt: skip
    try:
        live = [job.proto for state in quota.LIVE_STATES for job in backend.list(state=state, limit=None)]
    except BackendError:  # said by the `vertex ai` check; count nothing in use
        live = []
    from google.protobuf import json_format

    used, jobs = quota.in_use(json_format.MessageToDict(p._pb) for p in live)
    status, detail = quota.verdict(needed, limits, used, jobs, target.region, target.project)
    return Check("quota", {"ok": PASS, "warn": WARN}.get(status, FAIL), detail)


# ---- TensorBoard and Experiment -----------------------------------------------------------------
def _tensorboard(config: JobConfig, backend: VertexBackend) -> Check:
    from vtrain.cloud.vertex.resources import find_tensorboard, tensorboard_display_name

    value = str(config.tensorboard)
    uploader = f"Vertex uploads AIP_TENSORBOARD_LOG_DIR as {config.service_account} (it needs roles/aiplatform.user)"
    if not config.service_account:
        return Check("tensorboard", FAIL, "Vertex uploads TensorBoard logs as the job's service account: set "
                                          "service_account")  # fmt: skip
    display = tensorboard_display_name(value)
    try:
        if display is None:
            return _tensorboard_by_name(value, backend, uploader)
        found = find_tensorboard(backend, display)
    except BackendError as err:
        return Check("tensorboard", FAIL, str(err))
    if found:
        return Check("tensorboard", PASS, f"'{display}' is {found}; {uploader}")
    return Check("tensorboard", PASS, f"no instance named '{display}' in {backend.region}: submit creates it "
                                      f"(aiplatform.tensorboards.create); {uploader}")  # fmt: skip


def _tensorboard_by_name(name: str, backend: VertexBackend, uploader: str) -> Check:
    from google.api_core.exceptions import NotFound

    from vtrain.cloud.vertex.resources import _client

    client = _client(backend, "TensorboardServiceClient")

    def get() -> bool:
        try:
            client.get_tensorboard(name=name, timeout=backend.timeout)
        except NotFound:
            return False
        return True

    exists = backend._call(get, action=f"read the TensorBoard {name}", resource=name,
                           permission="aiplatform.tensorboards.get")  # fmt: skip
    if not exists:
        return Check("tensorboard", FAIL, f"{name} does not exist; give a display name (or `create`) to have "
                                          "submit make one")  # fmt: skip
    return Check("tensorboard", PASS, f"{name} exists; {uploader}")


def _experiment(config: JobConfig, backend: VertexBackend) -> Check:
    from vtrain.cloud.vertex.resources import find_experiment

    try:
        found = find_experiment(backend, str(config.experiment))
    except BackendError as err:
        return Check("experiment", FAIL, str(err))
    if found:
        return Check("experiment", PASS, f"'{config.experiment}' is {found}")
    if "/" in str(config.experiment):  # a full name is sent as written: submit makes nothing
        return Check("experiment", FAIL, f"no experiment {config.experiment}: create it, or give its name alone and "
                                         "submit creates it")
    return Check("experiment", PASS, f"no experiment '{config.experiment}' in {backend.region}: submit creates it "
                                     "(aiplatform.contexts.create)")  # fmt: skip


# ---- Model Registry -----------------------------------------------------------------------------
def _parent_model(config: JobConfig, backend: VertexBackend) -> Check:
    """`model.parent` exists: the job's model becomes a version of it once the job SUCCEEDS, so a parent that is
    not there would be found only after the training was paid for."""
    from vtrain.cloud.model_registry import find_parent

    try:
        name, found = find_parent(backend, config)
    except BackendError as err:
        return Check("model parent", FAIL, str(err))
    if found is None:
        return Check("model parent", FAIL, f"{name} does not exist, so the job's model could not become a version of "
                                           "it after the job succeeds: name a model that exists in "
                                           f"{backend.region} (`gcloud ai models list --region={backend.region}`), or "
                                           "leave model.parent out and the first upload creates the model")
    return Check("model parent", PASS, f"{name} exists; the job's model becomes its next version")


# ---- the whole run ------------------------------------------------------------------------------
def run_preflight(
    target: Target,
    config: JobConfig | None = None,
    *,
    backend: VertexBackend | None = None,
    storage_client: Any = None,
    body: dict[str, Any] | None = None,
) -> Report:
    """Every check, in order; later checks that need what an earlier one lacked are skipped. `body`: the
    request the job makes (what the quota check counts); None builds it from `config`."""
    from vtrain.cloud.vertex.retry import RetryPolicy

    credentials, first = _credentials(target, backend)
    checks = [first]
    if credentials is None:
        names = ["vertex ai"] + (["staging bucket", "service account", "output dir", "quota"] if config else [])
        return Report((*checks, *(Check(n, SKIP, "needs credentials") for n in names)))
    if backend is None:  # with credentials in hand, making the client asks nothing yet (it cannot fail here)
        from vtrain.cloud.vertex import VertexBackend

        backend = VertexBackend.from_endpoint(target.project, target.region, target.api_endpoint,
                                              credentials=credentials, retry=RetryPolicy(attempts=2, initial=0.5))
    try:
        backend.list(limit=1)
        checks.append(Check("vertex ai", PASS, f"project {target.project}, region {target.region}: "
                                               f"customJobs.list answers at {target.endpoint}"))  # fmt: skip
    except BackendError as err:
        checks.append(Check("vertex ai", FAIL, str(err)))
    if config is None:
        return Report(tuple(checks))
    made: list[Any] = []

    def client() -> Any:
        if storage_client is not None:
            return storage_client
        if not made:
            from vtrain.trainer import staging

            made.append(staging.default_client())
        return made[0]

    checks.append(_staging(config, target.region, client))
    checks.append(_service_account(config, target, credentials))
    checks.append(_output(config, target.region, client))
    if body is None:
        from vtrain.jobfile.artifacts import plan_artifacts
        from vtrain.request.build import build_request

        body = build_request(config, plan_artifacts(config, region=target.region), region=target.region,
                             project=target.project).body
    checks.append(_quota(body, target, credentials, backend))
    if config.tensorboard:
        checks.append(_tensorboard(config, backend))
    if config.experiment:
        checks.append(_experiment(config, backend))
    if config.model is not None and config.model.parent:
        checks.append(_parent_model(config, backend))
    return Report(tuple(checks))
