"""`submit`'s image step for a `trainer.build` job: build each pool's image and push what the
registry lacks, before the job is created (:mod:`vtrain.trainer.image.build` does the work).

The request names each image by the tag planned from the files (``REPOSITORY:<content hash>``,
what `render` shows); the push must give that very tag, or the trainer changed while it was being
built, and no job is created. The manifest goes last, so a push that fails half-way leaves no
tag, and nothing refers to what it sent. Credentials: Google's (Application Default Credentials)
for Google's registries, none for a registry on this machine (plain HTTP, as Docker does).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtrain.errors import PackagingError

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig
    from vtrain.trainer.image.build import Pushed
    from vtrain.trainer.select import Scan


def body_images(body: Mapping[str, Any]) -> set[str]:
    """The images vtrain built that a CustomJob (or a tuning job's trials) runs: REPOSITORY:TAG."""
    from vtrain.request.build import trial_job_spec

    pools = trial_job_spec(body).get("workerPoolSpecs", [])
    return {str(p["containerSpec"]["imageUri"]) for p in pools if p and "containerSpec" in p
            and "/reductionserver" not in str(p["containerSpec"]["imageUri"])}


def push_images(config: JobConfig, planned: set[str], *, allow_credentials: bool = False,
                credentials: Any = None, on_image: Callable[[Pushed], None] | None = None,
                on_blob: Callable[[dict[str, object]], None] | None = None,
                selection: Scan | None = None) -> tuple[Pushed, ...]:
    """Build and push the job's images (`config` with the target region applied); each must be one of
    `planned`. `credentials`: a registry Credentials for every registry (tests), else the default;
    `on_blob` hears of each layer as it is sent (or found there), `on_image` of each image pushed;
    `selection`: the files `planned` was hashed from (:attr:`~vtrain.jobfile.artifacts.Artifacts.selection`),
    built from as they were read then."""
    from vtrain.jobfile.artifacts import image_specs
    from vtrain.trainer.image.auth import default_credentials
    from vtrain.trainer.image.build import build_and_push

    package = config.trainer.package
    assert package is not None
    creds = default_credentials if credentials is None else credentials
    pushed: list[Pushed] = []
    for spec in image_specs(config).values():
        result = build_and_push(spec, Path(package), credentials=creds, base_credentials=creds,
                                allow_credentials=allow_credentials, on_blob=on_blob, skip=config.job_files(),
                                scan=selection)
        name = result.image.split("@", 1)[0]
        if name not in planned:
            raise PackagingError(f"built {name}, but the request names {', '.join(sorted(planned))}: did the trainer "
                                 "change while building? Run again (no job was created)")
        pushed.append(result)
        if on_image is not None:
            on_image(result)
    return tuple(pushed)


def describe(pushed: Sequence[Pushed]) -> list[dict[str, Any]]:
    """What `submit -o json` and `package -o json` say of each image: name, digest, bytes sent, each blob."""
    return [{"image": p.image, "digest": p.digest, "sent": p.sent, "blobs": p.blobs} for p in pushed]


def blob_line(blob: Mapping[str, object]) -> str:
    """Progress, one layer at a time: `  trainer   uploaded   4,574 B  sha256:ace2059363d7`."""
    return f"  {blob['role']:<12} {blob['action']:<9} {int(blob['size']):>14,} B  {str(blob['digest'])[:19]}"  # type: ignore[call-overload]


def stderr_progress(blob: Mapping[str, object]) -> None:
    """`submit`'s progress: each layer's line on stderr as it is done (stdout stays the job, for -o json)."""
    print(blob_line(blob), file=sys.stderr, flush=True)


def summary(p: Pushed) -> str:
    """One line per image: what was sent, layer by layer."""
    roles: dict[str, list[str]] = {}
    for blob in p.blobs:
        roles.setdefault(str(blob["action"]), []).append(str(blob["role"]))
    parts = ", ".join(f"{action}: {' '.join(names)}" for action, names in roles.items())
    return f"image    {p.image}  (sent {p.sent:,} B; {parts})"
