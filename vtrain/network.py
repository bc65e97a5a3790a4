"""Waiting on the network visibly and for a bounded time.

Every Google call vtrain makes (Vertex AI, Cloud Logging, Cloud Storage) waits at most
`attempt_timeout()` seconds per attempt for a connection or an answer (VTRAIN_NETWORK_TIMEOUT,
default 30), and retries for at most `deadline()` (three attempts' worth) in total, so a
dead network ends in a one-line error naming the endpoint, not minutes of silence. Before each
retry a progress line goes to the sink: silent in the SDK, stderr in the CLI (`set_sink`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping

from vtrain.errors import UsageError

TIMEOUT_ENV = "VTRAIN_NETWORK_TIMEOUT"
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 3600.0

_sink: Callable[[str], None] | None = None


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
