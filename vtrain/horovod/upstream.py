"""Horovod v0.28.1 as vtrain.horovod's specification: its public TF2 names and its TF2 tests, each accounted for.

* :data:`API`: every public name of ``horovod.tensorflow``, ``horovod.tensorflow.keras`` and its
  ``callbacks`` at v0.28.1; each is implemented by vtrain.horovod or refused with its reason
  (:mod:`vtrain.horovod.unsupported`). A test holds both directions.
* :data:`COVERED`: each test of Horovod's ``test/parallel/test_tensorflow.py`` and
  ``test_tensorflow2_keras.py`` that vtrain.horovod passes, by the name of the project's own check of the
  same behaviour (``tests/data/trainers/horovod/trainer/conformance.py``, run on 2 ranks as a 2-replica job
  runs them; the tests are Horovod's, the checks are written for vtrain, none copied).
* :data:`LEFT_OUT`: the one list of the tests left out, each with its reason: a GPU per rank, or a name of
  :data:`~vtrain.horovod.unsupported.REASONS` / :data:`~vtrain.horovod.unsupported.ARGUMENTS`, which the
  Horovod guide's table of what is not there is generated from (docs/generate.py), so the two cannot drift.
"""

from __future__ import annotations

VERSION = "0.28.1"
TF = "test_tensorflow.py"
KERAS = "test_tensorflow2_keras.py"
#: How many test functions each file has at v0.28.1 (a parameterized test counts once).
TEST_COUNTS = {TF: 143, KERAS: 11}

#: A reason that is not a refused name: the test runs its collectives on a GPU per rank.
GPU = "GPU"
GPU_WHY = "runs on a GPU per rank (CUDA and NCCL); the suite's ranks are CPU processes"

_MODULE, _KERAS, _CALLBACKS = "horovod.tensorflow", "horovod.tensorflow.keras", "horovod.tensorflow.keras.callbacks"
_COMMON = ("init", "shutdown", "is_initialized", "start_timeline", "stop_timeline", "size", "local_size",
           "cross_size", "rank", "local_rank", "cross_rank", "mpi_threads_supported", "mpi_enabled", "mpi_built",
           "gloo_enabled", "gloo_built", "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
           "ProcessSet", "global_process_set", "add_process_set", "remove_process_set", "Average", "Sum",
           "Compression", "elastic", "DistributedOptimizer", "broadcast_global_variables", "allreduce", "allgather",
           "broadcast", "reducescatter")
#: Horovod's public TF2 names at VERSION, by module.
API: dict[str, tuple[str, ...]] = {
    _MODULE: (*_COMMON, "is_homogeneous", "rank_op", "local_rank_op", "size_op", "local_size_op",
              "process_set_included_op", "Adasum", "Min", "Max", "Product", "join", "SyncBatchNormalization",
              "grouped_allreduce", "grouped_reducescatter", "grouped_allgather", "broadcast_", "alltoall",
              "allgather_object", "broadcast_object", "broadcast_object_fn", "broadcast_variables",
              "BroadcastGlobalVariablesHook", "DistributedGradientTape", "PartialDistributedGradientTape"),
    _KERAS: (*_COMMON, "callbacks", "load_model"),
    _CALLBACKS: ("BroadcastGlobalVariablesCallback", "MetricAverageCallback", "LearningRateScheduleCallback",
                 "LearningRateWarmupCallback", "BestModelCheckpoint"),
}
#: Where vtrain.horovod has each of Horovod's modules.
MODULES = {_MODULE: "vtrain.horovod.tensorflow", _KERAS: "vtrain.horovod.keras",
           _CALLBACKS: "vtrain.horovod.keras.callbacks"}


def _tf(*names: str) -> tuple[str, ...]:
    return tuple(f"{TF}::{name}" for name in names)


def _keras(*names: str) -> tuple[str, ...]:
    return tuple(f"{KERAS}::{name}" for name in names)


#: upstream test → the project's check that shows the same behaviour on 2 ranks.
COVERED: dict[str, str] = {
    **dict.fromkeys(_tf("test_horovod_rank", "test_horovod_size"), "rank_and_size"),
    **dict.fromkeys(_tf("test_horovod_rank_op", "test_horovod_local_rank_op", "test_horovod_size_op",
                        "test_horovod_local_size_op"), "rank_and_size_as_tensors"),
    **dict.fromkeys(_tf("test_horovod_allreduce_cpu"), "allreduce_sum"),
    **dict.fromkeys(_tf("test_horovod_allreduce_cpu_fused"), "allreduce_sum_in_one_function"),
    **dict.fromkeys(_tf("test_horovod_allreduce_average_cpu"), "allreduce_average"),
    **dict.fromkeys(_tf("test_horovod_allreduce_min_cpu"), "allreduce_min"),
    **dict.fromkeys(_tf("test_horovod_allreduce_max_cpu"), "allreduce_max"),
    **dict.fromkeys(_tf("test_horovod_allreduce_product_cpu"), "allreduce_product"),
    **dict.fromkeys(_tf("test_horovod_allreduce_cpu_prescale"), "allreduce_prescale"),
    **dict.fromkeys(_tf("test_horovod_allreduce_cpu_postscale"), "allreduce_postscale"),
    **dict.fromkeys(_tf("test_horovod_allreduce_indexed_slices_cpu"), "allreduce_sparse_sum"),
    **dict.fromkeys(_tf("test_horovod_allreduce_indexed_slices_average_cpu"), "allreduce_sparse_average"),
    **dict.fromkeys(_tf("test_horovod_allreduce_indexed_slices_op_error",
                        "test_horovod_allreduce_indexed_slices_prescale_postscale_error"), "allreduce_sparse_refusals"),
    **dict.fromkeys(_tf("test_horovod_allreduce_error"), "allreduce_shape_mismatch"),
    **dict.fromkeys(_tf("test_horovod_allreduce_type_error"), "allreduce_dtype_mismatch"),
    **dict.fromkeys(_tf("test_horovod_allreduce_grad_cpu", "test_horovod_allreduce_average_grad_cpu"),
                    "allreduce_gradient"),
    **dict.fromkeys(_tf("test_horovod_grouped_allreduce_cpu"), "grouped_allreduce_sum"),
    **dict.fromkeys(_tf("test_horovod_grouped_allreduce_average_cpu"), "grouped_allreduce_average"),
    **dict.fromkeys(_tf("test_horovod_grouped_allreduce_min_cpu", "test_horovod_grouped_allreduce_max_cpu",
                        "test_horovod_grouped_allreduce_product_cpu"), "grouped_allreduce_min_max_product"),
    **dict.fromkeys(_tf("test_horovod_grouped_allreduce_indexed_slices_cpu",
                        "test_horovod_grouped_allreduce_mixed_indexed_slices_cpu",
                        "test_horovod_grouped_allreduce_indexed_slices_average_cpu",
                        "test_horovod_grouped_allreduce_mixed_indexed_slices_average_cpu"),
                    "grouped_allreduce_sparse_and_mixed"),
    **dict.fromkeys(_tf("test_horovod_grouped_allreduce_indexed_slices_op_error",
                        "test_horovod_grouped_allreduce_mixed_indexed_slices_op_error"),
                    "grouped_allreduce_sparse_refusals"),
    **dict.fromkeys(_tf("test_horovod_grouped_allreduce_grad_cpu"), "grouped_allreduce_gradient"),
    **dict.fromkeys(_tf("test_horovod_allgather_cpu"), "allgather_every_dtype"),
    **dict.fromkeys(_tf("test_horovod_allgather_fused_cpu", "test_horovod_allgather_variable_size_fused_cpu"),
                    "allgather_in_one_function"),
    **dict.fromkeys(_tf("test_horovod_allgather_variable_size_cpu"), "allgather_ragged"),
    **dict.fromkeys(_tf("test_horovod_allgather_error"), "allgather_shape_mismatch"),
    **dict.fromkeys(_tf("test_horovod_allgather_type_error"), "allgather_dtype_mismatch"),
    **dict.fromkeys(_tf("test_horovod_allgather_grad_cpu"), "allgather_gradient"),
    **dict.fromkeys(_tf("test_horovod_grouped_allgather_cpu"), "grouped_allgather_every_dtype"),
    **dict.fromkeys(_tf("test_horovod_grouped_allgather_grad_cpu"), "grouped_allgather_gradient"),
    **dict.fromkeys(_tf("test_horovod_broadcast_cpu"), "broadcast_every_dtype_and_root"),
    **dict.fromkeys(_tf("test_horovod_broadcast_inplace_cpu", "test_horovod_broadcast_inplace_multiple_cpu"),
                    "broadcast_in_place"),
    **dict.fromkeys(_tf("test_horovod_broadcast_error"), "broadcast_shape_mismatch"),
    **dict.fromkeys(_tf("test_horovod_broadcast_type_error"), "broadcast_dtype_mismatch"),
    **dict.fromkeys(_tf("test_horovod_broadcast_rank_error"), "broadcast_root_mismatch"),
    **dict.fromkeys(_tf("test_horovod_broadcast_grad_cpu"), "broadcast_gradient"),
    **dict.fromkeys(_tf("test_horovod_broadcast_eager_mode_error"), "broadcast_global_variables_refused"),
    **dict.fromkeys(_tf("test_compression_fp16"), "fp16_compression"),
    **dict.fromkeys(_tf("test_broadcast_object"), "broadcast_object"),
    **dict.fromkeys(_tf("test_allgather_object"), "allgather_object"),
    **dict.fromkeys(_tf("test_partial_distributed_gradient_tape"), "partial_tape_keeps_local_gradients"),
    **dict.fromkeys(_keras("test_train_model_lr_schedule"), "fit_with_learning_rate_schedule"),
    **dict.fromkeys(_keras("test_sparse_as_dense"), "sparse_as_dense_step"),
    **dict.fromkeys(_keras("test_legacy_optimizer"), "legacy_optimizer_step"),
    **dict.fromkeys(_keras("test_from_config"), "optimizer_from_config"),
    **dict.fromkeys(_keras("test_broadcast_global_variables_callback_with_local_vars"),
                    "broadcast_callback_keeps_local_variables"),
}

_BPPS = "hvd.DistributedOptimizer(backward_passes_per_step>1)"
#: The one list of upstream tests left out: test → GPU, or the refused name (unsupported.REASONS/ARGUMENTS).
LEFT_OUT: dict[str, str] = {
    **dict.fromkeys(_tf(
        "test_gpu_required", "test_horovod_allreduce_indexed_slices_gpu",
        "test_horovod_allreduce_indexed_slices_average_gpu", "test_horovod_allreduce_gpu",
        "test_horovod_allreduce_average_gpu", "test_horovod_allreduce_min_gpu", "test_horovod_allreduce_max_gpu",
        "test_horovod_allreduce_product_gpu", "test_horovod_allreduce_gpu_fused", "test_horovod_allreduce_multi_gpu",
        "test_horovod_allreduce_gpu_prescale", "test_horovod_allreduce_gpu_postscale",
        "test_horovod_allreduce_cpu_gpu_error", "test_horovod_allreduce_grad_gpu",
        "test_horovod_allreduce_average_grad_gpu", "test_horovod_grouped_allreduce_gpu",
        "test_horovod_grouped_allreduce_indexed_slices_gpu", "test_horovod_grouped_allreduce_mixed_indexed_slices_gpu",
        "test_horovod_grouped_allreduce_average_gpu", "test_horovod_grouped_allreduce_min_gpu",
        "test_horovod_grouped_allreduce_max_gpu", "test_horovod_grouped_allreduce_product_gpu",
        "test_horovod_grouped_allreduce_indexed_slices_average_gpu",
        "test_horovod_grouped_allreduce_mixed_indexed_slices_average_gpu", "test_horovod_grouped_allreduce_grad_gpu",
        "test_horovod_allgather_gpu", "test_horovod_allgather_fused_gpu",
        "test_horovod_allgather_variable_size_fused_gpu",
        "test_horovod_allgather_variable_size_gpu", "test_horovod_allgather_grad_gpu", "test_horovod_broadcast_gpu",
        "test_horovod_broadcast_inplace_gpu", "test_horovod_broadcast_grad_gpu", "test_horovod_syncbn_gpu",
        "test_horovod_grouped_allgather_gpu"), GPU),
    **dict.fromkeys(_tf(
        "test_horovod_alltoall_cpu", "test_horovod_alltoall_gpu", "test_horovod_alltoall_equal_split_cpu",
        "test_horovod_alltoall_equal_split_gpu", "test_horovod_alltoall_empty_cpu", "test_horovod_alltoall_empty_gpu",
        "test_horovod_alltoall_one_rank_sends_nothing_cpu", "test_horovod_alltoall_one_rank_sends_nothing_gpu",
        "test_horovod_alltoall_one_rank_receives_nothing_cpu", "test_horovod_alltoall_one_rank_receives_nothing_gpu",
        "test_horovod_alltoall_zero_splits_cpu", "test_horovod_alltoall_zero_splits_gpu",
        "test_horovod_alltoall_type_error", "test_horovod_alltoall_equal_split_length_error",
        "test_horovod_alltoall_splits_error", "test_horovod_alltoall_rank_error", "test_horovod_alltoall_grad_cpu",
        "test_horovod_alltoall_grad_gpu", "test_horovod_alltoall_equal_split_grad_cpu",
        "test_horovod_alltoall_equal_split_grad_gpu", "test_model_parallel_model"), "alltoall"),
    **dict.fromkeys(_tf(
        "test_horovod_reducescatter_cpu", "test_horovod_reducescatter_cpu_prescale",
        "test_horovod_reducescatter_cpu_postscale", "test_horovod_reducescatter_cpu_fused",
        "test_horovod_reducescatter_cpu_uneven", "test_horovod_reducescatter_cpu_uneven_fused",
        "test_horovod_reducescatter_scalar_error", "test_horovod_reducescatter_gpu",
        "test_horovod_reducescatter_gpu_prescale", "test_horovod_reducescatter_gpu_postscale",
        "test_horovod_reducescatter_gpu_fused", "test_horovod_reducescatter_gpu_uneven",
        "test_horovod_reducescatter_gpu_uneven_fused", "test_horovod_reducescatter_error",
        "test_horovod_reducescatter_type_error", "test_horovod_reducescatter_grad_cpu",
        "test_horovod_reducescatter_grad_gpu"), "reducescatter"),
    **dict.fromkeys(_tf(
        "test_horovod_grouped_reducescatter_cpu", "test_horovod_grouped_reducescatter_cpu_prescale",
        "test_horovod_grouped_reducescatter_cpu_postscale", "test_horovod_grouped_reducescatter_scalar_error",
        "test_horovod_grouped_reducescatter_grad_cpu", "test_horovod_grouped_reducescatter_gpu",
        "test_horovod_grouped_reducescatter_gpu_prescale", "test_horovod_grouped_reducescatter_gpu_postscale"),
        "grouped_reducescatter"),
    **dict.fromkeys(_tf("test_horovod_broadcast_graph_mode"), "broadcast_global_variables"),
    **dict.fromkeys(_tf("test_broadcast_object_fn"), "broadcast_object_fn"),
    **dict.fromkeys(_tf("test_elastic_state") + _keras("test_elastic_state"), "elastic"),
    **dict.fromkeys(_tf("test_horovod_join_allreduce"), "join"),
    **dict.fromkeys(_tf("test_horovod_syncbn_cpu"), "SyncBatchNormalization"),
    **dict.fromkeys(_tf("test_local_gradient_aggregation", "test_local_gradient_aggregation_sparse") + _keras(
        "test_sparse_as_dense_with_grad_aggregation", "test_grad_aggregation_with_inf_grad",
        "test_gradient_aggregation", "test_gradient_aggregation_with_local_vars"), _BPPS),
    **dict.fromkeys(_keras("test_partial_distributed_optimizer"), "PartialDistributedOptimizer"),
}


def reason(key: str) -> str:
    """Why the tests left out for `key` are: GPU, or the refusal's own text."""
    from vtrain.horovod.unsupported import ARGUMENTS, REASONS

    return GPU_WHY if key == GPU else REASONS.get(key) or ARGUMENTS[key]


def _names(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "—"


def _short(test: str) -> str:
    """A test's name, with `(keras)` for test_tensorflow2_keras.py's (both files have a test_elastic_state)."""
    file, name = test.split("::", 1)
    return f"`{name}`" + (" (keras)" if file == KERAS else "")


def markdown(implemented: dict[str, set[str]]) -> str:
    """The Horovod guide's generated part: what of Horovod's API is there, what is not and why, and how its TF2
    tests are accounted for. `implemented`: the names each vtrain.horovod module has, by Horovod module."""
    from vtrain.horovod.unsupported import ARGUMENTS, REASONS

    lines = [f"### Horovod {VERSION}'s names", "",
             "| Horovod module | in vtrain.horovod | not there (below) |", "|---|---|---|"]
    for module, names in API.items():
        there = [n for n in names if n in implemented[module]]
        missing = [n for n in names if n not in implemented[module]]
        lines.append(f"| `{module}` → `{MODULES[module]}` | {_names(there)} | {_names(missing)} |")
    lines += ["", "Each of these stops the script **at the call** with `vtrain.errors.HorovodUnsupported` (also a "
              "`NotImplementedError`) saying why and what to do instead:", "",
              "| not there | why, and what to do instead |", "|---|---|"]
    lines += [f"| `hvd.{name}` | {why} |" for name, why in sorted(REASONS.items(), key=lambda kv: kv[0].lower())]
    lines += [f"| `{name}` | {why} |" for name, why in sorted(ARGUMENTS.items(), key=lambda kv: kv[0].lower())]
    total = sum(TEST_COUNTS.values())
    lines += ["", f"### Horovod {VERSION}'s TF2 tests", "",
              f"Horovod's `test/parallel/{TF}` ({TEST_COUNTS[TF]} tests) and `{KERAS}` ({TEST_COUNTS[KERAS]}) are "
              f"vtrain.horovod's specification: {len(COVERED)} of the {total} run as this project's own checks of "
              "the same behaviours on 2 ranks, in one 2-replica job under `vtrain local` "
              "(`tests/horovod/test_upstream.py`); the other "
              f"{len(LEFT_OUT)} are left out, each for a reason above or because it needs a GPU per rank.", "",
              "| left out because | tests |", "|---|---|"]
    by_reason: dict[str, list[str]] = {}
    for test, key in LEFT_OUT.items():
        by_reason.setdefault(key, []).append(test)
    for key, tests in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        why = GPU_WHY if key == GPU else f"`{'hvd.' + key if key in REASONS else key}` is not supported (above)"
        lines.append(f"| {why} | {len(tests)}: {', '.join(_short(t) for t in tests)} |")
    lines += ["", "| check on 2 ranks | Horovod's tests it covers |", "|---|---|"]
    by_check: dict[str, list[str]] = {}
    for test, check in COVERED.items():
        by_check.setdefault(check, []).append(test)
    lines += [f"| `{check}` | {', '.join(_short(t) for t in tests)} |" for check, tests in by_check.items()]
    return "\n".join(lines) + "\n"
