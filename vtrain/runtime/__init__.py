"""Inside the trainer: the distribution strategy and output dirs that fit this replica.

The launcher (Vertex AI, or `vtrain local`) describes the replica only through
environment variables; this module turns them into a `tf.distribute` strategy
and into the directories each replica may write. The decision is a pure
function of the environment (:func:`choose_strategy`), tested for every
branch; TensorFlow is imported lazily, only when a strategy is built, so
`import vtrain.runtime` stays cheap and needs nothing but the standard library.

    from vtrain import runtime
    strategy = runtime.strategy()          # first thing in the trainer
    keras = runtime.keras()                # tf_keras under multi-worker, see below
    runtime.mixed_precision()              # optional: the 16-bit policy this hardware runs fast
    with strategy.scope():
        model = ...
    model.fit(..., callbacks=[runtime.backup_and_restore(keras)])
    runtime.save_model(model)              # chief -> model_dir(), others -> scratch
    runtime.report_metric("loss", 0.25, step=3)   # a tuning trial's metric (cloudml-hypertune's format),
                                                  # and the experiment run's (runtime.experiment_run())
    model.fit(..., callbacks=[runtime.profile_callback(keras, global_batch, dataset)])  # or runtime.profile(model, opt)

Signals read (all set by the launcher):
  TF_CONFIG            the cluster; only present when the job has >1 replica.
                       Keys chief (or the older `master`), worker, ps; an
                       `evaluator` task is not in the cluster.
  CLUSTER_SPEC         Vertex's own description; used for the task when TF_CONFIG
                       is absent (a one-replica job).
  VTRAIN_DISTRIBUTION_STRATEGY   auto (default) | one_device | mirrored |
                       multi_worker_mirrored | parameter_server | tpu | diloco
                       (each learner standalone; :mod:`.diloco` exchanges with the syncer) |
                       dtensor (no tf.distribute strategy: call runtime.dtensor_mesh()) |
                       horovod (the default strategy in each rank: vtrain.horovod reduces).
  VTRAIN_DTENSOR_MESH  the DTensor mesh, e.g. batch=2,model=4 (:mod:`.dtensor`).
  VTRAIN_MIXED_PRECISION         overrides mixed_precision(policy): auto | mixed_bfloat16 |
                       mixed_float16 | float32 (see :mod:`.precision`).
  VTRAIN_COLLECTIVE_TIMEOUT      seconds before a collective gives up (default 300;
                       0 disables). A dead peer then fails the job instead of hanging it.
  AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR, CLOUD_ML_JOB_ID.
  VTRAIN_PROFILE_DIR   where the rehearsal profile goes (default: the run folder, see :mod:`.profile_record`;
                       0 or off: nowhere). :mod:`.profiler` measures it for `vtrain estimate --from-run`.
  VTRAIN_RESTART_COUNT, VTRAIN_JOB_ATTEMPT, VTRAIN_STATUS_FILE   set by `vtrain local` to say how
                       often this replica was restarted and where to report steps; see
                       :mod:`.recovery` (resume after a restart: StepCheckpoints, step_reporter).
TPU detection (:func:`detect_tpu`):
  * TPU Node (Vertex `cloud-tpu` machines, GKE): TPU_CONFIG (JSON with
    tpu_node_name/project/zone), TPU_NAME or KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS;
    TPUClusterResolver() reads these itself.
  * TPU VM (Vertex `ct5lp-hightpu-*` etc.): the TPU is attached to the VM, so
    TPUClusterResolver(tpu="local"). Seen as libtpu (/lib/libtpu.so as Vertex's
    custom-container instructions require, TPU_LIBRARY_PATH, or the `libtpu`
    Python package) together with TPU device nodes (/dev/accel* on v2-v4,
    /dev/vfio/<n> on v5e and later) or TPU_ACCELERATOR_TYPE in the environment.
Outputs a launcher can check (:func:`save_model`): the chief saves the model to
model_dir() with weights.json (sha256 of the final weights) beside it. Other replicas
must save too (saving runs collectives) but into <parent of model_dir>/workertemp/
<type>-<index>/, where the model is deleted and only weights.json stays: equal sha256
everywhere proves the all-reduce happened. Under parameter servers the worker and ps
replicas only serve (strategy() never returns for them; the job ends with the
primary replica), so only the chief writes.

The package is split by what each part needs: :mod:`.decision` (pure, standard library only),
:mod:`.tfsetup` (builds the strategy and picks Keras; imports TensorFlow lazily),
:mod:`.outputs` (directories, saving, checkpoints), :mod:`.precision` (the mixed-precision
policy: a pure decision, then Keras), :mod:`.restarts` and :mod:`.recovery` (restart counts, step
reports, checkpoints that survive SIGTERM), :mod:`.status` (the step-report file's format, its
writer and the launcher's reader), :mod:`.diloco` (a DiLoCo learner's side) and
:mod:`.hypertune` (reporting a tuning trial's metric, standard library only), :mod:`.profiler` (the
rehearsal's measurements for `vtrain estimate --from-run`) and :mod:`.profile_record` (their file:
where, format, hash; standard library only), and for model
parallelism :mod:`.dtensor` (``dtensor_mesh()``: the mesh and DTensor's multi-client set-up),
:mod:`.dtensor_env` (its pure part), :mod:`.dtensor_layouts` (layouts, sharded variables and input)
and :mod:`.dtensor_checkpoint` (per-client sharded checkpoints). It ships to replicas
with nothing else of vtrain but :mod:`vtrain.errors`, :mod:`vtrain.constants`, :mod:`vtrain.strategies`,
:mod:`vtrain.foreign`, :mod:`vtrain.diloco` and :mod:`vtrain.horovod` (Horovod's API for
`distribution_strategy: horovod`).
"""

from __future__ import annotations

from vtrain.errors import RuntimeMismatch
from vtrain.runtime.decision import (
    DEFAULT_COLLECTIVE_TIMEOUT,
    Decision,
    Info,
    choose_strategy,
    decide,
    detect_tpu,
)
from vtrain.runtime.diloco import Diloco, diloco, diloco_callback, learner_shard
from vtrain.runtime.dtensor import MESH_ENV, dtensor_mesh
from vtrain.runtime.dtensor_checkpoint import ShardedCheckpoint
from vtrain.runtime.experiment_log import experiment_run
from vtrain.runtime.hypertune import metric_reporter, read_reports, report_metric, trial_id
from vtrain.runtime.outputs import (
    LOCAL_OUTPUT_DIR,
    WEIGHTS_FILE,
    Checkpoints,
    backup_and_restore,
    checkpoint_dir,
    join,
    model_dir,
    remove_scratch,
    save_model,
    scratch_dir,
    tensorboard_dir,
    weights_checksum,
    write_dir,
    write_weights_record,
)
from vtrain.runtime.precision import (
    PrecisionDecision,
    choose_precision,
    loss_scale_optimizer,
    mixed_precision,
    scale_loss,
    unscale_gradients,
)
from vtrain.runtime.profiler import Profile, profile, profile_callback
from vtrain.runtime.recovery import StepCheckpoints, preemption_handler, report_step, step_reporter
from vtrain.runtime.restarts import job_attempt, restart_count
from vtrain.runtime.tfsetup import info, is_chief, keras, strategy

__all__ = [
    "DEFAULT_COLLECTIVE_TIMEOUT",
    "MESH_ENV",
    "ShardedCheckpoint",
    "LOCAL_OUTPUT_DIR",
    "WEIGHTS_FILE",
    "Checkpoints",
    "Decision",
    "Diloco",
    "Info",
    "PrecisionDecision",
    "Profile",
    "RuntimeMismatch",
    "StepCheckpoints",
    "backup_and_restore",
    "checkpoint_dir",
    "choose_precision",
    "choose_strategy",
    "decide",
    "detect_tpu",
    "diloco",
    "diloco_callback",
    "dtensor_mesh",
    "experiment_run",
    "info",
    "is_chief",
    "job_attempt",
    "join",
    "keras",
    "loss_scale_optimizer",
    "mixed_precision",
    "learner_shard",
    "model_dir",
    "preemption_handler",
    "profile",
    "profile_callback",
    "metric_reporter",
    "read_reports",
    "report_metric",
    "remove_scratch",
    "report_step",
    "restart_count",
    "save_model",
    "scale_loss",
    "scratch_dir",
    "step_reporter",
    "strategy",
    "tensorboard_dir",
    "unscale_gradients",
    "trial_id",
    "weights_checksum",
    "write_dir",
    "write_weights_record",
]
