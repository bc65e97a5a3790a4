"""One grammar for every duration vtrain reads: job-file keys (`scheduling.timeout`, DiLoCo's
`grace`), `--fault …@WHEN` and its arguments, `--recover-backoff`, `estimate --step-compute`.

A duration is a bare number of seconds (``90``, ``0.5``, ``.5``) or one or more parts of a number
and a unit, largest first or not (``1h30m``, ``1d``, ``.5s``, ``400ms``, ``30us``, ``2min``); spaces
and case do not matter. Never infinity, NaN, a negative, ``1_0`` or an exponent that overflows (``1e400``):
each used to be read somewhere and froze a run or printed ``inf``. At most MAX_SECONDS (10,000 years,
the longest a protobuf Duration holds). Whether 0 is allowed is the caller's to say ("must be longer
than 0s"), not a reason to call a value "not a duration".
"""

from __future__ import annotations

import math
import re

#: unit -> (multiply, divide); dividing keeps 30us exactly 3e-05 rather than 2.9999999999999997e-05.
UNITS = {"us": (1, 10**6), "µs": (1, 10**6), "ms": (1, 1000), "s": (1, 1), "m": (60, 1), "min": (60, 1),
         "h": (3600, 1), "d": (86400, 1)}
MAX_SECONDS = 315_576_000_000
_NUMBER = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:e[+-]?[0-9]+)?"  # ASCII digits: float() reads ١٠ too
_UNIT = r"(?:min|ms|us|µs|s|m|h|d)"
_BARE = re.compile(_NUMBER)
_PART = re.compile(rf"({_NUMBER})({_UNIT})")
EXAMPLES = "90s, 30m, 24h or 7d"
#: For `vtrain schema`: the same grammar as a JSON Schema pattern (any case).
PATTERN = (r"^\s*(?:(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?\s*"
           r"(?:[mM][iI][nN]|[mM][sS]|[uU][sS]|µ[sS]|[sSmMhHdD])?\s*)+$")


class DurationError(ValueError):
    """Not a duration, in words; callers turn it into their own kind of error."""


def parse_seconds(value: object, *, limit: float | None = MAX_SECONDS) -> float:
    """Seconds in `value` (text or a number), by the one grammar; DurationError when it is none, or
    over `limit` (None: the caller checks the bound and says it in its own words)."""
    if isinstance(value, bool) or value is None:
        raise DurationError(f"expected a duration like {EXAMPLES}")
    if isinstance(value, (int, float)):
        seconds = float(value) if not isinstance(value, int) or abs(value).bit_length() <= 1000 else math.inf
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if _BARE.fullmatch(text):
            seconds = float(text)
        else:
            parts = list(_PART.finditer(text))
            if not text or "".join(p.group(0) for p in parts) != text:
                raise DurationError(f"expected a duration like {EXAMPLES}, got {value!r}"[:200])
            seconds = sum(float(p.group(1)) * UNITS[p.group(2)][0] / UNITS[p.group(2)][1] for p in parts)
    else:
        raise DurationError(f"expected a duration like {EXAMPLES}")
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationError(f"expected a finite duration of 0 or more seconds, got {value!r}"[:200])
    if limit is not None and seconds > limit:
        raise DurationError(f"must be at most {limit:g}s, got {value!r}"[:200])
    return seconds


__all__ = ["EXAMPLES", "MAX_SECONDS", "PATTERN", "UNITS", "DurationError", "parse_seconds"]
