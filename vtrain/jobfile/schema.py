"""The job file's shape (version 1), checked on the raw YAML before any object is built.

Every problem is collected, never just the first: unknown keys get the nearest
valid key suggested, wrong types say what was expected. What passes comes out
normalized (durations in seconds, enum words lower-case, env values as text),
ready for :mod:`vtrain.jobfile.config` to turn into dataclasses.

Each key is declared once, here: its shape, and on the same node its doc, default and examples, which
the JSON Schema and the manual's reference table are generated from. The worker pool's keys and the
self-contained blocks (`diloco:`, `dtensor:`, `tuning:`, `model:`) come first, then the file's top
level built from them; the `diloco:` defaults are read from :data:`vtrain.constants.DILOCO_DEFAULTS`,
the one place they are written.
"""

from __future__ import annotations

from typing import Any

from vtrain import catalog
from vtrain.constants import (
    DEFAULT_REGION,
    DILOCO_COMPRESSIONS,
    DILOCO_DEFAULTS,
    MAX_ENV,
    MAX_LABELS,
    MAX_PACKAGE_URIS,
    MAX_REPLICAS,
    SCHEDULING_STRATEGIES,
    STRATEGIES,
    STRATEGY_ENV,
)
from vtrain.errors import Problem
from vtrain.jobfile.config import DEFAULT_PS_MACHINE
from vtrain.jobfile.nodes import (  # noqa: F401 - the node types, also reachable from here
    MAX_DURATION_S,
    Bool,
    Checker,
    Declared,
    Duration,
    EnvValue,
    Int,
    ListOf,
    MapOf,
    Number,
    Obj,
    OneOrList,
    RawFields,
    Scalar,
    Seconds,
    Str,
    _type_name,
    did_you_mean,
    parse_duration,
)
from vtrain.jobfile.yamlpos import Positions

#: `tuning:` words; vtrain/tuning/config.py maps them to StudySpec's enums.
TUNING_GOALS = ("maximize", "minimize")
TUNING_PARAMETER_TYPES = ("double", "integer", "discrete", "categorical")
TUNING_SCALES = ("linear", "log", "reverse_log")
TUNING_ALGORITHMS = ("default", "random", "grid")
TUNING_EARLY_STOPPING = ("median", "decay_curve", "convex", "none")
TUNING_MEASUREMENTS = ("last", "best")
BOOT_DISK_TYPES = catalog.BOOT_DISK_TYPES
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
            "name": Str(examples=("projects/my-project/zones/us-central1-a/reservations/my-reservation",
                                  "projects/my-project/zones/us-central1-a/reservations/my-reservation/"
                                  "reservationBlocks/my-block"),
                        doc="For affinity: specific, the reservation (projects/P/zones/Z/reservations/NAME), one of "
                        "its blocks (.../reservationBlocks/BLOCK) or sub-blocks "
                        "(.../reservationBlocks/BLOCK/reservationSubBlocks/SUBBLOCK)."),
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
                    "type": Str(BOOT_DISK_TYPES, examples=("pd-ssd",),
                                doc="Boot disk type. Left out: the machine's default, pd-ssd, or hyperdisk-balanced "
                                "on machines that take Hyperdisk only (A3 Ultra, A4, A4X, N4), which refuse pd-*; "
                                "`vtrain catalog machines` lists each machine's."),
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

_INHERITS = " Machine keys it leaves out are the chief's (its accelerators only when the machine type is the same)."


JOB_SCHEMA = Obj(
    {
        "version": Int(minimum=1, maximum=1, default=1, vtrain_only="it is the job file's format",
                       doc="Version of the job-file format. Only 1 exists."),
        "name": Str(examples=("mnist-2026",), doc="The job's display name on Vertex AI (at most 128 characters)."),
        "project": Str(examples=("my-project",), vtrain_only="it names the request's parent (projects/P/locations/R)",
                       doc="Google Cloud project. Precedence: --project, this key, VTRAIN_PROJECT, "
                       "GOOGLE_CLOUD_PROJECT, `gcloud config`."),
        "region": Str(default=DEFAULT_REGION, examples=tuple(catalog.REGIONS),
                      doc="Vertex AI region the job runs in, e.g. europe-west4; it also picks the regional prebuilt "
                      "images (the us, europe or asia registry). Keep the staging bucket in this region."),
        "staging_bucket": Str(examples=("gs://my-bucket/staging",),
                              doc="Where the trainer package is uploaded: gs://BUCKET/PREFIX in the job's region "
                              "(a local directory, relative to this file, for `vtrain local` and "
                              "`package --target local`)."),
        "base_output_dir": Str(examples=("gs://my-bucket/output",),
                               doc="Base output directory (gs://…): AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and "
                               "AIP_TENSORBOARD_LOG_DIR are model/, checkpoints/ and logs/ under it (a local path, "
                               "relative to this file, for `vtrain local`).",
                               rest="jobSpec.baseOutputDirectory.outputUriPrefix", rest_number=6),
        "service_account": Str(examples=("trainer@my-project.iam.gserviceaccount.com",),
                               doc="Service account the replicas run as (NAME@PROJECT.iam.gserviceaccount.com); "
                               "you need iam.serviceAccounts.actAs on it.",
                               rest="jobSpec.serviceAccount", rest_number=4),
        "network": Str(examples=("projects/123456789/global/networks/default",),
                       doc="Full name of a peered VPC network: projects/NUMBER/global/networks/NAME.",
                       rest="jobSpec.network", rest_number=5),
        "reserved_ip_ranges": ListOf(Str(), single_ok=True, examples=(["vertex-ai-range"],),
                                     doc="Names of reserved IP ranges in `network` for the job's replicas.",
                                     rest="jobSpec.reservedIpRanges", rest_number=13),
        "labels": MapOf(Str(), examples=({"team": "ml"},),
                        doc=f"Labels on the job (at most {MAX_LABELS}; keys and values lowercase, at most 63 "
                        "characters). vtrain adds vtrain-version and vtrain-config-hash.",
                        rest="labels", rest_number=11),
        "tensorboard": Str(examples=("create", "team-board",
                                     "projects/my-project/locations/us-central1/tensorboards/123"),
                           doc="The Vertex AI TensorBoard instance Vertex uploads AIP_TENSORBOARD_LOG_DIR to: a full "
                           "name (projects/P/locations/R/tensorboards/ID), a display name (found in the job's "
                           "region at submit, created if missing), or `create` (the instance named `vtrain`). "
                           "Needs service_account and base_output_dir.",
                           rest="jobSpec.tensorboard", rest_number=7),
        "enable_web_access": Bool(default=False, doc="Interactive shell access to the replicas while the job runs.",
                                  rest="jobSpec.enableWebAccess", rest_number=10),
        "enable_dashboard_access": Bool(default=False,
                                        doc="Access to a dashboard served by the replicas while the job runs.",
                                        rest="jobSpec.enableDashboardAccess", rest_number=16),
        "persistent_resource_id": Str(examples=("my-persistent-resource",),
                                      doc="Run on this Vertex AI persistent resource instead of new machines.",
                                      rest="jobSpec.persistentResourceId", rest_number=14),
        "kms_key": Str(examples=("projects/my-project/locations/us-central1/keyRings/ring/cryptoKeys/key",),
                       doc="Customer-managed encryption key (projects/P/locations/R/keyRings/K/cryptoKeys/NAME).",
                       rest="encryptionSpec.kmsKeyName", rest_number=12),
        "experiment": Str(examples=("projects/my-project/locations/us-central1/metadataStores/default/contexts/"
                                    "my-experiment", "churn-model"),
                          doc="The Vertex AI Experiment the job logs to: a name (lowercase letters, digits and '-', "
                          "at most 128; found in the job's region at submit, created if missing) or its full name, "
                          "projects/P/locations/R/metadataStores/default/contexts/EXPERIMENT, in the job's region. "
                          "The request (and `render`, once the project is known) carries the full name.",
                          rest="jobSpec.experiment", rest_number=17),
        "experiment_run": Str(examples=("run-7", "projects/my-project/locations/us-central1/metadataStores/default/"
                                        "contexts/my-experiment-run-1"),  # fmt: skip
                              doc="The Experiment Run of `experiment` the job logs to: the run's name (lowercase "
                              "letters, digits and '-', as `aiplatform.start_run(NAME)` takes it; its context is "
                              "EXPERIMENT-NAME, made at submit if missing) or its full name, the experiment's "
                              "metadata store, "
                              "contexts/EXPERIMENT-RUN (the experiment's name, a dash, the run's).",
                              rest="jobSpec.experimentRun", rest_number=18),
        "protected_artifact_location_id": Str(examples=("europe-west4",),
                                              doc="Region to keep the job's protected artifacts in, when it is not "
                                              "the job's own region.",
                                              rest="jobSpec.protectedArtifactLocationId", rest_number=19),
        "psc_interface": Obj(
            {
                "network_attachment": Str(examples=("my-attachment",),
                                          doc="The Compute Engine network attachment (a name, or projects/P/"
                                          "regions/R/networkAttachments/NAME) in the job's region and project."),
                "dns_peering": ListOf(
                    Obj({"domain": Str(doc="DNS suffix to resolve, ending in a dot: corp.example.com."),
                         "target_project": Str(doc="Project of the Cloud DNS zone."),
                         "target_network": Str(doc="VPC network in target_project that sees the zone.")},
                        required=("domain", "target_project", "target_network")),
                    examples=([{"domain": "corp.example.com.", "target_project": "my-host-project",
                                "target_network": "my-vpc"}],),
                    doc="DNS zones the replicas may resolve through the interface: {domain, target_project, "
                    "target_network} each.",
                ),
            },
            required=("network_attachment",),
            doc="Private Service Connect interface to your VPC (instead of `network` peering; Vertex takes one "
            "of the two).",
        ),
        "trainer": Obj(
            {
                "package": Str(examples=("trainer",),
                               doc="Directory of the trainer's Python package (with pyproject.toml or setup.py), "
                               "relative to this file; built into a content-hashed sdist and staged."),
                "package_uris": ListOf(Str(), single_ok=True, examples=(["gs://my-bucket/trainer-0.2.tar.gz"],),
                                       doc=f"Already-built packages (gs://…, at most {MAX_PACKAGE_URIS}) to install "
                                       "instead of building `package`."),
                "container": container_node("Run your own container image instead of a Python package."),
                "build": Obj(
                    {
                        "repository": Str(examples=("us-central1-docker.pkg.dev/my-project/train/trainer",),
                                          doc="Where the image is pushed: HOST/PATH with no tag, e.g. "
                                          "REGION-docker.pkg.dev/PROJECT/REPO/NAME (Artifact Registry, in the "
                                          "job's region); vtrain tags it with the hash of what goes into it."),
                        "requirements": ListOf(Str(), single_ok=True, examples=(["tf-keras==2.17.0"],),
                                               doc="What pip installs into the image besides the trainer's own "
                                               "declared dependencies, as wheels for the base's Python and "
                                               "platform: requirement specifiers, or requirements files (an "
                                               "entry ending in .txt, relative to this file; inside one, -r and "
                                               "-c may name only files under this file's directory)."),
                        "python_version": Str(examples=("3.11",),
                                              doc="The base image's Python (MAJOR.MINOR), for a base whose config "
                                              "says none (prebuilt images: read from their name)."),
                        "dependencies": Bool(default=True,
                                             doc="Install the requirements' own dependencies too (false: exactly "
                                             "the list, pip --no-deps). Either way, what a prebuilt TensorFlow "
                                             "base already has (TensorFlow and its dependencies) is not "
                                             "installed again unless `requirements` names it."),
                        "platform": Str(examples=("manylinux_2_35_x86_64",),
                                        doc="The newest wheel platform tag the base runs: manylinux_2_NN_ARCH "
                                        "for glibc 2.NN (manylinux2014_ARCH is 2.17), or musllinux_1_N_ARCH; "
                                        "ARCH x86_64 or aarch64. Wheels for it and every older tag are "
                                        "allowed. Left out: manylinux_2_31_x86_64 for prebuilt TensorFlow "
                                        "images, else read from the base's C library as the image is built."),
                    },
                    required=("repository",),
                    doc="Build a container image from `package` on `image` (the base) and push it, with no Docker "
                    "daemon: the pools run it (containerSpec) instead of a staged package (see the guide "
                    "\"Custom containers without Docker\").",
                ),
                "module": Str(examples=("trainer.task",),
                              doc="Python module to run with `python -m`, e.g. trainer.task."),
                "image": Str(examples=IMAGE_EXAMPLES,
                             doc="Prebuilt TensorFlow image (with `build`: the base image, a prebuilt one or any "
                             "image reference): tf.2-NN (vtrain picks tf-cpu/tf-gpu/tf-tpu per pool), "
                             "tf-cpu.2-NN, tf-gpu.2-NN, tf-tpu.2-NN, or a full prebuilt image URI; left out: "
                             f"tf.{catalog.DEFAULT_TF_VERSION} (TPU pools: tf-tpu.{catalog.default_tf_version('tpu')}, "
                             "the newest TPU image)."),
                "args": ListOf(Str(), single_ok=True, examples=(["--epochs=5"],),
                               doc="Command-line arguments of every replica."),
                "env": MapOf(EnvValue(), examples=({"BATCH_SIZE": "64"},),
                             doc=f"Environment variables of every replica (at most {MAX_ENV}); values are text."),
            },
            doc="What runs in each replica: a Python package (package or package_uris, plus module) or a container.",
        ),
        "distribution_strategy": Str(STRATEGIES, default="auto",
                                     doc="TensorFlow strategy the replicas use, given to them as "
                                     f"{STRATEGY_ENV}; auto picks it from each replica's environment (TPU, TF_CONFIG "
                                     "workers, local GPUs); dtensor shards the model over the `dtensor:` block's "
                                     "mesh; horovod runs Horovod scripts on vtrain.horovod (one rank per chief/"
                                     "worker replica, at most 1 GPU each; docs/guides/horovod.md)."),
        "cluster": Obj(
            {
                "chief": pool("Pool 0: exactly one replica; its outcome is the job's. " + POOL_DOC),
                "workers": pool("Pool 1: the other training workers. " + POOL_DOC + _INHERITS),
                "parameter_servers": pool("Pool 2: parameter servers for ParameterServerStrategy. " + POOL_DOC
                                           + " Machine left out: the chief's when it has no accelerators, else "
                                           f"{DEFAULT_PS_MACHINE}."),
                "reduction_server": pool("Pool 2: Vertex AI Reduction Server for GPU all-reduce; replicas: auto "
                                          "sizes it from the workers' bandwidth; machine left out: "
                                          f"{catalog.REDUCTION_SERVER_DEFAULT_MACHINE}.", reducers=True),
                "evaluator": pool("Pool 3: a side-car evaluator outside the training cluster. " + POOL_DOC + _INHERITS),
            },
            required=("chief",),
            aliases={"worker": "workers", "ps": "parameter_servers", "reducers": "reduction_server"},
            doc="The worker pools: chief (pool 0), workers (1), parameter_servers or reduction_server (2), "
            "evaluator (3).",
        ),
        "scheduling": Obj(
            {
                "timeout": Duration(default="7d", vertex_default=True, examples=("24h",),
                                    doc="Longest the job may run (90s, 30m, 24h, 7d, 1h30m or seconds)."),
                "restart_job_on_worker_restart": Bool(default=False, doc="Restart every replica when one restarts."),
                "disable_retries": Bool(default=False,
                                        doc="Fail the job instead of retrying it after a replica fails repeatedly."),
                "strategy": Str(SCHEDULING_STRATEGIES, default="standard", vertex_default=True,
                                doc="standard (on-demand), spot (preemptible, cheaper) or flex_start (waits for "
                                "capacity)."),
                "max_wait": Duration(examples=("2h",), zero_ok=True,
                                     doc="flex_start only: how long to wait for capacity before giving up; 0 waits "
                                     "indefinitely; left out, Vertex waits 24 hours."),
                "fallback": ListOf(
                    Obj({"region": Str(), "machine_type": Str(), "accelerator": Str(), "accelerator_count": Int(1)}),
                    examples=([{"region": "europe-west4"}],),
                    vtrain_only="only `submit --recover` reads it",
                    doc="For `submit --recover`: alternatives tried in order after a stock-out or preemption, "
                    "each {region, machine_type, accelerator, accelerator_count}, validated like the primary.",
                ),
            },
            doc="How Vertex AI schedules and retries the job.",
        ),
        "reservation": reservation_node("Compute Engine reservation every pool consumes (a pool's own "
                                        "`reservation` replaces it)."),
        "diloco": DILOCO_SCHEMA,
        "dtensor": DTENSOR_SCHEMA,
        "tuning": TUNING_SCHEMA,
        "model": MODEL_SCHEMA,
        "vertex": Obj(
            {
                "job_spec": RawFields(examples=({"models": ["projects/my-project/locations/us-central1/models/m"]},),
                                      doc="CustomJobSpec fields in the REST API's camelCase, merged into the "
                                      "request's jobSpec (each trial's, for a tuning job)."),
                "worker_pool": RawFields(examples=({},),
                                         vtrain_only="no WorkerPoolSpec field of the installed aiplatform_v1 is "
                                         "left to it yet: vtrain's keys set them all",
                                         doc="WorkerPoolSpec fields in camelCase, merged into every pool."),
            },
            doc="Passthrough for Vertex AI fields vtrain has no key for yet: checked against the installed "
            "google-cloud-aiplatform (an unknown name or a field a vtrain key sets is refused), then sent as written.",
        ),
    },
    required=("name", "trainer", "cluster"),
)


#: CustomJob.jobSpec's proto field number (its fields are written before labels, 11, and encryptionSpec, 12).
_JOB_SPEC_NUMBER = 4


def plain_fields() -> tuple[tuple[str, str], ...]:
    """The plain Vertex fields, (key, REST path of the CustomJob body), in the order MessageToDict writes
    them: read from the nodes' `rest` declarations, so a plain field is its node and its model attribute."""
    def order(node: Declared) -> tuple[int, int]:  # CustomJob's fields; jobSpec's own within it
        return (_JOB_SPEC_NUMBER, node.rest_number) if node.rest.startswith("jobSpec.") else (node.rest_number, 0)

    rows = sorted((order(node), key, node.rest) for key, node in JOB_SCHEMA.fields.items() if node.rest)
    return tuple((key, path) for _, key, path in rows)


def check_job(data: Any, positions: Positions) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Check raw job-file data against the schema; return (normalized data or None, problems)."""
    ck = Checker(positions)
    if data is None:
        ck.add((), "the job file is empty; it needs at least name, trainer and cluster")
        return None, ck.problems
    out = JOB_SCHEMA.check(data, (), ck)
    return out, ck.problems
