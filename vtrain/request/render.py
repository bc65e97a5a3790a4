"""CustomJob → text: the REST body as JSON or YAML, or a `gcloud ... --config` file.

Secrets (by env or argument name, by key format, by entropy: see :mod:`vtrain.request.redact`) are
replaced by ``<redacted>`` unless the caller asks otherwise, so rendered requests can be pasted
into CI logs.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from vtrain.request.build import TUNING_JOB, kind_of_body
from vtrain.request.redact import REDACTED, is_secret_name, redact

FORMATS = ("json", "yaml", "gcloud")
#: The first line of a tuning job rendered for gcloud (`vtrain diff --against` knows the file by it).
GCLOUD_TUNING_HEADER = "# HyperparameterTuningJob for `gcloud ai hp-tuning-jobs create --config`."
__all__ = ["FORMATS", "REDACTED", "gcloud_command", "is_secret_name", "redact", "render"]


def _as_dict(job: Any) -> dict[str, Any]:
    if isinstance(job, Mapping):
        return dict(job)
    from google.protobuf import json_format

    pb = getattr(job, "_pb", job)
    return json_format.MessageToDict(pb)


class _Dumper(yaml.SafeDumper):
    """Block-style YAML that keeps key order and writes long strings unfolded."""


def _dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000,
                     allow_unicode=True)


def gcloud_command(
    body: Mapping[str, Any], project: str | None, region: str, config_file: str = "job.yaml"
) -> list[str]:
    """The argv that submits a rendered `gcloud` config file (display name and labels are flags there)."""
    tuning = kind_of_body(body) == TUNING_JOB
    argv = ["gcloud", "ai", "hp-tuning-jobs" if tuning else "custom-jobs", "create"]
    if project:
        argv.append(f"--project={project}")
    argv += [f"--region={region}", f"--display-name={body['displayName']}"]
    labels = body.get("labels") or {}
    if labels:
        argv.append("--labels=" + ",".join(f"{k}={v}" for k, v in labels.items()))
    kms = (body.get("encryptionSpec") or {}).get("kmsKeyName")
    if kms:
        argv.append(f"--kms-key={kms}")
    argv.append(f"--config={config_file}")
    return argv


def render(
    job: Any,
    fmt: str = "json",
    *,
    show_secrets: bool = False,
    project: str | None = None,
    region: str = "us-central1",
) -> str:
    """Render a CustomJob (proto or REST dict) as `json`, `yaml` or `gcloud` text."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    body = _as_dict(job)
    if not show_secrets:
        body = redact(body)
    if fmt == "json":
        return json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    if fmt == "yaml":
        return _dump_yaml(body)
    argv = gcloud_command(body, project, region)
    command = "".join(f"#   {line}\n" for line in shlex.join(argv).splitlines())  # a name may hold line breaks
    if kind_of_body(body) == TUNING_JOB:  # the file holds the whole job; labels and the key go as flags
        header = GCLOUD_TUNING_HEADER + " Submit with:\n"
        config = {k: v for k, v in body.items() if k not in ("labels", "encryptionSpec")}
        return header + command + _dump_yaml(config)
    header = "# CustomJobSpec for `gcloud ai custom-jobs create --config`. Submit with:\n" + command
    return header + _dump_yaml(body["jobSpec"])
