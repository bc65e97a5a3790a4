"""The one secret policy for what vtrain writes and cannot redact: a component, a compiled pipeline, an image.

`render` and every other output hide secrets as they print (:mod:`vtrain.request.redact`). An artifact
cannot: `render -o kfp`'s component, the pipeline `training_op` and `launcher_op` compile into, and the
launcher image (`package --launcher`, :func:`vtrain.pipelines.launcher_image`) must carry the job's values
themselves, and are read by whoever can read a pipeline run or pull an image. So each asks the same question
of the same request, :func:`secret_places`: where would the redaction of `render` hide something (a secret
name, a key's shape, a URL's password, a random-looking run in env, args or command)? Any answer refuses the
artifact (:func:`refuse_secrets`), naming the places and never the values, unless the caller opts in
(`--show-secrets` for render's output; `--allow-credentials`, ``allow_credentials=True`` for the others).
One verdict, whichever of them is asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vtrain.errors import UsageError
from vtrain.foreign import printable
from vtrain.request.redact import redact


def secret_places(body: Mapping[str, Any]) -> tuple[str, ...]:
    """Where `body` (a CustomJob's REST JSON) holds what `render` would print as ``<redacted>``: ``env NAME``,
    ``args[I]``, ``command[I]``, or the REST path of any other field; each once, in the body's order."""
    places: dict[str, None] = {}
    _compare(body, redact(body), (), places)
    return tuple(places)


def _compare(real: Any, shown: Any, path: tuple[str | int, ...], places: dict[str, None]) -> None:
    if isinstance(real, Mapping) and isinstance(shown, Mapping):
        if len(path) >= 2 and path[-2] == "env" and isinstance(real.get("name"), str):
            if real.get("value") != shown.get("value"):  # an env variable: by its name
                places[f"env {printable(real['name'])}"] = None
            return
        for key, value in real.items():
            _compare(value, shown.get(key), (*path, key), places)
    elif isinstance(real, list) and isinstance(shown, list) and len(real) == len(shown):
        for i, (value, other) in enumerate(zip(real, shown, strict=True)):
            _compare(value, other, (*path, i), places)
    elif real != shown:
        places[_place(path)] = None


def _place(path: tuple[str | int, ...]) -> str:
    """A place as a person finds it in the job file: an argument's index, else the REST path."""
    if len(path) >= 2 and path[-2] in ("args", "command") and isinstance(path[-1], int):
        return f"{path[-2]}[{path[-1]}]"
    return "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in path).lstrip(".")


def job_secret_places(body: Mapping[str, Any], text: str | None = None) -> tuple[str, ...]:
    """:func:`secret_places` of a job's request (`body`: its artifacts' names may stand in); when it has none, the
    lines of `text` (the job file, where an artifact carries it whole) that hold a secret's shape or name: a key
    in a comment, or under a key no request carries."""
    from vtrain.request.redact import redact_text

    places = secret_places(body)
    if places or text is None:
        return places
    return tuple(f"line {number}" for number, line in enumerate(text.splitlines(), start=1)
                 if redact_text(line, entropy=False) != line)


def refuse_secrets(places: Sequence[str], *, source: str, carrier: str, allow: str) -> None:
    """Refuse (UsageError) to write an artifact that would carry secrets in clear: one line naming `source`
    (the job file), the places (never a value), what `carrier` is, and how to opt in (`allow`)."""
    if not places:
        return
    shown = ", ".join(places[:8]) + (f" and {len(places) - 8} more" if len(places) > 8 else "")
    raise UsageError(f"{source}: the job has secret-looking values ({shown}), which {carrier} would carry in "
                     f"clear: {allow}, or have the trainer read them from Secret Manager")


__all__ = ["job_secret_places", "refuse_secrets", "secret_places"]
