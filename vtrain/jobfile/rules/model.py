"""`model:`: what Model Registry would refuse, found before the job runs (an upload refused after hours of
training loses nothing but is late): the serving image, the parent model's region, labels, aliases, routes."""

from __future__ import annotations

import re

from vtrain.constants import MAX_DISPLAY_NAME, MAX_LABELS
from vtrain.jobfile import serving
from vtrain.jobfile.config import JobConfig, ModelConfig
from vtrain.jobfile.nodes import did_you_mean
from vtrain.jobfile.rules.base import Rules, check_label, try_fix, with_suggestion

#: Labels vtrain puts on every model version it uploads (the upload's idempotency keys).
MODEL_JOB_LABEL = "vtrain-job-id"
MODEL_HASH_LABEL = "vtrain-config-hash"
MODEL_LABELS = (MODEL_JOB_LABEL, MODEL_HASH_LABEL)
#: Model.version_aliases (aiplatform_v1 Model): "[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]".
_ALIAS = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]$")
_PARENT = re.compile(r"^projects/([^/]+)/locations/([^/]+)/models/([^/@]+)$")
_MODEL_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
#: ModelContainerSpec.predict_route/health_route: an HTTP path (RFC 3986's path characters) on the container.
_ROUTE = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$")


def training_tf_version(config: JobConfig) -> str | None:
    """The TensorFlow version the chief trains with (2-NN), when a prebuilt image names it; None otherwise."""
    trainer = config.trainer
    if trainer.container is not None or config.chief.container is not None:
        return None
    return serving.training_tf_version(config.chief.image or trainer.image)


def check_model(r: Rules, config: JobConfig) -> None:
    model = config.model
    if model is None:
        return
    if config.tuning is not None:
        r.add(("model",), "model: registers one job's model, and a tuning: study's trials each write their own: "
                          "remove one of the two blocks (register the best trial's with a job file of its own)")
    if not config.base_output_dir:
        r.add(("model",), "the model to register is AIP_MODEL_DIR, which Vertex sets only under base_output_dir: set "
                          "base_output_dir: gs://BUCKET/PATH", at=("name",))
    if not model.display_name.strip() or len(model.display_name) > MAX_DISPLAY_NAME:
        r.add(("model", "display_name"), f"a model's display name is 1 to {MAX_DISPLAY_NAME} characters, got "
                                         f"{len(model.display_name)}", at=("model",))
    _serving_image(r, config, model)
    _parent(r, config, model)
    _labels(r, model)
    seen: set[str] = set()
    for i, alias in enumerate(model.version_aliases):
        where = ("model", "version_aliases", i)
        if not _ALIAS.match(alias):
            r.add(where, f"version alias '{alias}' must match [a-z][a-zA-Z0-9-]{{0,126}}[a-z0-9] (2 to 128 "
                         "characters, starting with a lower-case letter, no '_' or '.')"
                         + try_fix(_is_alias, *_alias_fixes(alias)))
        elif alias in seen:
            r.add(where, f"version alias '{alias}' is listed twice; remove one (an alias names one version)")
        seen.add(alias)
    for key, route in (("predict", model.predict_route), ("health", model.health_route)):
        if route is not None and not _is_route(route):
            r.add(("model", "routes", key), f"a route is an HTTP path on the serving container, starting with '/' "
                                            f"(no scheme or host, query, spaces or control characters), got "
                                            f"'{route}'" + try_fix(_is_route, _route_fix(route)))


def _is_alias(alias: str) -> bool:
    return bool(_ALIAS.match(alias))


def _alias_fixes(alias: str) -> list[str]:
    """What an alias may have meant: its first letter in lower case, other characters as '-' and a leading 'v'
    where it starts with no lower-case letter; then all of it in lower case; then with a digit added (one letter
    is too short)."""
    def fix(text: str) -> str:
        fixed = re.sub(r"[^a-zA-Z0-9-]+", "-", text).strip("-")
        return (fixed if fixed[:1].isascii() and fixed[:1].islower() else f"v{fixed}")[:128].rstrip("-")

    lowered = fix(alias.lower())
    return [fix(alias[:1].lower() + alias[1:]), lowered, f"{lowered[:127].rstrip('-')}1"]


def _is_route(route: str) -> bool:
    return bool(_ROUTE.match(route)) and "://" not in route


def _route_fix(route: str) -> str:
    """The path a route meant: a URL's own path, else the text with one leading '/'."""
    from urllib.parse import urlsplit

    if "://" in route:
        try:
            path = urlsplit(route.strip()).path
        except ValueError:
            return ""
        return f"/{path.lstrip('/')}"
    return f"/{route.strip().lstrip('/')}"


def _serving_image(r: Rules, config: JobConfig, model: ModelConfig) -> None:
    image = model.serving_image
    where = ("model", "serving_image")
    if image is None:
        version = training_tf_version(config)
        if version is None:
            r.add(("model",), "the trainer runs no prebuilt TensorFlow image, so vtrain cannot pick a serving image: "
                              "set model.serving_image (tf2-cpu.2-15, tf2-gpu.2-15 or an image URI)")
        elif serving.maybe_published(version):
            r.warn(("model",), f"the job trains with TensorFlow {version.replace('-', '.')}: vtrain serves the model "
                               f"with tf2-cpu.{version}, after the newest prediction image its list has "
                               f"({serving.PREDICTION_TF[-1].replace('-', '.')}){serving.PREDICTION_SOURCE.doubt()}; "
                               "if the upload is refused, set model.serving_image")
        elif version not in serving.PREDICTION_TF:
            newest = serving.PREDICTION_TF[-1]
            r.add(("model",), f"the job trains with TensorFlow {version.replace('-', '.')}, which has no prebuilt "
                              f"prediction image (Vertex publishes tf2-cpu/tf2-gpu up to {newest.replace('-', '.')}): "
                              f"set model.serving_image to tf2-cpu.{newest} (check the SavedModel loads there) or an "
                              "image URI")
        return
    if "/" in image:  # a URI: a prebuilt prediction URI must name a version that exists
        found = serving.PREDICTION_URI_RE.match(image)
        if found is None and "/vertex-ai/prediction/tf2-" in image:
            r.add(where, f"'{image}' looks like a prebuilt prediction image but is not one: "
                         "{us,europe,asia}-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-NN:latest")
        elif found is not None and serving.maybe_published(found["version"]):
            r.warn(where, f"TensorFlow {found['version'].replace('-', '.')} is after the newest prediction image "
                          f"vtrain lists ({serving.PREDICTION_TF[-1]}){serving.PREDICTION_SOURCE.doubt()}")
        elif found is not None and found["version"] not in serving.PREDICTION_TF:
            r.add(where, f"there is no prebuilt prediction image for TensorFlow {found['version'].replace('-', '.')}; "
                         f"Vertex publishes {serving.PREDICTION_TF[0]} to {serving.PREDICTION_TF[-1]}")
        return
    alias = serving.SERVING_ALIAS_RE.match(image)
    if alias is not None and serving.maybe_published(alias["version"]):
        r.warn(where, f"'{image}' is after the newest prediction image vtrain lists (tf2-{alias['family']}."
                      f"{serving.PREDICTION_TF[-1]}){serving.PREDICTION_SOURCE.doubt()}")
    elif alias is None or alias["version"] not in serving.PREDICTION_TF:
        if alias is not None:  # a version with no image: the newest there is, not the nearest spelling
            hint = f" did you mean 'tf2-{alias['family']}.{serving.PREDICTION_TF[-1]}' (the newest)?"
        else:
            hint = did_you_mean(image, serving.serving_aliases())
        r.add(where, with_suggestion(f"'{image}' is not a prebuilt prediction image: use tf2-cpu.2-NN or "
                                     f"tf2-gpu.2-NN ({serving.PREDICTION_TF[0]} to {serving.PREDICTION_TF[-1]})"
                                     " or an image URI", hint))


def _parent(r: Rules, config: JobConfig, model: ModelConfig) -> None:
    parent = model.parent
    if parent is None:
        return
    where = ("model", "parent")
    found = _PARENT.match(parent)
    if found is not None:
        if found.group(2) != config.region:
            r.add(where, f"the parent model is in {found.group(2)}, the job in {config.region}: a model version "
                         f"is uploaded in the job's region; use a model in {config.region} or set region: "
                         f"{found.group(2)}")
        if config.project and found.group(1) != config.project and not found.group(1).isdigit():
            r.add(where, f"the parent model is in project {found.group(1)}, the job in {config.project}")
    elif "/" in parent or not _MODEL_ID.match(parent):
        r.add(where, f"'{parent}' is neither a model ID nor projects/PROJECT/locations/{config.region}/models/ID")


def _labels(r: Rules, model: ModelConfig) -> None:
    room = MAX_LABELS - len(MODEL_LABELS)
    if len(model.labels) > room:
        r.add(("model", "labels"), f"at most {room} labels (Vertex allows {MAX_LABELS}; vtrain adds "
                                   f"{', '.join(MODEL_LABELS)}), got {len(model.labels)}")
    for key, value in model.labels.items():
        where = ("model", "labels", key)
        if key in MODEL_LABELS:
            r.add(where, f"label '{key}' is set by vtrain itself (it finds the version a job made); use another key")
        check_label(r, where, key, value, MODEL_LABELS)
