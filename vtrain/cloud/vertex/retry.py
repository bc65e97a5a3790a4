"""Bounded retries for transient Google API failures, and one-line explanations for the rest.

Which failures are transient is :mod:`vtrain.network`'s call (one classification for every
Google call). Each attempt waits at
most `RetryPolicy.timeout` s and all of them at most `deadline` s (see :mod:`vtrain.network`),
with a progress line before each retry. Anything else is turned into a
:class:`~vtrain.errors.BackendError` whose message says what was refused and what to do
(which permission, which quota, which command), so the CLI never shows a traceback for a
refused call. Works for the REST and gRPC transports alike: api-core's gRPC classes subclass
the HTTP ones we match on.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from vtrain import network
from vtrain.errors import BackendError, CreateOutcomeUnknown
from vtrain.network import api_message, api_status, is_transient, network_reason, quota_metric

T = TypeVar("T")

ADC_HELP = (
    "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS "
    "to a service-account key file"
)
QUOTA_PAGE = "https://console.cloud.google.com/iam-admin/quotas?project={project}"
_PERMISSION_RE = re.compile(r"Permission '([^']+)' denied")
_API_DISABLED = ("SERVICE_DISABLED", "ACCESS_NOT_CONFIGURED")


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` calls at most, sleeping initial·multiplier^k (capped, jittered) between them."""

    attempts: int = 6
    initial: float = 1.0
    multiplier: float = 2.0
    maximum: float = 16.0
    jitter: float = 0.2
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)
    #: Seconds one attempt waits to connect and for each read; None: network.attempt_timeout().
    timeout: float | None = None
    #: Seconds after which no new attempt starts; None: network.deadline().
    deadline: float | None = None

    def attempt_timeout(self) -> float:
        return network.attempt_timeout() if self.timeout is None else self.timeout

    def total_deadline(self) -> float:
        return network.deadline() if self.deadline is None else self.deadline

    def delays(self) -> Iterator[float]:
        """The sleeps between attempts: attempts - 1 of them."""
        delay = self.initial
        for _ in range(max(self.attempts - 1, 0)):
            yield min(delay, self.maximum) * (1 + random.uniform(-self.jitter, self.jitter))
            delay *= self.multiplier


class TransientExhausted(Exception):
    """Every attempt failed transiently; carries the last error and how long we tried."""

    def __init__(self, last: BaseException, attempts: int, elapsed: float) -> None:
        super().__init__(str(last))
        self.last = last
        self.attempts = attempts
        self.elapsed = elapsed


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryPolicy,
    before_retry: Callable[[BaseException], None] | None = None,
    *,
    what: str = "Vertex AI",
) -> T:
    """Call `fn` until it succeeds, fails for good, or `policy.attempts` or its deadline run out.

    `before_retry(err)` runs before each new attempt; it may return normally or raise
    (create() uses it to look for a job an ambiguous failure may have created). A progress
    line naming `what` goes to :func:`vtrain.network.note` before each wait.
    """
    start = time.monotonic()
    delays = policy.delays()
    deadline = policy.total_deadline()
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as err:
            if not is_transient(err):
                raise
            delay = next(delays, None)
            elapsed = time.monotonic() - start
            if delay is None or elapsed + delay >= deadline:
                raise TransientExhausted(err, attempt, elapsed) from err
            reason = network_reason(err, policy.attempt_timeout())
            said = f" answered {reason}" if hasattr(err, "code") and hasattr(err, "errors") else f": {reason}"
            network.note(f"{what}{said}; retrying in {delay:.1f} s (attempt {attempt + 1} of {policy.attempts})")
            policy.sleep(delay)
            if before_retry is not None:
                before_retry(err)


def exhausted(err: TransientExhausted, endpoint: str = "", timeout: float | None = None) -> str:
    """Why every attempt failed, and what to check: the server kept failing, or it was never reached."""
    from google.api_core import exceptions as gexc

    why = network_reason(err.last, timeout)
    tried = f"{err.attempts} attempt{'s' if err.attempts != 1 else ''} over {err.elapsed:.1f} s"
    if isinstance(err.last, gexc.GoogleAPICallError):
        return f"Vertex AI kept failing ({why}) after {tried}; try again later"
    return network.unreachable(endpoint or "Vertex AI", why, tried, "--api-endpoint, VTRAIN_API_ENDPOINT")


def lost_create(action: str, why: str, looked: bool, submit_id: str, find: str) -> CreateOutcomeUnknown:
    """A create that may have reached the server, and whose job could not be found: say it may exist."""
    seen = "none with its submit id is listed yet" if looked else "vtrain could not look for it"
    return CreateOutcomeUnknown(
        f"cannot {action}: {why.removesuffix('; try again later')}, after a create that may have reached "
        f"Vertex AI: the job may exist ({seen}); find it with `{find}`",
        submit_id=submit_id,
        find_command=find,
    )


def explain(
    err: BaseException,
    *,
    action: str,
    resource: str,
    project: str,
    region: str,
    permission: str,
    role: str = "roles/aiplatform.user",
    endpoint: str = "",
    timeout: float | None = None,
) -> BackendError:
    """One line: what failed, why, and what to do about it."""
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as aexc

    if isinstance(err, TransientExhausted):
        return BackendError(f"cannot {action}: {exhausted(err, endpoint, timeout)}")
    if isinstance(err, aexc.DefaultCredentialsError):
        return BackendError(f"cannot {action}: no Google Cloud credentials found; {ADC_HELP}")
    if isinstance(err, aexc.RefreshError):
        # google-auth raises RefreshError(message, response): keep the message only
        first = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
        detail = (first.splitlines() or ["refresh failed"])[0]
        return BackendError(f"cannot {action}: Google Cloud credentials were refused ({detail}); {ADC_HELP}")
    if isinstance(err, gexc.Unauthorized):
        return BackendError(
            f"cannot {action}: the credentials were rejected (401 {api_status(err)}: "
            f"{api_message(err)}); {ADC_HELP}"
        )
    if isinstance(err, gexc.Forbidden):
        reason = getattr(err, "reason", None) or ""
        message = api_message(err)
        if reason in _API_DISABLED or "has not been used in project" in message or "is disabled" in message:
            return BackendError(
                f"cannot {action}: the Vertex AI API is not enabled in project {project}; run "
                f"`gcloud services enable aiplatform.googleapis.com --project {project}`"
            )
        metadata = getattr(err, "metadata", None) or {}
        found = _PERMISSION_RE.search(message)
        needed = metadata.get("permission") or (found.group(1) if found else permission)
        return BackendError(
            f"cannot {action}: permission {needed} denied on {resource} for the current credentials; "
            f"grant them {role} (or a role with {needed}) in project {project}"
        )
    if isinstance(err, gexc.TooManyRequests):
        metric = quota_metric(err) or "a Vertex AI quota"
        return BackendError(
            f"cannot {action}: quota {metric} exceeded in project {project}, region {region}; "
            f"request more at {QUOTA_PAGE.format(project=project)} or use another region or machine"
        )
    if isinstance(err, gexc.NotFound):
        return BackendError(f"cannot {action}: {resource} not found ({api_message(err)})")
    if isinstance(err, gexc.GoogleAPICallError):
        return BackendError(
            f"cannot {action}: Vertex AI answered {err.code} {api_status(err)}: {api_message(err)}"
        )
    return BackendError(f"cannot {action}: {type(err).__name__}: {err}")
