"""The job file's shape (version 1), checked on the raw YAML before any object is built.

Every problem is collected, never just the first: unknown keys get the nearest
valid key suggested, wrong types say what was expected. What passes comes out
normalized (durations in seconds, enum words lower-case, env values as text),
ready for :mod:`vtrain.jobfile.model` to turn into dataclasses.

Each key is declared once, here (or in :mod:`vtrain.jobfile.schema_blocks`): its shape, and on the
same node its doc, default and examples, which the JSON Schema and the manual's reference table
are generated from.
"""

from __future__ import annotations

from typing import Any

from vtrain import catalog
from vtrain.constants import (
    DEFAULT_REGION,
    MAX_ENV,
    MAX_LABELS,
    MAX_PACKAGE_URIS,
    SCHEDULING_STRATEGIES,
    STRATEGIES,
    STRATEGY_ENV,
)
from vtrain.errors import Problem
from vtrain.jobfile.model import DEFAULT_PS_MACHINE
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
from vtrain.jobfile.schema_blocks import (  # noqa: F401 - the blocks' words, also reachable from here
    BOOT_DISK_TYPES,
    DILOCO_SCHEMA,
    DTENSOR_SCHEMA,
    IMAGE_EXAMPLES,
    MODEL_SCHEMA,
    POOL_DOC,
    RESERVATION_AFFINITIES,
    TUNING_ALGORITHMS,
    TUNING_EARLY_STOPPING,
    TUNING_GOALS,
    TUNING_MEASUREMENTS,
    TUNING_PARAMETER_TYPES,
    TUNING_SCALES,
    TUNING_SCHEMA,
    container_node,
    pool,
    reservation_node,
)
from vtrain.jobfile.yamlpos import Positions

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
                "max_wait": Duration(examples=("2h",),
                                     doc="flex_start only: how long to wait for capacity before giving up."),
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
