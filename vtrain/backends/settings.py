"""Where the Google Cloud project and region come from, in one documented order.

Project: the --project flag, then the job file's `project`, then VTRAIN_PROJECT, then
GOOGLE_CLOUD_PROJECT, then `gcloud config get-value project` (only when gcloud is on PATH).
Region: the --region flag, then the job file's `region`, then VTRAIN_REGION, then
GOOGLE_CLOUD_REGION, then `gcloud config get-value ai/region`, then us-central1.
The environment and the gcloud lookup are parameters, so tests never read the developer's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping

from vtrain.errors import BackendError

DEFAULT_REGION = "us-central1"
PROJECT_RE = re.compile(r"^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20})$")
REGION_RE = re.compile(r"^[a-z]+(?:-[a-z]+)+[0-9]+$")

GcloudLookup = Callable[[str], "str | None"]


def gcloud_config_value(prop: str) -> str | None:
    """`gcloud config get-value PROP`, or None when gcloud is absent, slow, or has it unset."""
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        return None
    try:
        done = subprocess.run(
            [gcloud, "config", "get-value", prop],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = done.stdout.strip()
    return value if done.returncode == 0 and value and value != "(unset)" else None


def _first(*candidates: tuple[str | None, str]) -> tuple[str, str] | None:
    for value, source in candidates:
        if value and value.strip():
            return value.strip(), source
    return None


def resolve_project(
    flag: str | None = None,
    job_file: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    gcloud: GcloudLookup | None = gcloud_config_value,
) -> str:
    """The project to use; BackendError naming every place it can be set when none is."""
    env = os.environ if env is None else env
    found = _first(
        (flag, "--project"),
        (job_file, "the job file's `project`"),
        (env.get("VTRAIN_PROJECT"), "VTRAIN_PROJECT"),
        (env.get("GOOGLE_CLOUD_PROJECT"), "GOOGLE_CLOUD_PROJECT"),
    )
    if found is None and gcloud is not None:
        found = _first((gcloud("project"), "gcloud config"))
    if found is None:
        raise BackendError(
            "no Google Cloud project set: pass --project, set `project:` in the job file, "
            "set VTRAIN_PROJECT (or GOOGLE_CLOUD_PROJECT), or run `gcloud config set project ID`"
        )
    value, source = found
    if not PROJECT_RE.match(value):
        raise BackendError(
            f"project '{value}' (from {source}) is not a project ID (6-30 lowercase letters, "
            "digits or hyphens, starting with a letter) or a project number"
        )
    return value


def resolve_region(
    flag: str | None = None,
    job_file: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    gcloud: GcloudLookup | None = gcloud_config_value,
) -> str:
    """The region to use, us-central1 when nothing names one."""
    env = os.environ if env is None else env
    found = _first(
        (flag, "--region"),
        (job_file, "the job file's `region`"),
        (env.get("VTRAIN_REGION"), "VTRAIN_REGION"),
        (env.get("GOOGLE_CLOUD_REGION"), "GOOGLE_CLOUD_REGION"),
    )
    if found is None and gcloud is not None:
        found = _first((gcloud("ai/region"), "gcloud config ai/region"))
    value, source = found or (DEFAULT_REGION, "the default")
    if not REGION_RE.match(value):
        raise BackendError(
            f"region '{value}' (from {source}) is not a Vertex AI region such as {DEFAULT_REGION}"
        )
    return value
