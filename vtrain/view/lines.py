"""What a person watching a local run reads: the replicas' own lines told from TensorFlow's C++
logging, and the run's progress as plain lines (the live view's rows, for logs and CI).

A TensorFlow replica writes two kinds of lines: its Python program's (prints, `logging`, Keras
progress) and the C++ runtime's (absl/glog: ``I0000 00:00:1796165869.336992   13361 port.cc:153]
oneDNN custom operations are on…``, ``E0000 … cuda_dnn.cc …] … cuInit …``). A quickstart prints
~120 of the latter, which read like failures and bury the result; they stay in the replica's
log file (every line always does) and are only counted on the terminal.

Pure: the CLI (:mod:`vtrain.view.live`) calls these with what
:meth:`vtrain.local.job.LocalJob.progress` returns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_NATIVE = re.compile(
    r"^(?:"
    r"[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [^\s\]]+:\d+\] "  # absl / glog (TF >= 2.16)
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}: [IWEF] [^\s\]]+:\d+\] "  # TF's own (TF < 2.16)
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"
    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\.$"
    r")"
)


def is_native_log(text: str) -> bool:
    """A line of TensorFlow's C++ (absl/glog) logging, not of the replica's Python program."""
    return bool(_NATIVE.match(text))


def clock(seconds: float) -> str:
    """`0:07`, `12:34`, `1:02:03`: elapsed time as a person reads it."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def rate_text(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1f}/s" if rate < 100 else f"{rate:.0f}/s"


def replica_text(row: Mapping[str, Any]) -> str:
    """`worker-0 running step 40 (3.1/s), 1 restart`: one replica's row in words."""
    text = f"{row['replica']} {row['state']}"
    if row.get("step") is not None:
        text += f" step {row['step']}"
        if row.get("rate") is not None:
            text += f" ({rate_text(row['rate'])})"
    n = int(row.get("restarts") or 0)
    if n:
        text += f", {n} restart{'s' if n != 1 else ''}"
    return text


def plain_line(progress: Mapping[str, Any]) -> str:
    """The live view's content on one line (not a terminal, `--plain`, CI)."""
    rows: Sequence[Mapping[str, Any]] = progress.get("replicas") or []
    return f"progress {clock(progress.get('seconds') or 0)}: " + "; ".join(replica_text(r) for r in rows)


def changed(before: Mapping[str, Any] | None, now: Mapping[str, Any]) -> bool:
    """Whether a plain progress line would say something new (a state, a step, a restart)."""
    if before is None:
        return True
    key = [(r["replica"], r["state"], r.get("step"), r.get("restarts")) for r in now.get("replicas") or []]
    return key != [(r["replica"], r["state"], r.get("step"), r.get("restarts")) for r in before.get("replicas") or []]


__all__ = ["changed", "clock", "is_native_log", "plain_line", "rate_text", "replica_text"]
