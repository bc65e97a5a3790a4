"""Waiting on the network visibly and for a bounded time.

Every Google call vtrain makes (Vertex AI, Cloud Logging, Cloud Storage) waits at most
`attempt_timeout()` seconds per attempt for a connection or an answer (VTRAIN_NETWORK_TIMEOUT,
default 30), and retries for at most `deadline()` (three attempts' worth) in total, so a
dead network ends in a one-line error naming the endpoint, not minutes of silence. Before each
retry a progress line goes to the sink: silent in the SDK, stderr in the CLI (`set_sink`).

Which failures are worth another attempt is decided here once for every Google call, whichever
client made it (`is_transient`, `reached_server`, `network_reason`): Cloud Storage uploads in
:mod:`vtrain.trainer.staging` and the Vertex client in :mod:`vtrain.cloud.vertex` classify alike.
Transient: 429 rate limits (not resource quotas), 500/502/503/504 (not 501), a dropped
connection, no answer within the attempt's timeout, an answer cut short or unreadable.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from vtrain.errors import UsageError

TIMEOUT_ENV = "VTRAIN_NETWORK_TIMEOUT"
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 3600.0

_sink: Callable[[str], None] | None = None
_QUOTA_RE = re.compile(
    r"exceed quota limits: ([\w./-]+)|[Qq]uota exceeded for (?:quota metric )?'?([\w./-]+)"
)


def set_sink(sink: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Where progress lines go (None: nowhere); returns the previous sink."""
    global _sink
    previous, _sink = _sink, sink
    return previous


def note(line: str) -> None:
    """One progress line, if anyone listens."""
    if _sink is not None:
        _sink(line)


def attempt_timeout(env: Mapping[str, str] | None = None) -> float:
    """Seconds one attempt may wait to connect, and then for each read of the answer."""
    text = (os.environ if env is None else env).get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_TIMEOUT:  # also refuses nan and inf
        raise UsageError(f"{TIMEOUT_ENV} must be seconds between 0 and {MAX_TIMEOUT:.0f}, got {text!r}")
    return value


def deadline(env: Mapping[str, str] | None = None) -> float:
    """Seconds to keep retrying one call before giving up."""
    return 3 * attempt_timeout(env)


def unreachable(where: str, why: str, tried: str, setting: str) -> str:
    """The one line for an endpoint that never answered: which, why, and what to check
    (`setting`: where the endpoint comes from, e.g. "--api-endpoint, VTRAIN_API_ENDPOINT")."""
    local = where.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]"))
    start = "is the emulator running there? " if local else ""
    return (
        f"cannot reach {where} ({why}; {tried}); {start}check the network connection, any proxy "
        f"(HTTPS_PROXY) and the endpoint ({setting}); {TIMEOUT_ENV} sets the seconds to wait per attempt"
    )


def _payload_error(err: Any) -> dict[str, Any]:
    """The `error` object of a REST answer, when there is one."""
    response = getattr(err, "response", None)
    try:
        data = response.json() if response is not None else None
    except Exception:  # not JSON (an HTML error page): fall back to the exception text
        return {}
    if isinstance(data, list):
        data = next((d for d in data if isinstance(d, dict)), {})
    return data.get("error", {}) if isinstance(data, dict) else {}


def api_message(err: Any) -> str:
    """The server's own message, without api-core's 'METHOD URL:' prefix."""
    message = _payload_error(err).get("message") or getattr(err, "message", None) or str(err)
    return str(message).splitlines()[0] if str(message).strip() else type(err).__name__


def api_status(err: Any) -> str:
    status = _payload_error(err).get("status")
    if status:
        return str(status)
    grpc_code = getattr(err, "grpc_status_code", None)
    return grpc_code.name if grpc_code is not None else str(getattr(err, "code", "") or "")


def _details(err: Any) -> list[Any]:
    return list(getattr(err, "details", None) or _payload_error(err).get("details") or [])


def quota_metric(err: Any) -> str | None:
    """The exhausted resource quota, or None when a 429 is only a request-rate limit."""
    metadata = getattr(err, "metadata", None) or {}
    if metadata.get("quota_metric"):
        return str(metadata["quota_metric"])
    for detail in _details(err):
        if isinstance(detail, dict) and detail.get("@type", "").endswith("google.rpc.QuotaFailure"):
            for violation in detail.get("violations", []):
                found = _QUOTA_RE.search(violation.get("description", ""))
                if found:
                    return found.group(1) or found.group(2)
    found = _QUOTA_RE.search(api_message(err))
    if found and "exceed quota limits" in found.group(0):
        return found.group(1)
    return None


def is_transient(err: BaseException) -> bool:
    from google.api_core import exceptions as gexc
    from google.auth.exceptions import TransportError
    from google.protobuf.json_format import ParseError
    from requests.exceptions import ChunkedEncodingError, Timeout
    from requests.exceptions import ConnectionError as RequestsConnectionError

    if isinstance(err, gexc.TooManyRequests):
        return quota_metric(err) is None
    if isinstance(err, gexc.ServerError):
        return not isinstance(err, gexc.MethodNotImplemented)
    return isinstance(err, (RequestsConnectionError, Timeout, TransportError, ChunkedEncodingError, ParseError))


def _connect_failure(err: BaseException) -> BaseException | None:
    """The urllib3 error under a requests ConnectionError when no connection was made."""
    from urllib3.exceptions import NewConnectionError

    seen: set[int] = set()
    stack: list[object] = [err]
    while stack:
        item = stack.pop()
        if id(item) in seen or not isinstance(item, BaseException):
            continue
        seen.add(id(item))
        if isinstance(item, NewConnectionError):
            return item
        stack += [getattr(item, "reason", None), item.__cause__, item.__context__, *item.args]
    return None


def reached_server(err: BaseException) -> bool:
    """Could the server have acted on the request? False only when it surely did not: a 429,
    a refused or unresolvable connection, a connect timeout."""
    from google.api_core import exceptions as gexc
    from requests.exceptions import ConnectTimeout

    if isinstance(err, (gexc.TooManyRequests, ConnectTimeout)):
        return False
    return _connect_failure(err) is None


def network_reason(err: BaseException, timeout: float | None = None) -> str:
    """A short why for a call that got no usable answer."""
    from google.api_core import exceptions as gexc
    from google.protobuf.json_format import ParseError
    from requests import exceptions as rexc

    if isinstance(err, gexc.GoogleAPICallError):
        return f"{err.code} {api_status(err)}: {api_message(err)}"
    wait = f" within {timeout:g} s" if timeout else ""
    if isinstance(err, rexc.ConnectTimeout):
        return f"could not connect{wait}"
    if isinstance(err, rexc.ReadTimeout):
        return f"no answer{wait}"
    if isinstance(err, rexc.SSLError):
        return "the TLS handshake failed"
    if isinstance(err, rexc.ChunkedEncodingError):
        return "the answer was cut short"
    if isinstance(err, ParseError):
        return "the answer was not valid JSON"
    failure = _connect_failure(err)
    if failure is not None:
        text = str(failure).lower()
        if "name or service" in text or "resolve" in text or "nodename" in text:
            return "the host name does not resolve"
        return "connection refused" if "refused" in text else "cannot connect"
    if isinstance(err, rexc.ConnectionError):
        return "the connection was dropped"
    return f"{type(err).__name__}: {err}"
