"""What every rule module shares: limits, patterns, and the problem collector."""

from __future__ import annotations

import re
from collections.abc import Callable

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
from vtrain.jobfile.config import JobConfig, PoolConfig
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


def check_label(r: Rules, where: PathKey, key: str, value: str, reserved: tuple[str, ...] = ()) -> None:
    """One label of a job or a model as Vertex takes it: key and value lower-case letters (international ones
    too), digits, _ and -, at most 63 characters, the key starting with a letter; each fix suggested only
    when it passes that rule (and is not one of vtrain's own `reserved` keys)."""
    if not _is_label_key(key):
        fixed = _label_fix(key)
        r.add(where, f"label key '{key}' must start with a lower-case letter and use only lower-case letters, "
                     "digits, _ and - (≤ 63 chars)" + try_fix(lambda k: _is_label_key(k) and k not in reserved,
                                                               fixed, f"x-{fixed}"[:63]))
    if not _is_label_value(value):
        r.add(where, f"label value '{value}' may use only lower-case letters, digits, _ and - (≤ 63 chars)"
                     + try_fix(_is_label_value, re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]))


def _is_label_value(value: str) -> bool:
    return bool(_LABEL_VALUE.match(value)) and value == value.lower()


def _is_label_key(key: str) -> bool:
    return bool(_LABEL_KEY.match(key)) and key == key.lower()


def _label_fix(text: str) -> str:
    """`text` in lower case, other characters as '-', at most 63 characters, starting with a letter."""
    fixed = re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]
    return fixed if fixed[:1].isalpha() else f"x{fixed}"[:63]


def checked_fix(valid: Callable[[str], bool], *candidates: str | None) -> str | None:
    """The first of `candidates` that the rule it fixes accepts (`valid`, the very check that refused the value),
    or None: a suggestion is checked before it is shown, since one that breaks its own rule sends the user round
    again."""
    return next((c for c in candidates if c is not None and valid(c)), None)


def try_fix(valid: Callable[[str], bool], *candidates: str | None) -> str:
    """"; try 'X'" for :func:`checked_fix`'s answer, or '' when no candidate passes the rule."""
    fix = checked_fix(valid, *candidates)
    return f"; try '{fix}'" if fix is not None else ""


def machine_families() -> str:
    families = dict.fromkeys(m.split("-", 1)[0] for m in catalog.ALL_MACHINE_TYPES)
    return ", ".join(f"{f}-*" if f != catalog.CLOUD_TPU.split("-")[0] else catalog.CLOUD_TPU for f in families)

