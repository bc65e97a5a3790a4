"""Which of a trainer's selected files its build backend leaves out of the sdist, remembered per layout.

The sdist is named after the selected files it holds (:mod:`vtrain.trainer.packaging`), and only a
build knows which those are. What it drops is a function of the file list and the build
configuration (:data:`BUILD_CONFIG`; a backend upgrade aside, and a build that follows corrects
the record), so a build records the dropped files under a key of those, in vtrain's cache
(``sdist-files/NAME-KEY.json``), and a plan of the same layout reads them back instead of building.
A record that is missing or does not parse is no record: the plan builds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from vtrain.trainer.select import Scan, hash_entries, readable_errors
from vtrain.userpaths import cache_dir

#: Root files whose content (with the list of selected files) decides which files the backend keeps.
BUILD_CONFIG = ("pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in")


def layout_key(scan: Scan) -> str:
    config: list[tuple[str, bytes | Path]] = [(rel, scan.root / rel) for rel in BUILD_CONFIG
                                              if (scan.root / rel).is_file()]
    with readable_errors(scan.root):
        return hash_entries([("\0files", "\0".join(scan.files).encode()), *config])


def _record(scan: Scan, name: str) -> Path:
    return cache_dir() / "sdist-files" / f"{name}-{layout_key(scan)}.json"


def recorded_drops(scan: Scan, name: str) -> list[str] | None:
    """The selected files a build of this layout left out, or None if it was never built here."""
    try:
        data = json.loads(_record(scan, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    dropped = data.get("dropped") if isinstance(data, dict) else None
    if not isinstance(dropped, list) or not all(isinstance(rel, str) for rel in dropped):
        return None
    return dropped


def record_drops(scan: Scan, name: str, dropped: list[str]) -> None:
    """Best effort: an unwritable cache only means the next plan builds again."""
    record = _record(scan, name)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f".{record.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"dropped": dropped}), encoding="utf-8")
        os.replace(tmp, record)
    except OSError:
        pass


def sdist_digest(root: Path, files: Iterable[str], dropped: Iterable[str]) -> str:
    """The hash of the selected files the sdist holds (all of them: the scan's own digest), streamed."""
    gone = set(dropped)
    with readable_errors(root):
        return hash_entries((rel, root / rel) for rel in files if rel not in gone)


__all__ = ["BUILD_CONFIG", "layout_key", "record_drops", "recorded_drops", "sdist_digest"]
