"""What a DiLoCo replica learns from its environment: the `diloco:` settings, who it is, where the syncer is.

Standard library only, so the job config, `vtrain local` and the runtime can all read it. The launcher
(Vertex AI, or `vtrain local`) says everything through environment variables:
  VTRAIN_DILOCO        the job file's `diloco:` block as JSON (spec.py writes it into every pool);
  CLUSTER_SPEC         workerpool0[0] is the syncer's host:port; workerpool1 (and workerpool2, a second
                       learner group) are the learners; `task` names this replica;
  VTRAIN_DILOCO_TOKEN  the shared secret every learner shows the syncer; without it, one derived from
                       CLOUD_ML_JOB_ID, so a learner of another job (or a stale replica) is turned away.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from vtrain.constants import DILOCO_COMPRESSIONS, DILOCO_ENV, DILOCO_TOKEN_ENV, DilocoKnobs
from vtrain.errors import DilocoError

SYNCER_POOL = "workerpool0"
LEARNER_POOLS = ("workerpool1", "workerpool2")


@dataclass(frozen=True)
class Settings(DilocoKnobs):
    """The `diloco:` knobs as the syncer and the learners use them (durations in seconds); the fields
    and defaults are :class:`vtrain.constants.DilocoKnobs`, shared with the job config."""

    @property
    def heartbeat(self) -> float:
        """Seconds between heartbeats: several per straggler_timeout, so one late packet is no verdict."""
        return max(0.05, min(2.0, self.straggler_timeout / 5))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Settings:
        try:
            raw = json.loads(text or "{}")
        except json.JSONDecodeError as err:
            raise DilocoError(f"{DILOCO_ENV} is not valid JSON ({err.msg} at char {err.pos})") from None
        if not isinstance(raw, dict):
            raise DilocoError(f"{DILOCO_ENV} must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise DilocoError(f"{DILOCO_ENV} has unknown keys {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        settings = cls(**{k: v for k, v in raw.items() if v is not None or k == "min_quorum"})
        settings.check()
        return settings

    def check(self) -> None:
        """The same limits `vtrain validate` enforces, for settings that did not come through it."""
        if self.compression not in DILOCO_COMPRESSIONS:
            raise DilocoError(f"compression {self.compression!r} is not one of {', '.join(DILOCO_COMPRESSIONS)}")
        if self.inner_steps < 1 or self.fragments < 1 or self.fragments > self.inner_steps:
            raise DilocoError(f"need 1 <= fragments ({self.fragments}) <= inner_steps ({self.inner_steps})")
        if self.inner_steps % self.fragments:
            raise DilocoError(f"inner_steps ({self.inner_steps}) must be a multiple of fragments ({self.fragments})")
        if self.min_quorum is not None and self.min_quorum < 1:
            raise DilocoError(f"min_quorum must be at least 1, got {self.min_quorum}")
        if min(self.grace, self.straggler_timeout, self.registration_timeout) < 0 or self.outer_lr <= 0:
            raise DilocoError("grace, straggler_timeout and registration_timeout must be >= 0 and outer_lr > 0")
        if not 0 <= self.outer_momentum < 1:
            raise DilocoError(f"outer_momentum must be in [0, 1), got {self.outer_momentum}")
        for name in ("overlap", "token_weighting"):
            if not isinstance(getattr(self, name), bool):
                raise DilocoError(f"{name} must be true or false, got {getattr(self, name)!r}")


def settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    return Settings.from_json(env.get(DILOCO_ENV, ""))


def _cluster_spec(env: Mapping[str, str]) -> dict[str, Any]:
    raw = env.get("CLUSTER_SPEC", "")
    if not raw:
        raise DilocoError("CLUSTER_SPEC is not set: a DiLoCo replica learns the syncer's address from it "
                          "(Vertex AI and `vtrain local` set it)")
    try:
        spec = json.loads(raw)
    except json.JSONDecodeError as err:
        raise DilocoError(f"CLUSTER_SPEC is not valid JSON ({err.msg})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("cluster"), dict):
        raise DilocoError("CLUSTER_SPEC must be a JSON object with a `cluster` object")
    return spec


def syncer_address(env: Mapping[str, str] | None = None) -> str:
    """host:port of the syncer: pool 0's only replica."""
    env = os.environ if env is None else env
    chief = _cluster_spec(env)["cluster"].get(SYNCER_POOL) or []
    if len(chief) != 1:
        raise DilocoError(f"CLUSTER_SPEC must list exactly one {SYNCER_POOL} replica (the syncer), got {len(chief)}")
    return str(chief[0])


def this_replica(env: Mapping[str, str] | None = None) -> str:
    """'workerpool1-0': the pool and index Vertex gave this replica, stable across its restarts."""
    env = os.environ if env is None else env
    task = _cluster_spec(env).get("task") or {}
    return f"{task.get('type', SYNCER_POOL)}-{int(task.get('index', 0))}"


def expected_learners(env: Mapping[str, str] | None = None) -> list[str]:
    """Every learner the job started: the replicas of pools 1 and 2."""
    env = os.environ if env is None else env
    cluster = _cluster_spec(env)["cluster"]
    return [f"{pool}-{i}" for pool in LEARNER_POOLS for i in range(len(cluster.get(pool) or []))]


def token(env: Mapping[str, str] | None = None) -> str:
    """The per-job shared token (never logged)."""
    env = os.environ if env is None else env
    secret = env.get(DILOCO_TOKEN_ENV, "")
    if secret:
        return secret
    job = env.get("CLOUD_ML_JOB_ID", "")
    if not job:
        raise DilocoError(f"neither {DILOCO_TOKEN_ENV} nor CLOUD_ML_JOB_ID is set: the learners and the syncer "
                          "need a shared per-job token")
    return hashlib.sha256(f"vtrain-diloco:{job}".encode()).hexdigest()


def bind_address(address: str) -> str:
    """Where the syncer listens: loopback stays loopback (`vtrain local`); otherwise every interface."""
    host, _, port = address.rpartition(":")
    return f"{host}:{port}" if host in ("127.0.0.1", "localhost", "[::1]") else f"[::]:{port}"
