"""The job file's JSON Schema (draft 2020-12), generated from :data:`vtrain.jobfile.schema.JOB_SCHEMA`.

Editors (any YAML language server) complete and check keys with it; `vtrain schema` prints it.
There is no second copy of the shape: the generator walks the schema's node types (`Obj`,
`Str`, `Int`, …), so a key added there appears here with its type, enum and aliases. What the
node types do not say, the description of each key and its default, lives in :data:`DOCS` and
:data:`DEFAULTS`, keyed by key path (`cluster.*.replicas` covers every pool); a test fails when
a key has no description, or a description names no key.

The JSON Schema accepts what the checker accepts where JSON Schema can say it (aliases, a
single string for a list, enum words in any case, `-` for `_`, durations like `1h30m`); rules
across keys (machine × accelerator, strategy × cluster) stay with `vtrain validate`.
"""

from __future__ import annotations

from typing import Any

from vtrain import catalog
from vtrain.constants import DEFAULT_REGION, MAX_ENV, MAX_LABELS
from vtrain.jobfile import schema
from vtrain.jobfile.yamlpos import PathKey

DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: The modeline `vtrain init` writes; yaml-language-server resolves a relative path from the job file.
SCHEMA_FILE = "vtrain.schema.json"
MODELINE = f"# yaml-language-server: $schema={SCHEMA_FILE}"

_POOL = (
    "Each replica of this pool runs on one machine; machine keys left out are inherited from the chief."
)
DOCS: dict[str, str] = {
    "version": "Version of the job-file format. Only 1 exists.",
    "name": "The job's display name on Vertex AI (at most 128 characters).",
    "project": "Google Cloud project. Precedence: --project, this key, VTRAIN_PROJECT, GOOGLE_CLOUD_PROJECT, "
    "`gcloud config`.",
    "region": "Vertex AI region the job runs in, e.g. europe-west4; it also picks the regional prebuilt images. "
    "Keep the staging bucket in this region.",
    "staging_bucket": "Where the trainer package is uploaded: gs://BUCKET/PREFIX in the job's region "
    "(a local directory for `vtrain local`).",
    "base_output_dir": "Base output directory (gs://…): AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR "
    "are model/, checkpoints/ and logs/ under it.",
    "service_account": "Service account the replicas run as (NAME@PROJECT.iam.gserviceaccount.com); you need "
    "iam.serviceAccounts.actAs on it.",
    "network": "Full name of a peered VPC network: projects/NUMBER/global/networks/NAME.",
    "reserved_ip_ranges": "Names of reserved IP ranges in `network` for the job's replicas.",
    "labels": f"Labels on the job (at most {MAX_LABELS}; keys and values lowercase, at most 63 characters). "
    "vtrain adds vtrain-version and vtrain-config-hash.",
    "tensorboard": "A Vertex AI TensorBoard instance "
    "(projects/P/locations/R/tensorboards/ID) to upload the logs to; needs service_account.",
    "enable_web_access": "Interactive shell access to the replicas while the job runs.",
    "enable_dashboard_access": "Access to a dashboard served by the replicas while the job runs.",
    "persistent_resource_id": "Run on this Vertex AI persistent resource instead of new machines.",
    "kms_key": "Customer-managed encryption key (projects/P/locations/R/keyRings/K/cryptoKeys/NAME).",
    "trainer": "What runs in each replica: a Python package (package or package_uris, plus module) or a container.",
    "trainer.package": "Directory of the trainer's Python package (with pyproject.toml), relative to this file; "
    "built into a content-hashed sdist and staged.",
    "trainer.package_uris": "Already-built packages (gs://…) to install instead of building `package`.",
    "trainer.container": "Run your own container image instead of a Python package.",
    "trainer.container.image_uri": "The container image, e.g. us-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG.",
    "trainer.container.command": "Entry point that replaces the image's own.",
    "trainer.module": "Python module to run with `python -m`, e.g. trainer.task.",
    "trainer.image": "Prebuilt TensorFlow image: tf.2-NN (vtrain picks tf-cpu/tf-gpu/tf-tpu per pool), "
    "tf-cpu.2-NN, tf-gpu.2-NN, tf-tpu.2-NN, or a full prebuilt image URI.",
    "trainer.args": "Command-line arguments of every replica.",
    "trainer.env": f"Environment variables of every replica (at most {MAX_ENV}); values are text.",
    "distribution_strategy": "TensorFlow strategy the replicas use; auto picks it from each replica's "
    "environment (TPU, TF_CONFIG workers, local GPUs).",
    "cluster": "The worker pools: chief (pool 0), workers (1), parameter_servers or reduction_server (2), "
    "evaluator (3).",
    "cluster.chief": "Pool 0: exactly one replica; its outcome is the job's. " + _POOL,
    "cluster.workers": "Pool 1: the other training workers. " + _POOL,
    "cluster.parameter_servers": "Pool 2: parameter servers for ParameterServerStrategy. " + _POOL,
    "cluster.reduction_server": "Pool 2: Vertex AI Reduction Server for GPU all-reduce; replicas: auto sizes it "
    "from the workers' bandwidth.",
    "cluster.evaluator": "Pool 3: a side-car evaluator outside the training cluster. " + _POOL,
    "cluster.*.replicas": "Number of replicas in this pool (0 leaves the pool out).",
    "cluster.*.machine_type": "Compute Engine machine type, e.g. n1-standard-8, a2-highgpu-1g, ct5lp-hightpu-4t.",
    "cluster.*.accelerator": "Accelerator type (NVIDIA_TESLA_T4 or an alias such as t4, a100, h100); "
    "implied by A2/A3/G2 machine types.",
    "cluster.*.accelerator_count": "Accelerators per replica; must be a legal count for the machine type.",
    "cluster.*.tpu_topology": "TPU slice topology for TPU VM machine types, e.g. 2x2.",
    "cluster.*.boot_disk": "Boot disk of each replica.",
    "cluster.*.boot_disk.type": "Boot disk type.",
    "cluster.*.boot_disk.size_gb": "Boot disk size in GB (100 to 64000).",
    "cluster.*.args": "Arguments for this pool's replicas (replace trainer.args).",
    "cluster.*.env": "Environment variables for this pool's replicas (added to trainer.env).",
    "scheduling": "How Vertex AI schedules and retries the job.",
    "scheduling.timeout": "Longest the job may run (90s, 30m, 24h, 7d, 1h30m or seconds).",
    "scheduling.restart_job_on_worker_restart": "Restart every replica when one restarts.",
    "scheduling.disable_retries": "Fail the job instead of retrying it after a replica fails repeatedly.",
    "scheduling.strategy": "standard (on-demand), spot (preemptible, cheaper) or flex_start (waits for capacity).",
    "scheduling.max_wait": "flex_start only: how long to wait for capacity before giving up.",
    "diloco": "distribution_strategy: diloco: learners train alone and exchange parameter changes with a CPU "
    "syncer every inner_steps steps (see the README's \"Training with DiLoCo\").",
    "diloco.inner_steps": "H: local steps each learner takes between exchanges.",
    "diloco.outer_lr": "Outer learning rate of the syncer's Nesterov step on the averaged parameter change.",
    "diloco.outer_momentum": "Outer Nesterov momentum in [0, 1); 0.6 settles within ~60 rounds, 0.9 needs hundreds.",
    "diloco.min_quorum": "Merge once this many learners have sent (default: every learner alive).",
    "diloco.grace": "After the quorum, wait at most this long for stragglers (also capped at a quarter of a round).",
    "diloco.straggler_timeout": "Silence (no heartbeat) after which a learner counts as hung and is left out.",
    "diloco.compression": "How parameter changes travel, both directions: none, bf16, int8 or int4.",
    "diloco.fragments": "More than 1: exchange a balanced part of the model every inner_steps/fragments steps.",
    "diloco.token_weighting": "Weight each learner's change by the examples it processed.",
    "diloco.registration_timeout": "How long the first merge waits for every learner to start.",
    "diloco.checkpoint_every": "Seconds between the syncer's checkpoints in AIP_CHECKPOINT_DIR/diloco/.",
    "diloco.max_staleness": "Rounds a learner's change may lag the global model and still be merged "
    "(weighted by 1/(1+staleness)).",
    "diloco.overlap": "Keep training while the syncer merges: the merged update is applied when it arrives "
    "(at the latest at that fragment's next exchange), keeping the steps taken meanwhile.",
    "diloco.second_learner_pool": "Optional second group of learners on another machine type (Vertex pool 2).",
    "tuning": "Makes the job a hyperparameter tuning study (a Vertex HyperparameterTuningJob): each trial runs "
    "this job with the parameters' values as --NAME=VALUE arguments.",
    "tuning.metric": "What the trainer reports (runtime.report_metric) and the study optimizes: "
    "{name, goal} or a list.",
    "tuning.parameters": "The parameters to tune, by flag name: {type: double|integer|discrete|categorical, min, max, "
    "scale: linear|log|reverse_log, values}.",
    "tuning.algorithm": "default (Vertex's Bayesian optimization; locally optuna's TPE when installed), "
    "random or grid.",
    "tuning.max_trials": "Trials to run in all.",
    "tuning.parallel_trials": "Trials running at once (at most max_trials).",
    "tuning.max_failed_trials": "Failed trials after which the study fails (default: Vertex's own rule).",
    "tuning.early_stopping": "median: stop a trial whose metric falls behind the median of the others at that step.",
    "scheduling.fallback": "For `submit --recover`: alternatives tried in order after a stock-out or preemption, "
    "each {region, machine_type, accelerator, accelerator_count}, validated like the primary.",
    "reservation": "Compute Engine reservation to consume.",
    "reservation.affinity": "none, any reservation, or a specific one named by `name`.",
    "reservation.name": "The reservation (projects/P/zones/Z/reservations/NAME) for affinity: specific.",
}

DEFAULTS: dict[str, Any] = {
    "version": 1,
    "region": DEFAULT_REGION,
    "enable_web_access": False,
    "enable_dashboard_access": False,
    "distribution_strategy": "auto",
    "cluster.*.replicas": 1,
    "cluster.reduction_server.replicas": "auto",
    "cluster.*.accelerator_count": 0,
    "cluster.*.boot_disk.type": "pd-ssd",
    "cluster.*.boot_disk.size_gb": 100,
    "scheduling.timeout": "7d",
    "scheduling.restart_job_on_worker_restart": False,
    "scheduling.disable_retries": False,
    "scheduling.strategy": "standard",
    "reservation.affinity": "none",
}

#: Values offered for completion where any text is allowed but some are well known.
EXAMPLES: dict[str, list[str]] = {
    "region": list(catalog.REGIONS),
    "trainer.image": ["tf.2-17", "tf-cpu.2-17", "tf-gpu.2-17", "tf-tpu.2-17"],
    "cluster.*.machine_type": list(catalog.ALL_MACHINE_TYPES),
    "cluster.*.accelerator": [*catalog.ACCELERATOR_TYPES, *catalog.ACCELERATOR_ALIASES],
}


def _lookup(table: dict[str, Any], path: PathKey) -> Any:
    """The entry for `path`: exact first, then with the pool name as `*` (`cluster.*.replicas`)."""
    key = ".".join(str(p) for p in path)
    if key in table:
        return table[key]
    if len(path) > 2 and path[0] == "cluster":
        return table.get(".".join(["cluster", "*", *(str(p) for p in path[2:])]))
    if len(path) > 2 and tuple(path[:2]) == ("diloco", "second_learner_pool"):  # a pool like any other
        return table.get(".".join(["cluster", "*", *(str(p) for p in path[2:])]))
    return None


def _any_case(word: str) -> str:
    """A regex for `word` in any letter case, `-` or `_` where `_` is: what Str.check accepts."""
    out = ""
    for char in word:
        if char.isalpha():
            out += f"[{char.lower()}{char.upper()}]"
        elif char == "_":
            out += "[-_]"
        else:
            out += "\\" + char if not char.isalnum() else char
    return out


_DURATION_PATTERN = r"^\s*(?:\d+|(?:\d+(?:\.\d+)?\s*[dDhHmMsS]\s*)+)$"


def node_schema(node: Any, path: PathKey = ()) -> dict[str, Any]:
    """The JSON Schema of one node of :mod:`vtrain.jobfile.schema`, with the docs of `path`."""
    hook = getattr(node, "json_schema", None)
    if callable(hook):  # a node type that knows its own JSON Schema
        out: dict[str, Any] = dict(hook())
    elif isinstance(node, schema.Obj):
        out = _object(node, path)
    elif isinstance(node, schema.Str):
        if node.choices:
            out = {
                "type": "string",
                "anyOf": [
                    {"enum": list(node.choices)},
                    {"pattern": "^\\s*(?:" + "|".join(_any_case(c) for c in node.choices) + ")\\s*$"},
                ],
            }
        else:
            out = {"type": "string"}
    elif isinstance(node, schema.Int):
        number: dict[str, Any] = {"type": "integer"}
        if node.minimum is not None:
            number["minimum"] = node.minimum
        if node.maximum is not None:
            number["maximum"] = node.maximum
        out = {"anyOf": [number, {"type": "string", "pattern": "^\\s*[aA][uU][tT][oO]\\s*$"}]} if node.allow_auto \
            else number
    elif isinstance(node, schema.Bool):
        out = {"type": "boolean"}
    elif isinstance(node, schema.Duration):
        out = {
            "anyOf": [
                {"type": "string", "pattern": _DURATION_PATTERN},
                {"type": "number", "exclusiveMinimum": 0, "maximum": schema.MAX_DURATION_S},
            ]
        }
    elif isinstance(node, schema.EnvValue):
        out = {"type": ["string", "number"]}
    elif isinstance(node, schema.ListOf):
        items = node_schema(node.item, (*path, 0))
        array = {"type": "array", "items": items}
        out = {"anyOf": [items, array]} if node.single_ok else array
    elif isinstance(node, schema.OneOrList):
        items = node_schema(node.item, (*path, 0))
        out = {"anyOf": [items, {"type": "array", "items": items, "minItems": 1}]}
    elif isinstance(node, schema.MapOf):
        out = {"type": "object", "additionalProperties": node_schema(node.value, (*path, "*"))}
    else:
        raise TypeError(
            f"vtrain.jobfile.json_schema has no JSON Schema for {type(node).__name__} at {'.'.join(map(str, path))}: "
            "give the node type a json_schema() method or a branch in node_schema()"
        )
    return _documented(out, path)


def _documented(out: dict[str, Any], path: PathKey) -> dict[str, Any]:
    if not path or isinstance(path[-1], int) or path[-1] == "*":
        return out
    doc = _lookup(DOCS, path)
    head: dict[str, Any] = {"description": doc} if doc else {}
    default = _lookup(DEFAULTS, path)
    if default is not None:
        head["default"] = default
    examples = _lookup(EXAMPLES, path)
    if examples:
        head["examples"] = examples
    return {**head, **out}


def _object(node: schema.Obj, path: PathKey) -> dict[str, Any]:
    properties = {name: node_schema(child, (*path, name)) for name, child in node.fields.items()}
    dependent: dict[str, Any] = {}
    for alias, name in node.aliases.items():
        canonical = properties[name]
        properties[alias] = {**canonical, "description": f"Alias of `{name}`. " + canonical.get("description", "")}
        dependent[alias] = {"not": {"required": [name]}}  # both spellings at once is ambiguous
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    required = []
    all_of = []
    for name in node.required:
        spellings = [name, *(a for a, n in node.aliases.items() if n == name)]
        if len(spellings) == 1:
            required.append(name)
        else:
            all_of.append({"anyOf": [{"required": [s]} for s in spellings]})
    if required:
        out["required"] = required
    if all_of:
        out["allOf"] = all_of
    if dependent:
        out["dependentSchemas"] = dependent
    return out


def key_paths(node: Any = None, path: PathKey = ()) -> list[PathKey]:
    """Every key path of the job file's schema (pools by name; aliases left out)."""
    node = schema.JOB_SCHEMA if node is None else node
    out: list[PathKey] = []
    if isinstance(node, schema.Obj):
        for name, child in node.fields.items():
            out.append((*path, name))
            out.extend(key_paths(child, (*path, name)))
    return out


def job_schema() -> dict[str, Any]:
    """The whole job file's JSON Schema, ready for `json.dumps`."""
    body = node_schema(schema.JOB_SCHEMA)
    return {
        "$schema": DIALECT,
        "$id": "urn:vtrain:job-file:1",
        "title": "vtrain job file",
        "description": "One YAML file that vtrain turns into a Vertex AI CustomJob. `vtrain validate` checks "
        "what this schema cannot: rules across keys (machine × accelerator, strategy × cluster, regions).",
        **body,
    }


__all__ = ["DEFAULTS", "DOCS", "EXAMPLES", "MODELINE", "SCHEMA_FILE", "job_schema", "key_paths", "node_schema"]
