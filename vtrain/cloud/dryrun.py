"""A submission's dry run: everything `vtrain submit` does but the upload and the API call.

    report = vtrain.dry_run("vtrain.yaml")          # what `vtrain submit --dry-run -o json` prints
    report["request"]["body"], report["packages"], report.get("modelUpload")

:func:`dry_run_plan` takes a plan (:func:`vtrain.cloud.submit.plan_submit`), builds the trainer sdist here and checks it
is the one planned (or scans a `trainer.build` image's files as the build does), and returns the report: the
request, the config hash, the packages, what submit adds or resolves, and the Model Registry upload a SUCCEEDED
job would make. :func:`dry_run_job` is the whole of `vtrain submit --dry-run` from a job file, preflight included
on request; :func:`dry_run` is the same for the SDK, as one report. No credentials are read unless preflight is
asked for.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtrain.cloud.submit import SubmitPlan, plan_submit
from vtrain.cloud.target import Where
from vtrain.cloud.vertex import SUBMIT_LABEL
from vtrain.errors import PackagingError

if TYPE_CHECKING:
    from vtrain.cloud.preflight import Report
    from vtrain.jobfile.config import JobConfig

#: The project a dry run's plan shows when nothing names one (submit itself needs a real one).
PLACEHOLDER_PROJECT = "your-project-id"


def dry_run_plan(plan: SubmitPlan, *, allow_credentials: bool = False, show_secrets: bool = False) -> dict[str, Any]:
    """Everything but the upload and the API call: build the trainer sdist locally and check it
    is the one planned. Returns the report `submit --dry-run -o json` prints."""
    from vtrain.trainer import packaging

    packages: list[dict[str, Any]] = [asdict(p) for p in plan.packages]
    trainer = plan.config.trainer
    extra: dict[str, Any] = {}
    if trainer.build is not None and trainer.package is not None:  # the image's files, checked as the build does
        from vtrain.cloud.images import body_images
        from vtrain.trainer.image.layers import scan_trainer

        scan = scan_trainer(trainer.package, allow_credentials=allow_credentials, skip=plan.config.job_files())
        if trainer.module:
            packaging.check_module(scan, trainer.module)
        extra["images"] = sorted(body_images(plan.body))
    elif trainer.package is not None:
        scan = packaging.check_contents(packaging.select_files(trainer.package, skip=plan.config.job_files()))
        # trainer.module and the pools' own `module`s: each must be in the package
        modules = dict.fromkeys(m for m in (trainer.module, *(p.module for p in plan.config.pools()
                                                              if p.container is None)) if m)
        for module in modules:
            packaging.check_module(scan, module)  # layout and syntax: what submit checks
        with tempfile.TemporaryDirectory(prefix=packaging.temp_prefix("dry-run")) as tmp:
            sdist = packaging.build_sdist(trainer.package, Path(tmp), allow_credentials=allow_credentials,
                                          skip=plan.config.job_files(), modules=modules)
            if not plan.packages[0].uri.endswith("/" + sdist.name):
                raise PackagingError(
                    f"built {sdist.name}, but planned {plan.packages[0].uri}: did the "
                    "trainer change while building? Run again"
                )
            packages[0]["size"] = sdist.stat().st_size
    report = {
        "request": plan.request(show_secrets=show_secrets),
        "configHash": plan.config_hash,
        "packages": packages,
        **extra,
        "addedAtSubmit": {"labels": [SUBMIT_LABEL]},
    }
    from vtrain.cloud.vertex.resources import filled_at_submit

    resolved = filled_at_submit(plan.config, plan.target.region, "trialJobSpec" if plan.is_tuning else "jobSpec")
    if resolved:
        report["resolvedAtSubmit"] = resolved
    if plan.config.model is not None and not plan.is_tuning:
        from vtrain.cloud.model_registry import upload_request

        report["modelUpload"] = upload_request(plan)
    return report


def dry_run_job(
    config: JobConfig | str | os.PathLike[str],
    *,
    overrides: Iterable[str] = (),
    where: Where | None = None,
    preflight: bool = False,
    allow_credentials: bool = False,
    show_secrets: bool = False,
    notice: Callable[[str], None] = lambda text: None,
) -> tuple[dict[str, Any], Report | None]:
    """`vtrain submit --dry-run` of a job file (or a loaded JobConfig): the report of :func:`dry_run_plan` and, with
    `preflight` and a project, the cloud side's checks (also under the report's ``preflight`` key; the caller
    decides whether a failed check is an error). With no project anywhere, the plan shows
    :data:`PLACEHOLDER_PROJECT`, preflight is skipped, and `notice` says so."""
    from vtrain.jobfile.config import JobConfig
    from vtrain.jobfile.load import load_config

    if not isinstance(config, JobConfig):
        config = load_config(config, overrides)
    where = where or Where()
    placeholder = where.project_for(config) is None
    if placeholder:
        where = replace(where, project=PLACEHOLDER_PROJECT)
        notice(f"no project set: the plan shows '{PLACEHOLDER_PROJECT}' (submit needs --project, `project:` in the job "
               "file, VTRAIN_PROJECT or gcloud's project); preflight skipped")
    plan = plan_submit(config, where=where)
    checks = None
    if preflight and not placeholder:
        from vtrain.cloud.preflight import run_preflight

        checks = run_preflight(plan.target, plan.config, body=plan.body)
    report = dry_run_plan(plan, allow_credentials=allow_credentials, show_secrets=show_secrets)
    if checks is not None:
        report["preflight"] = checks.to_dict()
    return report, checks


def dry_run(
    config: JobConfig | str | os.PathLike[str],
    *,
    overrides: Iterable[str] = (),
    project: str | None = None,
    region: str | None = None,
    api_endpoint: str | None = None,
    preflight: bool = False,
    allow_credentials: bool = False,
    show_secrets: bool = False,
) -> dict[str, Any]:
    """Everything :func:`vtrain.submit` would do but the upload and the API call, as the report
    `vtrain submit --dry-run -o json` prints: ``request`` (the exact REST call), ``configHash``, ``packages`` (the
    trainer's sdist built here and checked to be the planned one), ``modelUpload`` (the Model Registry upload a
    SUCCEEDED job with `model:` makes), and with `preflight` the cloud side's checks under ``preflight`` (``ok``
    false when one failed: nothing is raised for it). Raises what submit would for the job file or the trainer
    (ConfigError, PackagingError). ``notices`` lists what the report stands in for (no project anywhere)."""
    said: list[str] = []
    report, _ = dry_run_job(config, overrides=overrides, where=Where(project, region, api_endpoint),
                            preflight=preflight, allow_credentials=allow_credentials, show_secrets=show_secrets,
                            notice=said.append)
    if said:
        report["notices"] = said
    return report
