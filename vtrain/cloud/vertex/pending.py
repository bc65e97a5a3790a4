"""Creates whose outcome is not known yet, remembered across runs so a retry never pays twice.

Before `vtrain submit` sends a create, it writes a record (parent, config hash, submit id) under
the state directory; a definite answer (the job, or a refusal) removes it. A record left behind
means the answer was lost (a 5xx after sending, a reset, a timeout, a killed process), so the job
may exist. The next submit of the same job (same parent and config hash) first lists jobs by
that submit id: a job found is the one the earlier submit created, and is returned instead of
creating a second one. Records are small JSON files written atomically; a state directory that
cannot be written only loses this protection, it never stops a submit.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

STATE_ENV = "VTRAIN_STATE_DIR"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """VTRAIN_STATE_DIR, else $XDG_STATE_HOME/vtrain, else ~/.local/state/vtrain."""
    env = os.environ if env is None else env
    if env.get(STATE_ENV):
        return Path(env[STATE_ENV]).expanduser()
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "vtrain"


@dataclass(frozen=True)
class PendingCreate:
    parent: str  # projects/P/locations/R
    config_hash: str
    submit_id: str
    display_name: str
    created: float  # time.time() when the create was sent

    @property
    def filename(self) -> str:
        return f"{self.config_hash}-{self.submit_id}.json"


def _folder(root: Path | None) -> Path:
    return (root or state_dir()) / "pending-creates"


def record(pending: PendingCreate, root: Path | None = None) -> bool:
    """Remember a create about to be sent; False if the state directory is unusable."""
    folder = _folder(root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".pending-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(asdict(pending), out)
        os.replace(tmp, folder / pending.filename)
    except OSError:
        return False
    return True


def forget(pending: PendingCreate, root: Path | None = None) -> None:
    """The create's outcome is known: drop its record."""
    with contextlib.suppress(OSError):
        (_folder(root) / pending.filename).unlink(missing_ok=True)


def find(parent: str, config_hash: str, root: Path | None = None) -> list[PendingCreate]:
    """Records of earlier creates of this job whose outcome is unknown, oldest first."""
    found = []
    try:
        paths = sorted(_folder(root).glob(f"{config_hash}-*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            pending = PendingCreate(**data)
        except (OSError, ValueError, TypeError):
            continue  # unreadable or not ours: ignore, never fail a submit over it
        if pending.parent == parent and pending.config_hash == config_hash:
            found.append(pending)
    return sorted(found, key=lambda p: p.created)


def new(parent: str, config_hash: str, submit_id: str, display_name: str) -> PendingCreate:
    return PendingCreate(parent, config_hash, submit_id, display_name, time.time())
