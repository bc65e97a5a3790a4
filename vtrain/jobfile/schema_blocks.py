"""The job file's self-contained blocks (`diloco:`, `dtensor:`, `tuning:`) and the worker pool's keys, declared
apart from :mod:`vtrain.jobfile.schema` so each module stays small. Each key carries its doc, default
and examples (:class:`vtrain.jobfile.nodes.Declared`); the `diloco:` defaults are read from
:data:`vtrain.constants.DILOCO_DEFAULTS`, the one place they are written.
"""

from __future__ import annotations

from typing import Any

from vtrain import catalog
from vtrain.constants import DILOCO_COMPRESSIONS, DILOCO_DEFAULTS, MAX_REPLICAS
from vtrain.jobfile.nodes import Bool, EnvValue, Int, ListOf, MapOf, Number, Obj, OneOrList, Scalar, Seconds, Str

#: `tuning:` words; vtrain/tuning/model.py maps them to StudySpec's enums.
TUNING_GOALS = ("maximize", "minimize")
TUNING_PARAMETER_TYPES = ("double", "integer", "discrete", "categorical")
TUNING_SCALES = ("linear", "log", "reverse_log")
TUNING_ALGORITHMS = ("default", "random", "grid")
TUNING_EARLY_STOPPING = ("median", "decay_curve", "convex", "none")
TUNING_MEASUREMENTS = ("last", "best")
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
RESERVATION_AFFINITIES = ("none", "any", "specific")
#: tf-tpu has no 2-17 image: each family's example is its default version
IMAGE_EXAMPLES = (f"tf.{catalog.DEFAULT_TF_VERSION}",
                  *(f"tf-{family}.{catalog.default_tf_version(family)}" for family in ("cpu", "gpu", "tpu")))

POOL_DOC = "Each replica of this pool runs on one machine."
_REDUCERS_IGNORE = "it runs Google's image, and vtrain sends it no arguments or environment"


def reservation_node(doc: str) -> Obj:
    """`reservation:` (job-wide) and `cluster.<pool>.reservation`: one shape, one ReservationAffinity."""
    return Obj(
        {
            # the model builds `specific` when a name is given, else `any`: the schema's default is the latter
            "affinity": Str(RESERVATION_AFFINITIES, default="any",
                            doc="none, any reservation, or a specific one named by `name`; left out: specific "
                            "when `name` is given, else any."),
            "name": Str(examples=("projects/my-project/zones/us-central1-a/reservations/my-reservation",),
                        doc="The reservation (projects/P/zones/Z/reservations/NAME) for affinity: specific."),
        },
        doc=doc,
    )


def container_node(doc: str) -> Obj:
    """`trainer.container` and a pool's own `container`."""
    return Obj(
        {
            "image_uri": Str(examples=("us-docker.pkg.dev/my-project/repo/trainer:latest",),
                             doc="The container image, e.g. us-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG."),
            "command": ListOf(Str(), single_ok=True, examples=(["python3", "-m", "trainer.task"],),
                              doc="Entry point that replaces the image's own."),
        },
        required=("image_uri",),
        doc=doc,
    )


_NFS = Obj({"server": Str(doc="IP address of the NFS server."),
            "path": Str(doc="Path the server exports, starting with /."),
            "mount_point": Str(doc="Where it appears in the replica: /mnt/nfs/MOUNT_POINT.")},
           required=("server", "path", "mount_point"))
_LUSTRE = Obj({"instance_ip": Str(doc="IP address of the Managed Lustre instance."),
               "volume_handle": Str(doc="The Lustre volume's unique identifier."),
               "filesystem": Str(doc="The Lustre file system's name."),
               "mount_point": Str(doc="Where it appears in the replica: /mnt/lustre/MOUNT_POINT.")},
              required=("instance_ip", "volume_handle", "filesystem", "mount_point"))
_POOL_INHERITS = "left out: the chief's (workers, evaluator; a second learner pool: cluster.workers')"


def pool(doc: str, *, reducers: bool = False) -> Obj:
    """One worker pool's keys; the Reduction Server's `replicas` may be `auto`, it takes no args or env, and it
    runs Google's image: no trainer overrides, mounts or GPU partitions."""
    ignored = _REDUCERS_IGNORE if reducers else ""
    trainer_keys: dict[str, Any] = {} if reducers else {
        "image": Str(examples=IMAGE_EXAMPLES,
                     doc="This pool's prebuilt image instead of trainer.image (python-package trainers), in the "
                     "same words: tf.2-NN, tf-gpu.2-NN, or a prebuilt image URI."),
        "module": Str(examples=("trainer.evaluate",),
                      doc="This pool's `python -m` module instead of trainer.module, e.g. an evaluator's."),
        "container": container_node("This pool runs this container instead of trainer.container or the package "
                                    "(e.g. a chief on another image); its args and env are the pool's."),
        "nfs_mounts": ListOf(_NFS, examples=([{"server": "10.76.0.10", "path": "/share", "mount_point": "data"}],),
                             doc="NFS shares to mount, each {server, path, mount_point}, reached through "
                             f"`network` or `psc_interface`; {_POOL_INHERITS}."),
        "lustre_mounts": ListOf(_LUSTRE, examples=([{"instance_ip": "10.90.1.4", "volume_handle":
                                                     "my-project/us-central1-a/my-lustre", "filesystem": "lfs",
                                                     "mount_point": "lustre"}],),
                                doc="Managed Lustre file systems to mount, each {instance_ip, volume_handle, "
                                f"filesystem, mount_point}}; {_POOL_INHERITS}."),
        "gpu_partition_size": Str(examples=("1g.10gb",),
                                  doc="Split each GPU into NVIDIA MIG partitions of this size (e.g. 1g.5gb on "
                                  "A100 40GB, 1g.10gb on A100 80GB or H100); needs accelerator_count: 1."),
    }
    return Obj(
        {
            "replicas": Int(minimum=0, maximum=MAX_REPLICAS, allow_auto=reducers, default="auto" if reducers else 1,
                            examples=(2,), doc="Number of replicas in this pool (0 leaves the pool out)."),
            "machine_type": Str(examples=tuple(catalog.ALL_MACHINE_TYPES),
                                doc="Compute Engine machine type, e.g. n1-standard-8, a2-highgpu-1g, "
                                "ct5lp-hightpu-4t."),
            "accelerator": Str(examples=(*catalog.ACCELERATOR_TYPES, *catalog.ACCELERATOR_ALIASES),
                               doc="Accelerator type (NVIDIA_TESLA_T4 or an alias such as t4, a100, h100, l4, v100, "
                               "tpu-v3); implied by A2/A3/G2 machine types."),
            "accelerator_count": Int(minimum=0, default=0, examples=(2,),
                                     doc="Accelerators per replica; must be a legal count for the machine type."),
            "tpu_topology": Str(examples=("2x2",), doc="TPU slice topology for TPU VM machine types, e.g. 2x2."),
            "boot_disk": Obj(
                {
                    "type": Str(BOOT_DISK_TYPES, default="pd-ssd", doc="Boot disk type."),
                    "size_gb": Int(default=100, examples=(200,), doc="Boot disk size in GB (100 to 64000)."),
                },
                doc="Boot disk of each replica.",
            ),
            "reservation": reservation_node("The Compute Engine reservation this pool's machines consume, instead "
                                            f"of the job-wide `reservation`; {_POOL_INHERITS}."),
            **trainer_keys,
            "args": ListOf(Str(), single_ok=True, examples=(["--steps=100"],), vtrain_only=ignored,
                           doc="Arguments for this pool's replicas (replace trainer.args)."),
            "env": MapOf(EnvValue(), examples=({"POOL_FLAG": "1"},), vtrain_only=ignored,
                         doc="Environment variables for this pool's replicas (added to trainer.env)."),
        },
        aliases={"replica_count": "replicas"},
        doc=doc,
    )


def _knob(node_type: type, doc: str, name: str, **shape: Any) -> Any:
    """A `diloco:` knob whose default is DILOCO_DEFAULTS' (None there: no single default to show)."""
    return node_type(doc=doc, default=DILOCO_DEFAULTS[name], **shape)


DILOCO_SCHEMA = Obj(
    {
        "inner_steps": _knob(Int, "H: local steps each learner takes between exchanges.", "inner_steps",
                             minimum=1, examples=(100,)),
        "outer_lr": _knob(Number, "Outer learning rate of the syncer's Nesterov step on the averaged parameter "
                          "change.", "outer_lr", above=0, examples=(0.7,)),
        "outer_momentum": _knob(Number, "Outer Nesterov momentum in [0, 1); tune it with outer_lr (the DiLoCo guide "
                                "has what was measured).", "outer_momentum", minimum=0, below=1,
                                examples=(0.9,)),
        "min_quorum": _knob(Int, "Merge once this many learners have sent (default: every learner alive).",
                            "min_quorum", minimum=1, examples=(1,)),
        "grace": _knob(Seconds, "After the quorum, wait at most this long for stragglers (also capped at a quarter "
                       "of a round).", "grace", examples=("10s",)),
        "straggler_timeout": _knob(Seconds, "Silence (no heartbeat) after which a learner counts as hung and is "
                                   "left out.", "straggler_timeout", examples=("2m",)),
        "compression": _knob(Str, "How parameter changes travel, both directions: none, bf16, int8 or int4.",
                             "compression", choices=DILOCO_COMPRESSIONS),
        "fragments": _knob(Int, "More than 1: exchange a balanced part of the model every inner_steps/fragments "
                           "steps.", "fragments", minimum=1, examples=(2,)),
        "token_weighting": _knob(Bool, "Weight each learner's change by the examples it processed.",
                                 "token_weighting"),
        "registration_timeout": _knob(Seconds, "How long the first merge waits for every learner to start.",
                                      "registration_timeout", examples=("5m",)),
        "checkpoint_every": _knob(Seconds, "Seconds between the syncer's checkpoints in AIP_CHECKPOINT_DIR/diloco/.",
                                  "checkpoint_every", examples=("5m",)),
        "max_staleness": _knob(Int, "Rounds a learner's change may lag the global model and still be merged "
                               "(weighted by 1/(1+staleness)).", "max_staleness", minimum=0, examples=(2,)),
        "overlap": _knob(Bool, "Keep training while the syncer merges: the merged update is applied when it "
                         "arrives (at the latest at that fragment's next exchange), keeping the steps taken "
                         "meanwhile.", "overlap"),
        "second_learner_pool": pool("Optional second group of learners on another machine type (Vertex pool 2), "
                                    "with a pool's keys (cluster.*); machine keys it leaves out are "
                                    "cluster.workers'."),
    },
    doc="distribution_strategy: diloco: learners train alone and exchange parameter changes with a CPU syncer every "
    "inner_steps steps (see the guide \"Training with DiLoCo\"). The knobs reach every replica as VTRAIN_DILOCO.",
)

DTENSOR_SCHEMA = Obj(
    {
        "mesh": MapOf(
            Int(minimum=1),
            examples=({"batch": 2, "model": 2}, {"batch": 1, "model": 8}),
            doc="The device mesh: dimension name -> size, outermost first (as written). Its sizes multiply to "
            "the training replicas (chief + workers) x devices per replica (accelerator_count on GPUs; on CPU "
            "machines each replica gets mesh size / replicas logical devices). Layouts name the dimensions, "
            "e.g. `batch` (data parallel) and `model` (tensor parallel; keep it within a replica on GPUs).",
        ),
    },
    required=("mesh",),
    doc="distribution_strategy: dtensor: model parallelism with tf.experimental.dtensor, the model's weights "
    "sharded over a mesh of every replica's devices (see the guide \"Training a model that does not fit one "
    "device\"). The mesh reaches every replica as VTRAIN_DTENSOR_MESH; runtime.dtensor_mesh() builds it.",
)

TUNING_SCHEMA = Obj(
    {
        "metric": OneOrList(
            Obj({"name": Str(), "goal": Str(TUNING_GOALS)}, required=("name", "goal")),
            examples=({"name": "loss", "goal": "minimize"},),
            doc="What the trainer reports (runtime.report_metric) and the study optimizes: {name, goal} or a list.",
        ),
        "parameters": MapOf(
            Obj(
                {
                    "type": Str(TUNING_PARAMETER_TYPES),
                    "min": Number(as_written=True),
                    "max": Number(as_written=True),
                    "scale": Str(TUNING_SCALES),
                    "values": ListOf(Scalar()),
                    "default": Scalar(),
                    "parent": Str(),
                    "parent_values": ListOf(Scalar()),
                },
                required=("type",),
            ),
            examples=({"batch_size": {"type": "discrete", "values": [32, 64, 128]}},
                      {"optimizer": {"type": "categorical", "values": ["sgd", "adam"], "default": "adam"},
                       "momentum": {"type": "double", "min": 0.5, "max": 0.99, "parent": "optimizer",
                                    "parent_values": ["sgd"]}}),
            doc="The parameters to tune, by flag name: {type: double|integer|discrete|categorical, min, max, "
            "scale: linear|log|reverse_log, values, default (the study's first guess), parent and parent_values "
            "(tuned, and passed, only in trials where the parent parameter takes one of those values)}.",
        ),
        "algorithm": Str(TUNING_ALGORITHMS, doc="default (Vertex's Bayesian optimization; locally optuna's TPE when "
                         "installed), random or grid."),
        "max_trials": Int(minimum=1, maximum=2**31 - 1, examples=(20,), doc="Trials to run in all."),
        "parallel_trials": Int(minimum=1, maximum=2**31 - 1, examples=(4,),
                               doc="Trials running at once (at most max_trials)."),
        "max_failed_trials": Int(minimum=0, maximum=2**31 - 1, examples=(3,),
                                 doc="Failed trials after which the study fails (default: Vertex's own rule)."),
        "early_stopping": Str(TUNING_EARLY_STOPPING, default="none",
                              doc="median: stop a trial whose metric falls behind the median of the others at that "
                              "step; decay_curve: stop one whose predicted final value is worse than the best "
                              "trial's; convex: stop one whose convex fit of the curve does; none. `vtrain local` "
                              "applies median only."),
        "measurement_selection": Str(TUNING_MEASUREMENTS, default="last",
                                     doc="Which of a trial's reports is its final value: last (Vertex's own default) "
                                     "or best (the high-level SDK's). vtrain always sends it, so the study and "
                                     "`vtrain local` rank trials the same way."),
    },
    required=("metric", "parameters", "max_trials"),
    aliases={"metrics": "metric"},
    doc="Makes the job a hyperparameter tuning study (a Vertex HyperparameterTuningJob): each trial runs this job "
    "with the parameters' values as --NAME=VALUE arguments (see the guide \"Tuning hyperparameters\").",
)


#: `model.serving_image` aliases: Vertex's prebuilt TensorFlow prediction images (vtrain.jobfile.serving.PREDICTION_TF).
SERVING_IMAGE_EXAMPLES = ("tf2-cpu.2-15", "tf2-gpu.2-15",
                          "us-docker.pkg.dev/my-project/serving/predictor:latest")

#: Why `model:` keys leave the CustomJob as it is (tests/request/test_every_key_reaches.py).
_UPLOAD = "it goes into the UploadModel request sent after the job succeeds (`vtrain render --model`)"

MODEL_SCHEMA = Obj(
    {
        "display_name": Str(vtrain_only=_UPLOAD, examples=("churn-classifier",),
                            doc="The model's name in the Model Registry (at most 128 characters); left out: the "
                            "job's `name`. A later run with the same display name adds a version to that model."),
        "description": Str(vtrain_only=_UPLOAD, examples=("Churn classifier trained by vtrain.",),
                           doc="The model's description."),
        "serving_image": Str(vtrain_only=_UPLOAD, examples=SERVING_IMAGE_EXAMPLES,
                             doc="The container that serves predictions: a prebuilt prediction alias tf2-cpu.2-NN "
                             "or tf2-gpu.2-NN (the regional us/europe/asia image), or any image URI. Left out: "
                             "tf2-cpu at the training image's TensorFlow version, which must have a prediction "
                             "image (Vertex publishes them up to 2.15)."),
        "routes": Obj(
            {
                "predict": Str(vtrain_only=_UPLOAD, examples=("/v1/models/churn:predict",),
                               doc="HTTP path the serving container answers predictions on."),
                "health": Str(vtrain_only=_UPLOAD, examples=("/v1/models/churn",),
                              doc="HTTP path of the container's health check."),
            },
            doc="The serving container's routes (custom images; the prebuilt ones bring their own).",
        ),
        "labels": MapOf(Str(), vtrain_only=_UPLOAD, examples=({"stage": "candidate"},),
                        doc="Labels on the model version (keys and values lowercase, at most 63 characters). "
                        "vtrain adds vtrain-job-id and vtrain-config-hash, which make the upload idempotent."),
        "version_aliases": ListOf(Str(), single_ok=True, vtrain_only=_UPLOAD, examples=(["candidate"],),
                                  doc="Aliases of the uploaded version (models/ID@ALIAS), each "
                                  "[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]; `default` is Vertex's own."),
        "parent": Str(vtrain_only=_UPLOAD,
                      examples=("projects/my-project/locations/us-central1/models/1234567890", "1234567890"),
                      doc="An existing model (its ID, or projects/P/locations/R/models/ID in the job's region) "
                      "to add this job's model to as a new version."),
        "new_version_each_run": Bool(default=False, vtrain_only=_UPLOAD,
                                     doc="Upload a new version after every succeeding job. Left false: a job whose "
                                     "vtrain-config-hash already has a version (the same file and trainer code) "
                                     "uploads nothing and names that version."),
    },
    doc="Register the job's model (AIP_MODEL_DIR, a SavedModel) in Vertex AI Model Registry after the job "
    "succeeds: `submit --wait` uploads it, `vtrain model upload JOB_ID` does it later; `vtrain local` checks the "
    "export loads and has a serving signature. Needs base_output_dir (see the guide \"The model in Model "
    "Registry\").",
)
