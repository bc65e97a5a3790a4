"""Values several layers need, written once: the job config, the rules, the schema, the runtime
inside a replica and the target resolution all read them from here.

This module imports nothing but the standard library's dataclasses, so it ships to replicas with
:mod:`vtrain.runtime`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: vtrain's version (pyproject.toml's, which a test holds equal): the package face's ``__version__``, the
#: runtime sdist replicas install, the label a submitted job carries, the comment on an image's layers.
VERSION = "0.1.0"

#: The interpreter the entry point of an image vtrain builds names (every prebuilt TensorFlow image has it on PATH).
IMAGE_PYTHON = "python3"

#: Vertex AI's region when nothing names one (flag, job file, environment, gcloud).
DEFAULT_REGION = "us-central1"

#: `distribution_strategy` values; the job file passes the choice to replicas in STRATEGY_ENV.
STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "parameter_server", "tpu", "diloco",
              "dtensor", "horovod")
STRATEGY_ENV = "VTRAIN_DISTRIBUTION_STRATEGY"
#: DiLoCo: pool 0 runs this module (the syncer); every pool gets the `diloco:` settings as JSON in DILOCO_ENV.
DILOCO = "diloco"
DILOCO_SYNCER_MODULE = "vtrain.diloco"
DILOCO_ENV = "VTRAIN_DILOCO"
DILOCO_TOKEN_ENV = "VTRAIN_DILOCO_TOKEN"
DILOCO_COMPRESSIONS = ("none", "bf16", "int8", "int4")
#: DTensor (model parallel): every training replica gets the job file's `dtensor.mesh` as `batch=2,model=4`.
DTENSOR = "dtensor"
#: The DTensor mesh a replica builds (`dtensor.mesh` of the job file, as `batch=2,model=4`).
DTENSOR_MESH_ENV = "VTRAIN_DTENSOR_MESH"
#: Logical CPU devices a DTensor replica makes (`vtrain local` sets it: mesh size / replicas).
LOCAL_DEVICES_ENV = "VTRAIN_LOCAL_DEVICES"
#: Horovod scripts on vtrain.horovod: one rank per chief/worker replica, no tf.distribute strategy.
HOROVOD = "horovod"
#: An Experiment Run's longest context ID, EXPERIMENT-RUN (the SDK's _EXPERIMENT_RUN_MAX_LENGTH, less "-tb-run").
RUN_ID_MAX = 128 - len("-tb-run")
FLEX_START = "flex_start"  # the scheduling strategy that needs one machine type everywhere
SCHEDULING_STRATEGIES = ("standard", "spot", FLEX_START)

#: Labels: https://cloud.google.com/resource-manager/docs/labels-overview (≤ 64 labels, ≤ 63 chars).
#: Env, package URIs, display name: https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec
MAX_LABELS = 64
#: The labels vtrain itself puts on a job (submit, --recover); a job file may not use them, and they
#: count against MAX_LABELS.
VTRAIN_LABELS = ("vtrain-version", "vtrain-config-hash", "vtrain-submit-id", "vtrain-attempt",
                 "vtrain-previous-attempt")
#: A project ID (6-30 lower-case letters, digits, hyphens, from a letter) or a project number; a Vertex
#: region name. ASCII only: validate, render and submit read them through these same patterns.
PROJECT_PATTERN = r"^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20})$"
REGION_PATTERN = r"^[a-z]+(?:-[a-z]+)+[0-9]+$"
MAX_LABEL_LENGTH = 63
MAX_DISPLAY_NAME = 128
MAX_ENV = 100
MAX_PACKAGE_URIS = 100
#: A pool's replicaCount is an int64 in the API.
MAX_REPLICAS = 2**63 - 1

#: Vertex's folders under baseOutputDirectory, by the variable that names each to a replica.
AIP_OUTPUT_DIRS = {"AIP_MODEL_DIR": "model", "AIP_CHECKPOINT_DIR": "checkpoints", "AIP_TENSORBOARD_LOG_DIR": "logs"}
#: Where `vtrain local` keeps its runs inside an output directory (one folder per job id).
LOCAL_RUNS_DIR = "vtrain-local"
#: The rehearsal profile (vtrain.runtime.profile_record): its format version, its folder in a run folder,
#: and the fewest steps after warm-up that give a step time (the runtime writes it, `estimate` reads it).
PROFILE_VERSION = 1
PROFILE_FOLDER = "profile"
MIN_TIMED_STEPS = 5
#: What names a Vertex CustomJob on the command line: its numeric ID or its full resource name.
JOB_ID_PATTERN = r"[0-9]+"
JOB_NAME_PATTERN = r"projects/([^/]+)/locations/([^/]+)/(?:customJobs|hyperparameterTuningJobs)/([0-9]+)"

#: What the launcher (`vtrain local`) tells a replica about faults, and how a replica reports progress
#: back (see vtrain.runtime.progress and vtrain.local.faults). Vertex sets none of these.
RESTART_COUNT_ENV = "VTRAIN_RESTART_COUNT"  # times this replica was restarted in this job attempt
JOB_ATTEMPT_ENV = "VTRAIN_JOB_ATTEMPT"  # 1 for the first run of the job, 2 after one whole-job retry, ...
STATUS_FILE_ENV = "VTRAIN_STATUS_FILE"  # where runtime.report_step() writes {"step", "restarts", ...}
#: The steps at which `vtrain local` has a fault armed for this process (``4,200``): report_step() pauses there
#: (at most FAULT_STEP_WAIT seconds) so the fault lands at the step it names, not a few steps later.
FAULT_STEPS_ENV = "VTRAIN_FAULT_STEPS"
FAULT_STEP_WAIT = 3.0
#: The exit code of a replica that saved a checkpoint on SIGTERM and left to be restarted (128 + SIGTERM,
#: as TensorFlow's PreemptionCheckpointHandler uses on Google Cloud).
PREEMPTED_EXIT_CODE = 143
@dataclass(frozen=True)
class DilocoKnobs:
    """The `diloco:` block's knobs and defaults, written once: the job config (``config.DilocoConfig``)
    and the replicas (``diloco.settings.Settings``) both extend it.

    outer_lr 1.0 with Nesterov momentum 0.6 recovered 93-96% of the single-learner→DP gap in 60
    rounds (issue 12's prototype); the published 0.7/0.9 needs a few hundred rounds to settle.
    """

    inner_steps: int = 50
    outer_lr: float = 1.0
    outer_momentum: float = 0.6
    min_quorum: int | None = None  # None: every learner that is alive
    grace: float = 30.0
    straggler_timeout: float = 60.0
    compression: str = "none"
    fragments: int = 1
    token_weighting: bool = True
    registration_timeout: float = 600.0
    checkpoint_every: float = 60.0  # 0: after every merge
    max_staleness: int = 4
    overlap: bool = False  # send and keep training; the merged update is applied when it arrives


#: The same defaults as a mapping (the schema's documentation and the tests read them).
DILOCO_DEFAULTS: dict[str, object] = asdict(DilocoKnobs())

#: The JSON Schema `vtrain init` writes beside the job file, and the modeline that points editors at it.
SCHEMA_FILE = "vtrain.schema.json"
MODELINE = f"# yaml-language-server: $schema={SCHEMA_FILE}"
