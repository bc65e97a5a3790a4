"""A local Vertex AI JobService (CustomJobs) that the real `aiplatform_v1` client can talk to.

    with Emulator(runner=sleep_runner(0.2)) as emu:
        client = emu.client()                    # JobServiceClient, REST, anonymous
        job = client.create_custom_job(parent=emu.parent("my-project"), custom_job=...)

The client reaches it through `client_options={"api_endpoint": "http://127.0.0.1:PORT"}`:
the REST transport keeps an explicit `http://` scheme (it only adds `https://` when the
endpoint has none), so no TLS and no transport subclass are needed. Credentials must be
`AnonymousCredentials()` so nothing reads ADC. See `server.py` for routes and fault
injection, `runner.py` for the job-runner interface, `validation.py` for what is rejected.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from vtrain.emulator.runner import (
    LOCAL_RUNNER,
    GatedRunner,
    JobRunner,
    RunContext,
    RunResult,
    load_runner,
    sleep_runner,
)

DENIED_PROJECT = "denied-project"
QUOTA_PROJECT = "quota-project"
#: The longest a job may stay in one state: ~31 years, well inside both a protobuf Timestamp
#: (year 9999) and the longest wait a thread can do (threading.TIMEOUT_MAX).
MAX_SECONDS = 1e9

__all__ = [
    "DENIED_PROJECT",
    "LOCAL_RUNNER",
    "MAX_SECONDS",
    "QUOTA_PROJECT",
    "Emulator",
    "GatedRunner",
    "JobRunner",
    "RunContext",
    "RunResult",
    "load_runner",
    "sleep_runner",
]


class Emulator:
    """The emulator server plus its job store; start/stop it or use it as a context manager.

    `queued_seconds` is how long a new job stays JOB_STATE_QUEUED first (0, the default here: it is
    created PENDING), `pending_seconds` how long it then stays JOB_STATE_PENDING; the runner decides how
    long it stays RUNNING (the default sleeps `run_seconds`); `cancel_seconds` is the
    CANCELLING → CANCELLED delay. Projects named in `deny_projects` (default
    ``denied-project``) answer 403 PERMISSION_DENIED; creates in `quota_projects` (default
    ``quota-project``) answer 429 with a resource-quota error; with `projects`, only those exist (the
    others answer 403 too). Names carry the project number (:mod:`vtrain.emulator.projects`). With
    `token`, every path must start with ``/TOKEN`` (`url` includes it; see :mod:`vtrain.emulator.guard`).
    HyperparameterTuningJobs are served too (:mod:`vtrain.emulator.tuning`), run by `tuning_runner`
    (default: trials only suggested, never measured), and so are the TensorBoard instances and
    Experiments jobs link to (:mod:`vtrain.emulator.metadata`) and the Cloud Quotas limits preflight
    reads (:mod:`vtrain.emulator.quotas`, changed with `set_quota`); `deny_permissions` refuses chosen
    IAM permissions everywhere.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        runner: JobRunner | None = None,
        tuning_runner: JobRunner | None = None,
        run_seconds: float = 2.0,
        pending_seconds: float = 0.5,
        queued_seconds: float = 0.0,
        cancel_seconds: float = 0.2,
        deny_projects: set[str] | None = None,
        quota_projects: set[str] | None = None,
        access_log: Callable[[str], None] | None = None,
        token: str | None = None,
        projects: set[str] | None = None,
    ) -> None:
        from vtrain.emulator.server import EmulatorHTTPServer, Faults
        from vtrain.emulator.store import JobStore
        from vtrain.emulator.tuning import TuningStore, pretend_tuning_runner

        for what, seconds in (
            ("run_seconds", run_seconds),
            ("pending_seconds", pending_seconds),
            ("queued_seconds", queued_seconds),
            ("cancel_seconds", cancel_seconds),
        ):
            if not 0 <= seconds <= MAX_SECONDS:  # also refuses nan
                raise ValueError(f"{what} must be between 0 and {MAX_SECONDS:.0f} s, got {seconds}")

        self.store = JobStore(runner or sleep_runner(run_seconds), pending_seconds, cancel_seconds, queued_seconds)
        self.tuning_store = TuningStore(tuning_runner or pretend_tuning_runner(run_seconds), pending_seconds,
                                        cancel_seconds, queued_seconds)
        self.faults = Faults()
        self._server = EmulatorHTTPServer(
            (host, port),
            self.store,
            self.faults,
            {DENIED_PROJECT} if deny_projects is None else set(deny_projects),
            {QUOTA_PROJECT} if quota_projects is None else set(quota_projects),
            access_log,
        )
        self._server.tuning_store = self.tuning_store
        if token is not None:
            from vtrain.emulator.guard import TOKEN_ALPHABET

            if not TOKEN_ALPHABET.match(token):
                raise ValueError("token must be 16 to 128 letters, digits, '_' or '-'")
        self._server.token = token
        self._server.known_projects = None if projects is None else frozenset(projects)
        self._thread: threading.Thread | None = None

    # ---- lifecycle --------------------------------------------------------------------
    def start(self) -> Emulator:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, args=(0.05,), name="vertex-emulator", daemon=True
            )
            self._thread.start()
        self.store.api_url = self.tuning_store.api_url = self.url
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
        self.store.close()
        self.tuning_store.close()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- what tests use ---------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The endpoint for every client: `http://127.0.0.1:PORT`, plus `/TOKEN` when a token is required."""
        return f"http://127.0.0.1:{self.port}" + (f"/{self._server.token}" if self._server.token else "")

    @staticmethod
    def parent(project: str = "test-project", location: str = "us-central1") -> str:
        return f"projects/{project}/locations/{location}"

    @staticmethod
    def project_number(project: str = "test-project") -> str:
        """The number the emulator's resource names carry for `project` (as Vertex names projects)."""
        from vtrain.emulator.projects import project_number

        return project_number(project)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request received: method, path, query, parsed JSON body (oldest first)."""
        return list(self._server.requests)

    def jobs(self) -> list[Any]:
        """Snapshot of the stored jobs as `aiplatform_v1.CustomJob`, oldest first."""
        from google.cloud.aiplatform_v1.types import CustomJob

        return [CustomJob.wrap(pb) for pb in self.store.snapshot()]

    def tuning_jobs(self) -> list[Any]:
        """Snapshot of the stored jobs as `aiplatform_v1.HyperparameterTuningJob`, oldest first."""
        from google.cloud.aiplatform_v1.types import HyperparameterTuningJob

        return [HyperparameterTuningJob.wrap(pb) for pb in self.tuning_store.snapshot()]

    def fail_next(self, count: int = 1, *, code: int = 503, mode: str = "before") -> None:
        """Make the next `count` requests fail.

        mode "before": answered `code` (429, 500, 503, 504) before any work (no job is created);
        "reset": the connection is dropped before any work;
        "after": the work is done (a create creates the job) and the answer is `code`;
        "reset-after": the work is done and the connection dropped without an answer;
        "garble": the work is done and the answer is a 200 whose JSON is cut short.
        """
        from vtrain.emulator.errors import TRANSIENT
        from vtrain.emulator.server import FAULT_MODES

        if mode not in FAULT_MODES:
            raise ValueError(f"mode must be one of {', '.join(FAULT_MODES)}, not {mode!r}")
        if mode in ("before", "after") and code not in TRANSIENT:
            raise ValueError(f"code must be one of {sorted(TRANSIENT)}")
        if count < 0:
            raise ValueError(f"count must not be negative, got {count}")
        self.faults.add(count, code, mode)

    def set_service_accounts(self, accounts: dict[str, tuple[str, ...]] | None) -> None:
        """Which service accounts exist, each with the IAM permissions the caller holds on it
        (e.g. ``{"sa@p.iam.gserviceaccount.com": ("iam.serviceAccounts.actAs",)}``); None, the
        default: every well-formed account exists and the caller may do anything with it."""
        self._server.service_accounts = (
            None if accounts is None else {email: frozenset(perms) for email, perms in accounts.items()}
        )

    def deny_permissions(self, *permissions: str) -> None:
        """Refuse these IAM permissions on every project with IAM's 403 (e.g.
        ``"aiplatform.tensorboards.create"``, ``"cloudquotas.quotas.get"``); none: allow them again."""
        self._server.denied_permissions = frozenset(permissions)

    def set_quota(self, metric: str, value: int | None, region: str | None = None) -> None:
        """The Cloud Quotas limit of `metric` (``aiplatform.googleapis.com/custom_model_training_cpus``)
        in `region` (None: its default for every region); `value` None: the API has no such quota.
        Every training metric starts at :data:`vtrain.emulator.quotas.DEFAULT_LIMIT`."""
        self._server.quotas.set(metric, value, region)

    def tensorboards(self) -> list[dict[str, Any]]:
        """The TensorBoard instances made here (REST dicts), oldest first."""
        return [b for _, b in sorted(self._server.metadata.tensorboards.items())]

    def contexts(self) -> list[dict[str, Any]]:
        """The metadata contexts (Experiments) made here (REST dicts)."""
        return [c for _, c in sorted(self._server.metadata.contexts.items())]

    def models(self) -> list[dict[str, Any]]:
        """Every version of every model in Model Registry here (REST dicts), by model, oldest version first;
        uploads still pending are not in it."""
        registry = self._server.models
        return [v for name in sorted(registry.models) for v in registry.versions(name)]

    def client(self) -> Any:
        """A real `JobServiceClient` pointed here: REST transport, anonymous credentials."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud.aiplatform_v1 import JobServiceClient

        return JobServiceClient(
            transport="rest",
            client_options={"api_endpoint": self.url},
            credentials=AnonymousCredentials(),
        )


def print_access_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
