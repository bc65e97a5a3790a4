"""Which numeric format a pool's hardware trains fastest in, and what switching would do.

TensorFlow's mixed-precision guide (https://www.tensorflow.org/guide/mixed_precision): 16-bit
compute with fp32 variables runs best on NVIDIA GPUs of compute capability ≥ 7.0 (tensor cores)
and on TPUs; bfloat16 needs compute capability ≥ 8.0 on GPUs; float16 needs loss scaling so small
gradients do not flush to zero (Keras wraps the optimizer in a LossScaleOptimizer under
``mixed_float16``); CPUs gain nothing. TPUs compute in bfloat16, whose 8-bit mantissa (7 bits
stored) is coarse: variables and accumulations (optimizer slots, the loss, batch-norm statistics,
softmax sums) must stay fp32, which Keras' ``mixed_bfloat16`` does.

``speedup_bound`` is an upper bound on compute speed-up of the matrix units, never a promise:
Volta/Turing fp16 tensor cores against fp32 CUDA cores ~8×; Ampere and later ~2× (TF already uses
TF32 tensor cores for fp32 matmuls there); P100 2× (fast fp16, no tensor cores); TPUs 1.6× (the
guide's measured gain). Real models see less: memory-bound ops do not speed up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from vtrain.estimate.memory import Device, MemoryNeed, activations_under, memory_need

TPU_CAUTION = (
    "bf16 keeps 8 bits of mantissa: keep variables and accumulators (optimizer slots, loss, "
    "batch-norm statistics, softmax sums) in fp32; Keras' mixed_bfloat16 does, hand-written casts may not"
)


@dataclass(frozen=True)
class PrecisionAdvice:
    """The policy the hardware supports natively and what it does to memory and step time."""

    device: str
    native: tuple[str, ...]  # precisions with native fast math here (fp32 always works)
    recommended: str  # fp32 | mixed_bf16 | mixed_fp16
    keras_policy: str
    loss_scaling: bool
    speedup_bound: float  # compute speed-up upper bound of `recommended` over fp32
    state_bytes: dict[str, float]  # precision -> state bytes per replica
    activation_bytes: dict[str, float | None]  # precision -> activations per replica
    caution: str | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _hardware(device: Device) -> tuple[tuple[str, ...], str, float, str]:
    """(native precisions, recommended, speed-up bound, reason) for one device."""
    from vtrain import catalog

    if device.kind == "tpu":
        return ("mixed_bf16",), "mixed_bf16", 1.6, "TPUs compute in bfloat16 natively; float16 is not supported"
    if device.kind == "gpu":
        capability = catalog.GPU_MEMORY.get(device.name, (0, (0, 0)))[1]
        cc = f"{capability[0]}.{capability[1]}"
        if capability >= (8, 0):
            return (
                ("mixed_bf16", "mixed_fp16"),
                "mixed_bf16",
                2.0,
                f"compute capability {cc}: bfloat16 tensor cores, no loss scaling needed",
            )
        if capability >= (7, 0):
            return (
                ("mixed_fp16",),
                "mixed_fp16",
                8.0,
                f"compute capability {cc}: float16 tensor cores but no bfloat16; float16 needs loss scaling",
            )
        if capability >= (6, 0) and device.name == "NVIDIA_TESLA_P100":
            return ("mixed_fp16",), "mixed_fp16", 2.0, f"compute capability {cc}: fast float16 math, no tensor cores"
        return (), "fp32", 1.0, f"compute capability {cc}: no fast 16-bit math; mixed precision only saves memory"
    return (), "fp32", 1.0, "CPUs run 16-bit math no faster than fp32 (often slower)"


def precision_advice(
    device: Device,
    params: int,
    optimizer: str,
    activations: float | None = None,
    activations_precision: str = "fp32",
) -> PrecisionAdvice:
    """Advice for one device; `activations` are as measured under `activations_precision`."""
    from vtrain.estimate.memory import KERAS_POLICY

    native, best, bound, reason = _hardware(device)
    needs: dict[str, MemoryNeed] = {
        p: memory_need(params, optimizer, p, activations_under(activations, activations_precision, p))
        for p in ("fp32", "mixed_bf16", "mixed_fp16")
    }
    return PrecisionAdvice(
        device=device.name,
        native=native,
        recommended=best,
        keras_policy=KERAS_POLICY[best],
        loss_scaling=best == "mixed_fp16",
        speedup_bound=bound,
        state_bytes={p: n.state for p, n in needs.items()},
        activation_bytes={p: n.activations for p, n in needs.items()},
        caution=TPU_CAUTION if device.kind == "tpu" else None,
        reason=reason,
    )
