"""`vtrain diff`: what would change, field by field, between the request a job file makes now and
an earlier one (the plan step of CI, as `terraform plan` is for infrastructure).

The earlier request is a saved render (`vtrain render -o json|yaml|gcloud`, or `submit --dry-run
-o json`), a submitted job (by ID or resource name), or the newest job submitted from the same
file (same display name, labelled by vtrain). Paths read like ``jobSpec.workerPoolSpecs[1].replicaCount``;
list entries that carry a `name` (env variables) are matched by it: ``env[name=LR]``. A trainer
whose code changed shows as its package URI changing: the file name carries the content hash (or,
with `trainer.build`, as its image's tag changing: the tag is the hash of what goes into the image).

Fields the server adds (name, state, times, error) and the labels that differ on every submission
(vtrain-submit-id, vtrain-config-hash, itself a hash of the rest) are not compared. Changes are
found on the real values and shown through `render`'s redaction (:mod:`vtrain.request.redact`):
a changed secret is reported as "secret value changed", never with its value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vtrain.errors import UsageError
from vtrain.request.render import REDACTED

#: CustomJob fields only the server sets: never part of a request.
OUTPUT_ONLY = ("name", "state", "createTime", "startTime", "endTime", "updateTime", "error", "webAccessUris",
               "satisfiesPzs", "satisfiesPzi")  # fmt: skip
#: Labels that differ between two submissions of the very same request.
VOLATILE_LABELS = ("vtrain-submit-id", "vtrain-config-hash")
VERSION_LABEL = "vtrain-version"
_HASHED_PACKAGE = re.compile(r"^(?P<stem>.*?)(?P<hash>[0-9a-f]{8,64})(?P<ext>\.tar\.gz|\.zip|\.whl)$")
#: An image `trainer.build` makes: REPOSITORY:TAG, the tag a hash of what goes into it.
_HASHED_IMAGE = re.compile(r"^(?P<repository>[^@\s]+/[^@:\s]+):(?P<tag>[0-9a-f]{12,64})$")


@dataclass(frozen=True)
class Change:
    path: str
    op: str  # added, removed, changed
    old: Any = None
    new: Any = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {"path": self.path, "op": self.op, "old": self.old, "new": self.new}
        if self.note:
            out["note"] = self.note
        return out

    def __str__(self) -> str:
        note = f"  ({self.note})" if self.note else ""
        if self.op == "added":
            return f"+ {self.path}: {_show(self.new)}{note}"
        if self.op == "removed":
            return f"- {self.path}: {_show(self.old)}{note}"
        return f"~ {self.path}: {_show(self.old)} -> {_show(self.new)}{note}"


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class DiffResult:
    before: str  # what the request is compared with, in words
    after: str
    changes: list[Change] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.changes else 0

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before, "after": self.after, "changed": bool(self.changes),
                "changes": [c.to_dict() for c in self.changes]}  # fmt: skip


# ---- the comparison (pure) --------------------------------------------------------------------
class _Side:
    """One body as compared (`raw`) and as shown (`shown`: the same structure, secrets redacted)."""

    __slots__ = ("raw", "shown")

    def __init__(self, raw: Any, shown: Any) -> None:
        self.raw, self.shown = raw, shown

    def at(self, key: Any) -> _Side:
        shown = self.shown[key] if isinstance(self.shown, (Mapping, list)) else self.shown
        return _Side(self.raw[key], shown)


def _diff_entries(old: _Side, new: _Side, where: Callable[[Any], str]) -> list[Change]:
    """Entries removed, added or changed, old order first, then what only `new` has."""
    out: list[Change] = []
    for key in [*old.raw, *(k for k in new.raw if k not in old.raw)]:
        sub = where(key)
        if key not in new.raw:
            out.append(Change(sub, "removed", old=old.at(key).shown))
        elif key not in old.raw:
            out.append(Change(sub, "added", new=new.at(key).shown))
        else:
            out.extend(_diff(old.at(key), new.at(key), sub))
    return out


def _keyed(items: list[Any]) -> bool:
    """A list whose entries are mappings with distinct `name`s (env variables): match by name."""
    names = [i.get("name") for i in items if isinstance(i, Mapping)]
    return bool(items) and len(names) == len(items) and None not in names and len(set(names)) == len(names)


def _by_name(side: _Side) -> _Side:
    shown = side.shown if isinstance(side.shown, list) and len(side.shown) == len(side.raw) else side.raw
    return _Side({i["name"]: i for i in side.raw}, {i["name"]: s for i, s in zip(side.raw, shown, strict=True)})


def _diff(old: _Side, new: _Side, path: str) -> list[Change]:
    a, b = old.raw, new.raw
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return _diff_entries(old, new, lambda key: f"{path}.{key}" if path else str(key))
    if isinstance(a, list) and isinstance(b, list):
        if (_keyed(a) or not a) and (_keyed(b) or not b) and (a or b):
            return _diff_entries(_by_name(old), _by_name(new), lambda name: f"{path}[name={name}]")
        if len(a) == len(b):
            return [c for i in range(len(a)) for c in _diff(old.at(i), new.at(i), f"{path}[{i}]")]
    if a == b:
        return []
    note = _note(a, b) or ("secret value changed" if old.shown == new.shown else "")
    return [Change(path, "changed", old=old.shown, new=new.shown, note=note)]


def diff_values(old: Any, new: Any, path: str = "", *, shown: tuple[Any, Any] | None = None) -> list[Change]:
    """Every field-level difference between two REST bodies, in document order. With `shown` (the
    two bodies redacted), changes are found on the real values and shown as redacted: a changed
    secret is reported without its value."""
    so, sn = shown if shown is not None else (old, new)
    return _diff(_Side(old, so), _Side(new, sn), path)


def _note(old: Any, new: Any) -> str:
    if isinstance(old, str) and isinstance(new, str):
        a, b = _HASHED_PACKAGE.match(old), _HASHED_PACKAGE.match(new)
        if a and b and a["stem"] == b["stem"] and a["ext"] == b["ext"]:
            return "package content changed"
        c, d = _HASHED_IMAGE.match(old), _HASHED_IMAGE.match(new)
        if c and d and c["repository"] == d["repository"]:
            return "image content changed: its tag hashes the trainer, runtime and requirements"
    return ""


def comparable(body: Mapping[str, Any], *, keep_version: bool = True) -> dict[str, Any]:
    """The request part of a body: no server-set fields, no labels that change on every submission."""
    out = {k: v for k, v in body.items() if k not in OUTPUT_ONLY}
    drop = VOLATILE_LABELS if keep_version else (*VOLATILE_LABELS, VERSION_LABEL)
    labels = {k: v for k, v in (out.get("labels") or {}).items() if k not in drop}
    out.pop("labels", None)
    if labels:
        out["labels"] = labels
    return out


def compare(before: Mapping[str, Any], after: Mapping[str, Any], *, show_secrets: bool = False) -> list[Change]:
    """The changes from `before` (saved or submitted) to `after` (the request now), shown through the
    same redaction as `render` (names, shapes, entropy) unless `show_secrets`."""
    from vtrain.request.redact import redact

    keep_version = VERSION_LABEL in (before.get("labels") or {})
    old, new = comparable(before, keep_version=keep_version), comparable(after, keep_version=keep_version)
    if _redacted_anywhere(old):  # a render redacts secrets: compare like with like
        new = redact(new)
    if show_secrets:
        return diff_values(old, new)
    return diff_values(old, new, shown=(redact(old), redact(new)))


def _redacted_anywhere(body: Any) -> bool:
    if isinstance(body, Mapping):
        return any(_redacted_anywhere(v) for v in body.values())
    if isinstance(body, list):
        return any(_redacted_anywhere(v) for v in body)
    return bool(body == REDACTED)


# ---- saved renders ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Saved:
    """A saved request and how much of one it holds."""

    body: dict[str, Any]
    #: The top-level keys it holds, None for all: `render -o gcloud` writes a CustomJob's jobSpec
    #: alone, and a tuning job without its labels and key (those go as gcloud flags).
    keys: tuple[str, ...] | None = None
    #: Saved by `submit --dry-run -o json`: with the labels submit adds (vtrain-version, …).
    planned: bool = False

    def narrow(self, current: Mapping[str, Any]) -> dict[str, Any]:
        """`current` cut to what this saved request holds, so like is compared with like."""
        return dict(current) if self.keys is None else {k: v for k, v in current.items() if k in self.keys}


def load_saved(path: str | Path) -> Saved:
    """A saved request, CustomJob or tuning job: `render -o json|yaml|gcloud` and `submit --dry-run
    -o json` are accepted. UsageError when unusable."""
    from vtrain.jobfile.yamlpos import MAX_BYTES, load_plain
    from vtrain.request.build import TUNING_JOB, kind_of_body
    from vtrain.request.read import GCLOUD_CONFIG, shape
    from vtrain.request.render import GCLOUD_TUNING_HEADER
    from vtrain.request.tuning_job import TRIAL_SPEC
    from vtrain.userpaths import describe_oserror, read_bounded, shown

    file = Path(path)
    try:
        text = read_bounded(file, MAX_BYTES).decode("utf-8")  # a FIFO or /dev/zero is refused, not read
    except OSError as err:
        raise UsageError(f"--against {shown(str(file))}: cannot read it ({describe_oserror(err)})") from None
    except UnicodeDecodeError:
        raise UsageError(f"--against {shown(str(file))}: not UTF-8 text; save a render there") from None
    try:
        data = load_plain(text, str(file), what="a saved request")  # JSON is YAML too; the job file's limits
    except ValueError as err:
        raise UsageError(f"--against {shown(str(file))}: not a saved request ({shown(str(err))})") from None
    found = shape(data)  # where the request sits: submit --dry-run -o json, render -o json|yaml|gcloud
    if found is None:
        raise UsageError(
            f"--against {file}: not a saved request; save one with `vtrain render JOB.yaml > {file.name}`"
        )
    if found.form == GCLOUD_CONFIG:
        return Saved(found.body, found.keys)  # render -o gcloud of a CustomJob: the jobSpec alone
    data = found.body
    tuning = isinstance(data.get(TRIAL_SPEC), dict) and kind_of_body(data) == TUNING_JOB and not found.planned
    if tuning and text.lstrip().startswith(GCLOUD_TUNING_HEADER):  # -o gcloud: labels and key went as flags
        return Saved(data, tuple(k for k in data if k not in ("labels", "encryptionSpec")))
    return Saved(data, None, found.planned)


# ---- the two sides ----------------------------------------------------------------------------
def _display_filter(name: str) -> str:
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'display_name="{escaped}" AND labels.{VERSION_LABEL}:*'


def diff_job(
    job_file: str | Path,
    *,
    against: str | Path | None = None,
    job: str | None = None,
    last: bool = False,
    overrides: Iterable[str] = (),
    where: Any = None,
    show_secrets: bool = False,
) -> DiffResult:
    """Compare the request `job_file` makes now with a saved render (`against`), a submitted job
    (`job`: ID or resource name) or the newest job submitted from this file (`last`)."""
    from vtrain.cloud.target import Where

    where = where or Where()
    if sum((against is not None, job is not None, last)) != 1:
        raise UsageError("compare with exactly one of: --against FILE, a JOB_ID, --last")
    after = f"{job_file} (the request submit would send)"
    if against is not None:
        saved = load_saved(against)
        current = render_body(job_file, overrides, where)
        if saved.planned:
            from vtrain.cloud.submit import with_submit_labels

            current = with_submit_labels(current)
        changes = compare(saved.body, saved.narrow(current), show_secrets=show_secrets)
        return DiffResult(f"saved request {against}", after, changes)
    from google.protobuf import json_format

    from vtrain.cloud.submit import connect, plan_submit

    plan = plan_submit(job_file, overrides=overrides, where=where)
    backend = connect(plan.target)
    if last:
        found = backend.list(filter=_display_filter(plan.body["displayName"]), limit=1)
        if not found:
            raise UsageError(
                f"no job named '{plan.body['displayName']}' submitted by vtrain in {plan.target.parent}; "
                "submit one first, or compare with --against FILE"
            )
        handle = found[0]
    else:
        handle = backend.get(job or "")
    before = json_format.MessageToDict(handle.proto._pb)
    body = plan.body
    if plan.config.tensorboard or plan.config.experiment:  # the job carries resource names: look them up
        from vtrain.cloud.vertex.resources import find_linked

        body = find_linked(backend, plan.config.tensorboard, plan.config.experiment).apply(body)
    return DiffResult(f"job {handle.name}", after, compare(before, body, show_secrets=show_secrets))


def render_body(job_file: str | Path, overrides: Iterable[str], where: Any) -> dict[str, Any]:
    """The body `vtrain render -o json` prints for this file (same region resolution)."""
    from vtrain.jobfile.artifacts import plan_artifacts
    from vtrain.jobfile.load import load_config
    from vtrain.request.build import build_request

    config = load_config(job_file, overrides)
    region, project = where.region_for(config), where.project_for(config)
    return build_request(config, plan_artifacts(config, region=region), region=region, project=project).body
