"""Options shared by several commands, so their names and help never drift apart."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

import click


def output_option(*choices: str, default: str | None = None) -> Callable[[Any], Any]:
    """`-o/--output FORMAT`: every command that prints data offers `json` for CI."""
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(list(choices)),
        default=default or choices[0],
        show_default=True,
        help="Output format.",
    )


def echo_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


project_option = click.option(
    "--project",
    help="Google Cloud project. Precedence: this flag, then the job file's `project`, "
    "then VTRAIN_PROJECT, then GOOGLE_CLOUD_PROJECT (then `gcloud config` for commands that call Vertex AI).",
)

region_option = click.option(
    "--region",
    help="Vertex AI region. Precedence: this flag, then the job file's `region`, then VTRAIN_REGION, "
    "then GOOGLE_CLOUD_REGION, then `gcloud config get-value ai/region`, then us-central1.",
)

api_endpoint_option = click.option(
    "--api-endpoint",
    metavar="URL",
    help="Send Vertex AI calls here instead of REGION-aiplatform.googleapis.com (a private endpoint, or "
    "http://127.0.0.1:PORT for `vtrain emulator`: plain http means REST without credentials). "
    "Default: VTRAIN_API_ENDPOINT.",
)

def where_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--project, --region and --api-endpoint as one group: where the command's calls go. The command
    receives them as one value, ``where`` (:class:`vtrain.cloud.target.Where`), resolved by the same
    precedence everywhere (each option's help states it)."""

    @functools.wraps(fn)
    def with_where(*args: Any, project: str | None = None, region: str | None = None,
                   api_endpoint: str | None = None, **kwargs: Any) -> Any:
        from vtrain.cloud.target import Where

        return fn(*args, where=Where(project, region, api_endpoint), **kwargs)

    return project_option(region_option(api_endpoint_option(with_where)))


set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY.PATH=VALUE",
    help="Override a key of the job file (repeatable; VALUE is parsed as YAML, null removes the key). "
    "Precedence: --set beats the job file; later --set beats earlier ones.",
)


class UserPath(click.Path):
    """click.Path that first refuses values no filesystem call can take, as a usage error (exit 2).

    A NUL byte makes click's own stat raise ``ValueError`` (a traceback) and an over-long name
    ``ENAMETOOLONG``; `utf8=True` also refuses names TensorFlow and JSON cannot carry as text.
    """

    def __init__(self, *, utf8: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.utf8 = utf8

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from vtrain.userpaths import path_problem, shown

        text = os.fsdecode(value) if isinstance(value, bytes) else str(value)
        bad = path_problem(text, utf8=self.utf8)
        if bad:
            self.fail(f"'{shown(text)}' {bad}", param, ctx)
        return super().convert(value, param, ctx)


def duration_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A click callback for DURATION options (90s, 30m, 2h, 1h30m), in seconds; usage error if bad."""
    if value is None:
        return None
    from vtrain.jobfile.nodes import parse_duration

    seconds = parse_duration(value)
    if seconds is None or seconds <= 0:
        raise click.BadParameter(f"expected a duration like 90s, 10m or 2h, got {value!r}")
    return float(seconds)


def _label_callback(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """KEY=VALUE → the filter term labels.KEY="VALUE"; a malformed one is a usage error."""
    import re

    terms = []
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key) or not re.fullmatch(r"[a-z0-9_-]{0,63}", text):
            raise click.BadParameter(
                f"{value!r} is not KEY=VALUE with a label key (lower-case letter, then a-z 0-9 _ -) and value"
            )
        terms.append(f'labels.{key}="{text}"')
    return tuple(terms)


label_filter_option = click.option(
    "--label",
    "labels",
    metavar="KEY=VALUE",
    multiple=True,
    callback=_label_callback,
    help="Only jobs with this label (repeatable; ANDed), e.g. --label vtrain-submit-id=ID.",
)


def watch_options(fn: Any) -> Any:
    """--plain and --progress-every, as `vtrain local` has them."""
    fn = click.option("--progress-every", callback=duration_callback, default="30s", show_default=True,
                      metavar="DURATION", help="Plain output: at most one progress line this often, when "
                      "something changed.")(fn)  # fmt: skip
    return click.option("--plain", is_flag=True, help="Plain lines instead of the live view on a terminal (as when "
                        "not a terminal or in CI).")(fn)  # fmt: skip


# `vtrain local` and `vtrain replay`: the shape of a rehearsal here.
max_replicas_option = click.option(
    "--max-replicas", type=click.IntRange(min=1), help="Shrink the cluster to at most N processes, keeping every role "
    "(chief, >= 1 worker, ps, evaluator).")
startup_timeout_option = click.option(
    "--startup-timeout", callback=duration_callback, default="120s", show_default=True, metavar="DURATION",
    help="Fail when a replica's TensorFlow server is not up this long after a peer's.")
