"""A CustomJob request read back from text someone else wrote: the inverse of :mod:`.render`.

`vtrain local` runs any CustomJob, not only those a job file makes: what `render -o json|yaml`, `submit
--dry-run -o json`, ``gcloud ai custom-jobs describe --format=json`` or the API's ``customJobs.get`` give (a
REST body, ``jobSpec`` at the top), a ``CreateCustomJobRequest`` (the job under ``customJob``), or a gcloud
``--config`` file (`render -o gcloud`: the CustomJobSpec alone, ``workerPoolSpecs`` at the top). `vtrain diff
--against` reads the same files (:func:`shape`).

Read as hostile input: the file bounded (a regular file, the job file's size, values and nesting limits,
:mod:`vtrain.jobfile.yamlpos`), every key checked against the installed ``aiplatform_v1.CustomJob`` proto (an
unknown one named with its ``file:line`` and the nearest field), every value through ``json_format``'s strict
parser. The body that comes out is ``MessageToDict`` of that proto: the one spelling the runner reads
(camelCase, as the API answers), whatever the file used (the proto's own snake_case names are accepted too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from vtrain.errors import UsageError

#: How a file holds its request: what render, gcloud and the API write.
REST_BODY = "a REST body"
GCLOUD_CONFIG = "a gcloud --config file"
CREATE_REQUEST = "a CreateCustomJobRequest"
DRY_RUN = "a submit --dry-run plan"


@dataclass(frozen=True)
class ReadBack:
    """The request a file holds: `body` a CustomJob REST body (``jobSpec`` in it), `form` how the file held it,
    `keys` the top-level keys of a CustomJob the file holds (None: all; a gcloud config holds ``jobSpec``
    alone), `prefix` where the body sits in the file (for positions), `planned` a dry-run plan."""

    body: dict[str, Any]
    form: str
    keys: tuple[str, ...] | None = None
    prefix: tuple[str | int, ...] = ()
    planned: bool = False


def shape(data: Any) -> ReadBack | None:
    """Where a request sits in parsed data, without checking it; None when the data holds none (a job file)."""
    if not isinstance(data, Mapping):
        return None
    request = data.get("request")
    if isinstance(request, Mapping) and isinstance(request.get("body"), Mapping):  # submit --dry-run -o json
        inner = shape(request["body"])
        if inner is not None:
            return ReadBack(inner.body, DRY_RUN, inner.keys, ("request", "body", *inner.prefix), planned=True)
    if isinstance(data.get("workerPoolSpecs", data.get("worker_pool_specs")), list) and "jobSpec" not in data:
        return ReadBack({"jobSpec": dict(data)}, GCLOUD_CONFIG, ("jobSpec",))
    if isinstance(data.get("jobSpec"), Mapping) or isinstance(data.get("trialJobSpec"), Mapping):
        return ReadBack(dict(data), REST_BODY)
    wrapped = data.get("customJob", data.get("custom_job"))
    if isinstance(wrapped, Mapping) and isinstance(wrapped.get("jobSpec", wrapped.get("job_spec")), Mapping):
        key = "customJob" if "customJob" in data else "custom_job"
        return ReadBack(dict(wrapped), CREATE_REQUEST, None, (key,))
    if isinstance(data.get("job_spec"), Mapping):  # the proto's own field names
        return ReadBack({"jobSpec": data["job_spec"], **{k: v for k, v in data.items() if k != "job_spec"}},
                        REST_BODY)
    return None


def holds_request(path: str | Path) -> bool:
    """Whether `path` is a file whose text is a request (not a job file): read bounded, never raising."""
    from vtrain.jobfile.yamlpos import MAX_BYTES, load_plain
    from vtrain.userpaths import read_bounded

    try:
        text = read_bounded(path, MAX_BYTES).decode("utf-8")
        return shape(load_plain(text, str(path), what="a request")) is not None
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def read_request(path: str | Path, *, what: str = "the request") -> ReadBack:
    """The CustomJob request file `path` holds, checked against the API's proto (see the module).

    UsageError (exit 2), each with the file and, where known, the line: a file that cannot be read, is no
    UTF-8 YAML or JSON, holds no request (a job file is read by :func:`vtrain.load_config`), holds a
    HyperparameterTuningJob, or holds a field or value the API would refuse."""
    from vtrain.jobfile.yamlpos import MAX_BYTES, load_yaml
    from vtrain.userpaths import describe_oserror, read_bounded, shown

    file = shown(str(path))
    try:
        text = read_bounded(path, MAX_BYTES).decode("utf-8")  # a FIFO or /dev/zero is refused, not read
    except OSError as err:
        raise UsageError(f"{file}: cannot read {what} ({describe_oserror(err)})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{file}: {what} is not UTF-8 text") from None
    data, positions, problems = load_yaml(text, str(path), what="a request")
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise UsageError(str(errors[0]))
    found = shape(data)
    if found is None:
        raise UsageError(f"{file}: holds no CustomJob: neither `jobSpec` (a REST body, `render -o json`, `gcloud ai "
                         "custom-jobs describe --format=json`), `customJob` (a create request) nor `workerPoolSpecs` "
                         "(a gcloud --config file) at the top")
    if "trialJobSpec" in found.body:
        raise UsageError(f"{file}: holds a HyperparameterTuningJob; `vtrain local` runs a CustomJob (its trials "
                         "run from a job file with a `tuning:` block)")

    def at(path_in_body: tuple[str | int, ...]) -> str:
        # A gcloud config file is the jobSpec itself; other forms hold the body under their prefix.
        in_file = path_in_body[1:] if found.form == GCLOUD_CONFIG else (*found.prefix, *path_in_body)
        where = positions.of(in_file, key=True)
        return f"{file}:{where.line}" if where.line else file

    body = checked_custom_job(found.body, at)
    return ReadBack(body, found.form, found.keys, found.prefix, found.planned)


def checked_custom_job(body: Mapping[str, Any], at: Any = None) -> dict[str, Any]:
    """`body` as the API's CustomJob would take it, in the API's own spelling (``MessageToDict``); UsageError
    naming the first unknown field (with its nearest) or refused value. `at(path)` says where a key path is
    (a file and line), for the message."""
    from google.cloud.aiplatform_v1 import CustomJob
    from google.protobuf import json_format

    from vtrain.foreign import printable
    from vtrain.jobfile.yamlpos import format_path

    message = CustomJob()._pb
    bad = _unknown_field(body, message.DESCRIPTOR, ())
    if bad is not None:
        path, name, fields, kind = bad
        near = get_close_matches(name, fields, n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        where = at((*path, name)) + ": " if at is not None else ""
        shown_path = format_path((*path, name)) if path else printable(name)
        raise UsageError(f"{where}{shown_path}: {kind} has no field {printable(name)!r}{hint}")
    try:
        json_format.ParseDict(dict(body), message)
    except json_format.ParseError as err:
        where = at(()) + ": " if at is not None else ""
        raise UsageError(f"{where}not a CustomJob the API would take: {printable(str(err))}") from None
    out: dict[str, Any] = json_format.MessageToDict(message)
    if not out.get("jobSpec", {}).get("workerPoolSpecs"):
        where = at(("jobSpec",)) + ": " if at is not None else ""
        raise UsageError(f"{where}jobSpec.workerPoolSpecs: the job has no worker pool to run")
    return out


def _unknown_field(data: Any, descriptor: Any, path: tuple[str | int, ...]) -> tuple[Any, str, list[str], str] | None:
    """The first key of `data` (at `path`) that is no field of the message `descriptor` describes, walking
    nested messages and lists of them; (path, key, the message's field names, its name) or None."""
    if not isinstance(data, Mapping) or descriptor.full_name.startswith("google.protobuf."):
        return None  # a well-known type (Duration, Struct, ...) has its own JSON form: ParseDict checks it
    by_name = {}
    for field in descriptor.fields:
        by_name[field.json_name] = field
        by_name[field.name] = field
    for key, value in data.items():
        field = by_name.get(key) if isinstance(key, str) else None
        if field is None:
            names = [f.json_name for f in descriptor.fields]
            return path, str(key), names, descriptor.name
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            inner = (*path, key) if index is None else (*path, key, index)
            found = _unknown_field(item, field.message_type, inner)
            if found is not None:
                return found
    return None


__all__ = ["CREATE_REQUEST", "DRY_RUN", "GCLOUD_CONFIG", "REST_BODY", "ReadBack", "checked_custom_job",
           "holds_request", "read_request", "shape"]
