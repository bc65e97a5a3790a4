"""What every rule module shares: limits, patterns, and the problem collector."""

from __future__ import annotations

import re

from vtrain import catalog
from vtrain.constants import (  # noqa: F401  # noqa: F401
    MAX_DISPLAY_NAME,
    MAX_ENV,
    MAX_LABELS,
    MAX_PACKAGE_URIS,
    PROJECT_PATTERN,
    REGION_PATTERN,
    STRATEGY_ENV,
    VTRAIN_LABELS,
)
from vtrain.errors import Problem
from vtrain.jobfile.model import JobConfig, PoolConfig
from vtrain.jobfile.yamlpos import PathKey, format_path

#: Labels (lower-case letters incl. international ones, digits, _ and -; limits in vtrain.constants):
#: https://cloud.google.com/resource-manager/docs/labels-overview.

_LABEL_KEY = re.compile(r"^[a-z\u0080-\U0010ffff][a-z0-9_\u0080-\U0010ffff-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_\u0080-\U0010ffff-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GCS_URI = re.compile(r"^gs://(?P<bucket>[^/]+)(?P<path>/.*)?$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
_SERVICE_ACCOUNT = re.compile(r"^[a-z0-9-]+@[a-z0-9.-]+\.gserviceaccount\.com$")
_NETWORK = re.compile(r"^projects/[^/]+/global/networks/[^/]+$")
_TENSORBOARD = re.compile(r"^projects/[^/]+/locations/[^/]+/tensorboards/[^/]+$")
_EXPERIMENT = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
_KMS_KEY = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
_REGION = re.compile(REGION_PATTERN)
_PROJECT = re.compile(PROJECT_PATTERN)
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class Rules:
    def __init__(self, config: JobConfig, target: str) -> None:
        self.config = config
        self.target = target
        self.problems: list[Problem] = []

    def add(self, path: PathKey, message: str, severity: str = "error", *, at: PathKey | None = None) -> None:
        """Report at `path`; `at` places it elsewhere when `path` is a key the user did not write."""
        positions = self.config.positions
        where = at if at is not None and path not in positions.values and path not in positions.keys else path
        pos = positions.of(where)
        self.problems.append(Problem(format_path(path), message, pos.file, pos.line, pos.column, severity))

    def warn(self, path: PathKey, message: str) -> None:
        self.add(path, message, "warning")


def pool_path(pool: PoolConfig, *rest: str) -> PathKey:
    if pool.role == "second_learners":
        return ("diloco", "second_learner_pool", *rest)
    return ("cluster", pool.role, *rest)


def with_suggestion(message: str, suggestion: str) -> str:
    """Append a did-you-mean, dropping the dangling ';' when there is none."""
    return f"{message};{suggestion}" if suggestion else message


def machine_families() -> str:
    families = dict.fromkeys(m.split("-", 1)[0] for m in catalog.ALL_MACHINE_TYPES)
    return ", ".join(f"{f}-*" if f != catalog.CLOUD_TPU.split("-")[0] else catalog.CLOUD_TPU for f in families)

