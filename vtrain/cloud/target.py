"""Where calls go: the Google Cloud project, the Vertex AI region and the API endpoint, resolved
once per command from one documented order and passed down as a :class:`Target`.

Project: the --project flag, then the job file's `project`, then VTRAIN_PROJECT, then
GOOGLE_CLOUD_PROJECT, then gcloud's configuration (`core/project`).
Region: the --region flag, then the job file's `region`, then VTRAIN_REGION, then
GOOGLE_CLOUD_REGION, then gcloud's configuration (`ai/region`), then us-central1.
Endpoint: --api-endpoint, then VTRAIN_API_ENDPOINT, else Vertex AI's regional endpoint.

gcloud's configuration is read from its files, as the Google auth libraries read the project
(`gcloud config get-value` costs ~1.2 s a call): CLOUDSDK_<SECTION>_<PROPERTY> variables, then
the active configuration (CLOUDSDK_ACTIVE_CONFIG_NAME, else the `active_config` file, else
`default`) under CLOUDSDK_CONFIG (default ~/.config/gcloud), then the installation's
`properties` file. Only a configuration file that exists but cannot be parsed sends vtrain to
the `gcloud` subprocess, as a last resort. Nothing is cached across runs.

`render` and `submit` resolve through the same :class:`Where`, so the gcloud command line that
`render -o gcloud` prints names the project and region `submit` would use.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vtrain.constants import DEFAULT_REGION, PROJECT_PATTERN, REGION_PATTERN
from vtrain.errors import BackendError

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig

ENDPOINT_ENV = "VTRAIN_API_ENDPOINT"
PROJECT_RE = re.compile(PROJECT_PATTERN)
REGION_RE = re.compile(REGION_PATTERN)

#: A gcloud property ("project", "ai/region") → its value, or None when unset.
GcloudLookup = Callable[[str], "str | None"]


# ---- gcloud's configuration, read from its files ------------------------------------------------
class _Unreadable(Exception):
    """A gcloud configuration file exists but could not be parsed."""


def _section_and_name(prop: str) -> tuple[str, str]:
    section, _, name = prop.rpartition("/")
    return section or "core", name


def _config_dir(env: Mapping[str, str]) -> Path:
    if env.get("CLOUDSDK_CONFIG"):
        return Path(env["CLOUDSDK_CONFIG"]).expanduser()
    if os.name == "nt" and env.get("APPDATA"):
        return Path(env["APPDATA"]) / "gcloud"
    return Path(env.get("HOME") or Path.home()) / ".config" / "gcloud"


def _active_configuration(directory: Path, env: Mapping[str, str]) -> str:
    name = (env.get("CLOUDSDK_ACTIVE_CONFIG_NAME") or "").strip()
    if name:
        return name
    try:
        return (directory / "active_config").read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


def _read_property(path: Path, section: str, name: str) -> str | None:
    """The property from an INI file; None when the file or the key is absent."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise _Unreadable(str(err)) from None
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as err:
        raise _Unreadable(str(err)) from None
    value = parser.get(section, name, fallback="").strip()
    return value or None


def _installation_properties() -> Path | None:
    """`<sdk root>/properties`, gcloud's installation-wide settings, from the gcloud on PATH."""
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        return None
    root = Path(os.path.realpath(gcloud)).parent.parent
    return root / "properties"


def read_gcloud_property(prop: str, env: Mapping[str, str] | None = None) -> str | None:
    """A gcloud property from the environment and gcloud's files, as gcloud resolves it;
    raises _Unreadable when a file that should hold it cannot be parsed."""
    env = os.environ if env is None else env
    section, name = _section_and_name(prop)
    value: str | None = (env.get(f"CLOUDSDK_{section.upper()}_{name.upper()}") or "").strip()
    if value:
        return value
    directory = _config_dir(env)
    configuration = _active_configuration(directory, env)
    value = _read_property(directory / "configurations" / f"config_{configuration}", section, name)
    if value is None:
        installation = _installation_properties()
        if installation is not None:
            value = _read_property(installation, section, name)
    return value


def _gcloud_subprocess(prop: str) -> str | None:
    """`gcloud config get-value PROP`: only when gcloud's files could not be read."""
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        return None
    try:
        done = subprocess.run(
            [gcloud, "config", "get-value", prop], capture_output=True, text=True, timeout=15, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = done.stdout.strip()
    return value if done.returncode == 0 and value and value != "(unset)" else None


def gcloud_config_value(prop: str) -> str | None:
    """gcloud's value of PROP (`project`, `ai/region`), or None when unset. Reads files; runs
    `gcloud config get-value` only when a configuration file exists but cannot be parsed."""
    try:
        value = read_gcloud_property(prop)
    except _Unreadable:
        return _gcloud_subprocess(prop)
    return None if value in (None, "(unset)") else value


# ---- resolution ---------------------------------------------------------------------------------
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
    required: bool = True,
) -> str | None:
    """The project to use; BackendError naming every place it can be set when none is (or None
    when not `required`: `render` prints a request without one)."""
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
        if not required:
            return None
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
        raise BackendError(f"region '{value}' (from {source}) is not a Vertex AI region such as {DEFAULT_REGION}")
    return value


def resolve_endpoint(flag: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """--api-endpoint, then VTRAIN_API_ENDPOINT; None for Vertex AI's regional endpoint."""
    env = os.environ if env is None else env
    value = (flag or env.get(ENDPOINT_ENV) or "").strip().rstrip("/")
    if not value:
        return None
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme not in ("", "http", "https") or any(c.isspace() for c in value):
        raise BackendError(
            f"API endpoint '{value}' must be HOST[:PORT], https://HOST[:PORT] or, for an emulator, "
            "http://127.0.0.1:PORT"
        )
    return value


def job_location(job: str | None) -> tuple[str, str] | None:
    """(project, region) of a full `projects/P/locations/R/<collection>/ID` name, else None."""
    parts = (job or "").strip().split("/")
    if len(parts) == 6 and parts[0] == "projects" and parts[2] == "locations" and parts[4].endswith("Jobs"):
        return parts[1], parts[3]
    return None


@dataclass(frozen=True)
class Target:
    """The project, region and API endpoint every call of one command goes to."""

    project: str
    region: str
    api_endpoint: str | None = None  # None: https://{region}-aiplatform.googleapis.com

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    @property
    def endpoint(self) -> str:
        endpoint = self.api_endpoint or f"{self.region}-aiplatform.googleapis.com"
        return endpoint if "://" in endpoint else f"https://{endpoint}"

    @property
    def local(self) -> bool:
        """An http:// endpoint is an emulator: REST without credentials."""
        return (self.api_endpoint or "").startswith("http://")


@dataclass(frozen=True)
class Where:
    """What the caller said about where calls go (flags), and where else to look (`env`, the
    gcloud lookup; both injectable so tests never read the developer's setup). One value passed
    from the command line to every SDK function, resolved by :meth:`resolve`."""

    project: str | None = None
    region: str | None = None
    api_endpoint: str | None = None
    env: Mapping[str, str] | None = field(default=None, compare=False)
    gcloud: GcloudLookup | None = field(default=gcloud_config_value, compare=False)

    def resolve(self, *, config: JobConfig | None = None, job: str | None = None) -> Target:
        """Flags, then the job file (`config`), then the environment, then gcloud; a full job
        resource name (`job`) fixes project and region itself, and a flag that disagrees is an error."""
        project, region = self.project, self.region
        located = job_location(job)
        if located is not None:
            for flag, value, what in ((project, located[0], "project"), (region, located[1], "region")):
                # Vertex names a job's project by number, whatever the request named (ID or number): a
                # number against an ID cannot be compared here, and the name's own project is used.
                if what == "project" and flag and flag.strip().isdigit() != value.isdigit():
                    continue
                if flag and flag.strip() != value:
                    raise BackendError(f"job {(job or '').strip()} is in {what} {value}, not {flag} (from --{what})")
            project, region = located
        return Target(
            resolve_project(project, config.project if config else None, env=self.env, gcloud=self.gcloud) or "",
            self.region_for(config, region),
            resolve_endpoint(self.api_endpoint, self.env),
        )

    def region_for(self, config: JobConfig | None, flag: str | None = None) -> str:
        """The region alone: what `render` needs to pick regional images."""
        flag = self.region if flag is None else flag
        return resolve_region(flag, config.written_region() if config else None, env=self.env, gcloud=self.gcloud)

    def project_for(self, config: JobConfig | None) -> str | None:
        """The project if anything names one, else None: `render` prints a request without it."""
        return resolve_project(
            self.project, config.project if config else None, env=self.env, gcloud=self.gcloud, required=False
        )
