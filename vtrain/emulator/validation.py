"""Request bodies → CustomJob protos, rejected the way Vertex AI rejects them.

Parsing is strict `json_format` into `google.cloud.aiplatform.v1.CustomJob`: an unknown
field, a wrong type or an unknown enum name is a 400 INVALID_ARGUMENT, as on the real
endpoint. The semantic checks below are the ones Vertex applies at create time that a
job builder can get wrong; they are deliberately not vtrain's own rules (those live in
`vtrain.jobfile.rules`), so a bug in the builder cannot hide behind a matching bug here.
"""

from __future__ import annotations

import re
from typing import Any

from google.cloud.aiplatform_v1.types import CustomJob
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor as FD

from vtrain.constants import MAX_DISPLAY_NAME, MAX_ENV, MAX_LABELS, MAX_PACKAGE_URIS
from vtrain.emulator import hardware
from vtrain.emulator.errors import ApiError, invalid_argument
from vtrain.emulator.wire import MAX_DEPTH, json_body

PROJECT_RE = re.compile(r"^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20})$")
LOCATION_RE = re.compile(r"^[a-z]+(?:-[a-z]+)+[0-9]+$")
JOB_ID_RE = re.compile(r"^[0-9]{1,20}$")
#: "Label keys and values can be no longer than 64 characters (Unicode codepoints), can only contain lowercase
#: letters, numeric characters, underscores and dashes. International characters are allowed." (v1 reference,
#: CustomJob.labels and Model.labels); keys start with a letter.
LABEL_KEY_RE = re.compile(r"^[a-z\u0080-\U0010ffff][a-z0-9_\u0080-\U0010ffff-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_\u0080-\U0010ffff-]{0,63}$")
MAX_POOLS = 4
OUTPUT_ONLY = (
    "name",
    "state",
    "create_time",
    "start_time",
    "end_time",
    "update_time",
    "error",
    "web_access_uris",
    "satisfies_pzs",
    "satisfies_pzi",
)

_UNKNOWN_RE = re.compile(r'has no field named "([^"]+)" at "([^"]+)"')

CustomJobPb = CustomJob.pb()


def check_parent(project: str, location: str) -> None:
    """Project ID (or number) and region formats; the endpoint/region match cannot be checked here."""
    if not PROJECT_RE.match(project):
        raise invalid_argument(
            f"Invalid resource field value in the request: project '{project}' is not a valid "
            "project ID (6-30 lowercase letters, digits or hyphens, starting with a letter) or number.",
            [("parent", "invalid project")],
        )
    if not LOCATION_RE.match(location):
        raise invalid_argument(
            f"Invalid resource field value in the request: location '{location}' is not a region "
            "such as 'us-central1'.",
            [("parent", "invalid location")],
        )


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _field_path(path: str, resource: str) -> str:
    """('CustomJob.jobSpec.workerPoolSpecs[0]', 'custom_job') -> 'custom_job.job_spec.worker_pool_specs[0]'."""
    parts = path.split(".")
    parts[0] = resource
    return ".".join(_snake(p) for p in parts)


def parse_strict(raw: bytes, job: Any, resource: str, output_only: tuple[str, ...]) -> Any:
    """Strict JSON → the proto `job`; what the real endpoint cannot parse is a 400 here too, an unknown
    field named by its path under `resource`. Output-only fields are ignored on input, as AIP-203 says."""
    doc = json_body(raw, type(job).DESCRIPTOR.name)
    try:
        json_format.ParseDict(doc, job, max_recursion_depth=MAX_DEPTH)
    except (json_format.ParseError, RecursionError, OverflowError, ValueError, TypeError) as err:
        text = str(err)
        unknown = _UNKNOWN_RE.search(text)
        if unknown:
            field, where = unknown.groups()
            path = _field_path(where, resource)
            raise invalid_argument(
                f"Invalid JSON payload received. Unknown name \"{field}\" at '{path}': Cannot find field.",
                [(path, f'Invalid JSON payload received. Unknown name "{field}"')],
            ) from err
        first = (text.splitlines() or [type(err).__name__])[0]
        raise invalid_argument(f"Invalid JSON payload received. {first[:300]}") from err
    for field in output_only:
        job.ClearField(field)
    return job


def parse_custom_job(raw: bytes) -> Any:
    """Strict JSON → CustomJob proto."""
    return parse_strict(raw, CustomJobPb(), "custom_job", OUTPUT_ONLY)


def _check_pool(i: int, pool: Any, problems: list[tuple[str, str]], machines: list[tuple[str, str]]) -> None:
    where = f"job_spec.worker_pool_specs[{i}]"
    if pool.ByteSize() == 0:
        if i == 0:
            problems.append((where, "The first worker pool (the chief) must be specified."))
        return
    if not pool.machine_spec.machine_type:
        problems.append((f"{where}.machine_spec.machine_type", "machine_type is required."))
    machines.extend(hardware.check_machine(where, pool.machine_spec, pool.disk_spec))
    if i == 0 and pool.replica_count != 1:
        problems.append(
            (
                f"{where}.replica_count",
                f"The replica count of the first worker pool (the chief) must "
                f"be 1, got {pool.replica_count}.",
            )
        )
    elif pool.replica_count < 1:
        problems.append((f"{where}.replica_count", "replica_count must be positive."))
    task = pool.WhichOneof("task")
    if task is None:
        problems.append((where, "One of container_spec or python_package_spec is required."))
    elif task == "container_spec":
        if not pool.container_spec.image_uri:
            problems.append((f"{where}.container_spec.image_uri", "image_uri is required."))
        if len(pool.container_spec.env) > MAX_ENV:
            problems.append((f"{where}.container_spec.env", f"At most {MAX_ENV} env entries."))
    else:
        spec = pool.python_package_spec
        if not spec.executor_image_uri:
            problems.append((f"{where}.python_package_spec.executor_image_uri", "is required."))
        if not spec.python_module:
            problems.append((f"{where}.python_package_spec.python_module", "is required."))
        if not 1 <= len(spec.package_uris) <= MAX_PACKAGE_URIS:
            problems.append(
                (
                    f"{where}.python_package_spec.package_uris",
                    f"1 to {MAX_PACKAGE_URIS} package URIs are required.",
                )
            )
        if len(spec.env) > MAX_ENV:
            problems.append((f"{where}.python_package_spec.env", f"At most {MAX_ENV} env entries."))


#: Messages whose integer fields may be negative (a tuning parameter's bounds); elsewhere in a job
#: request every integer is a count, a size or an index, and no duration is negative.
SIGNED_MESSAGES = frozenset({"IntegerValueSpec"})
_INT_TYPES = frozenset({FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_SINT32, FD.TYPE_SINT64, FD.TYPE_SFIXED32,
                        FD.TYPE_SFIXED64})


def negative_values(message: Any, path: str = "") -> list[tuple[str, str]]:
    """Every negative integer or Duration anywhere in `message` (a proto, walked once), as problems.

    The proto types allow them; Vertex refuses them (a negative scheduling.timeout, replica or
    accelerator count, disk size...). One walk covers every field, present and future."""
    problems: list[tuple[str, str]] = []
    for fd, value in message.ListFields():
        where = f"{path}.{fd.name}" if path else fd.name
        repeated = fd.is_repeated
        if fd.message_type is not None:
            if fd.message_type.GetOptions().map_entry:
                continue
            if fd.message_type.full_name == "google.protobuf.Duration":
                for item in value if repeated else [value]:
                    if item.seconds < 0 or item.nanos < 0:
                        problems.append((where, f"{where} must not be negative, got {item.ToJsonString()}."))
                continue
            items = list(enumerate(value)) if repeated else [(None, value)]
            for i, item in items:
                problems.extend(negative_values(item, where if i is None else f"{where}[{i}]"))
        elif fd.type in _INT_TYPES and message.DESCRIPTOR.name not in SIGNED_MESSAGES:
            for item in value if repeated else [value]:
                if item < 0:
                    problems.append((where, f"{where} must not be negative, got {item}."))
    return problems


def display_name_problems(name: str, where: str = "display_name") -> list[tuple[str, str]]:
    """A resource's display name: required, at most MAX_DISPLAY_NAME characters (CustomJob, Model)."""
    if not name:
        return [(where, "display_name is required.")]
    if len(name) > MAX_DISPLAY_NAME:
        return [(where, f"display_name is longer than {MAX_DISPLAY_NAME} characters.")]
    return []


def label_problems(labels: Any, where: str = "labels") -> list[tuple[str, str]]:
    """Labels as Vertex takes them on every resource (CustomJob, Model and its versions): at most
    MAX_LABELS, keys and values of lowercase letters, digits, '_' and '-' (keys start with a letter)."""
    problems: list[tuple[str, str]] = []
    if len(labels) > MAX_LABELS:
        problems.append((where, f"At most {MAX_LABELS} labels are allowed, got {len(labels)}."))
    for key, value in labels.items():
        if not LABEL_KEY_RE.match(key):
            problems.append((f"{where}.{_shown(key)}", "Label keys must start with a lowercase letter and hold "
                                                       "at most 63 lowercase letters, digits, '_' or '-'."))
        if not LABEL_VALUE_RE.match(value):
            problems.append((f"{where}.{_shown(key)}",
                             "Label values hold at most 63 lowercase letters, digits, '_' or '-'."))
    return problems


def _shown(text: str) -> str:
    """A key others wrote, fit for a message: control characters escaped, length capped."""
    from vtrain.foreign import printable

    return printable(text, limit=80)


def check_custom_job(job: Any) -> None:
    """Every create-time rule; the message names the first problem, details list them all."""
    problems: list[tuple[str, str]] = negative_values(job)
    machines: list[tuple[str, str]] = []  # hardware Vertex refuses: worded as Vertex words it (hardware.py)
    problems.extend(display_name_problems(job.display_name))
    pools = job.job_spec.worker_pool_specs
    if not pools:
        problems.append(("job_spec.worker_pool_specs", "At least one worker pool spec is required."))
    elif len(pools) > MAX_POOLS:
        problems.append(
            (
                "job_spec.worker_pool_specs",
                f"At most {MAX_POOLS} worker pool specs are allowed, got {len(pools)}.",
            )
        )
    else:
        for i, pool in enumerate(pools):
            _check_pool(i, pool, problems, machines)
    problems.extend(label_problems(job.labels))
    if machines:
        raise invalid_argument(machines[0][1], machines + problems)
    if problems:
        field, message = problems[0]
        raise invalid_argument(f"{field}: {message}", problems)


#: Model.version_aliases: "The format is [a-z][a-zA-Z0-9-]{0,126}[a-z0-9] to distinguish from version_id."
ALIAS_RE = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]$")
#: UploadModelRequest.model_id: "up to 63 characters, and valid characters are [a-z0-9_-]. The first
#: character cannot be a number or hyphen."
MODEL_ID_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,62}$")
#: Model.artifact_uri: a Cloud Storage directory (bucket names: 3-63 characters, up to 222 with dots).
GCS_DIR_RE = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](?:/[^\s]*)?$")


def check_model_upload(request: Any) -> None:
    """An UploadModelRequest's create-time rules, by the checks customJobs.create uses where the field is the same
    (display name, labels, negative values, a required image) plus the Model's own: the image is a well-formed
    reference, artifactUri a gs:// directory, each version alias well-formed and listed once, model_id
    well-formed. The message names the first problem, details list them all."""
    from vtrain.trainer.image.reference import reference_problem

    model = request.model
    problems = negative_values(model, "model")
    problems += display_name_problems(model.display_name, "model.display_name")
    problems += label_problems(model.labels, "model.labels")
    image = model.container_spec.image_uri
    if not image:
        problems.append(("model.container_spec.image_uri", "image_uri is required."))
    else:
        bad_image = reference_problem(image, what="image_uri")
        if bad_image:
            problems.append(("model.container_spec.image_uri", bad_image + "."))
    uri = model.artifact_uri
    if uri and (not GCS_DIR_RE.match(uri) or not uri.isprintable()):
        problems.append(("model.artifact_uri", f"artifact_uri must be a Cloud Storage directory gs://BUCKET/PATH, "
                                               f"got '{_shown(uri)}'."))
    seen: set[str] = set()
    for alias in model.version_aliases:
        if not ALIAS_RE.match(alias):
            problems.append(("model.version_aliases", f"Invalid version alias '{_shown(alias)}': it must match "
                                                      "[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]."))
        elif alias in seen:
            problems.append(("model.version_aliases", f"The version alias '{alias}' is listed twice."))
        seen.add(alias)
    if request.model_id and not MODEL_ID_RE.match(request.model_id):
        problems.append(("model_id", f"Invalid model_id '{_shown(request.model_id)}': up to 63 of [a-z0-9_-], not "
                                     "starting with a digit or '-'."))
    if problems:
        field, message = problems[0]
        raise invalid_argument(f"{field}: {message}", problems)


def check_job_name(project: str, location: str, job_id: str) -> None:
    check_parent(project, location)
    if not JOB_ID_RE.match(job_id):
        raise invalid_argument(
            f"Invalid resource field value in the request: '{job_id}' is not a CustomJob ID.",
            [("name", "invalid job id")],
        )


__all__ = ["ApiError", "check_custom_job", "check_job_name", "check_model_upload", "check_parent",
           "display_name_problems", "label_problems", "parse_custom_job"]
