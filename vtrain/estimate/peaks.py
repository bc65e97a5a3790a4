"""Peak math rates of the accelerators: what `estimate --from-run` turns a rehearsal's FLOPs into a
step time on the target with (at a stated utilisation). Hardware facts, not Vertex's, so not in the catalog."""

from __future__ import annotations

#: Peak dense math of one GPU in TFLOPS: (what a float32 model runs at: TF32 tensor cores on compute
#: capability >= 8.0, where TensorFlow enables TF32 by default; 16-bit tensor cores). NVIDIA's data sheets,
#: no sparsity, SXM parts where there are two; not re-checked in this session. `vtrain estimate --from-run`
#: turns a rehearsal's FLOPs into a step time on the target with it (at a stated utilisation).
GPU_PEAK_TFLOPS: dict[str, tuple[float, float]] = {
    "NVIDIA_TESLA_T4": (8.1, 65), "NVIDIA_TESLA_P4": (5.5, 5.5), "NVIDIA_TESLA_P100": (9.3, 18.7),
    "NVIDIA_TESLA_V100": (15.7, 125), "NVIDIA_TESLA_A100": (156, 312), "NVIDIA_A100_80GB": (156, 312),
    "NVIDIA_L4": (60, 121), "NVIDIA_H100_80GB": (494, 989), "NVIDIA_H100_MEGA_80GB": (494, 989),
    "NVIDIA_H200_141GB": (494, 989), "NVIDIA_B200": (1100, 2250), "NVIDIA_GB200": (1250, 2500),
}
#: Peak bfloat16 TFLOPS of one TPU chip by generation (v2 45, v3 123, v4 275, v5p 459, v5e 197,
#: v6e 918: Cloud TPU pages).
TPU_PEAK_TFLOPS: dict[str, float] = {"v2": 45, "v3": 123, "v4": 275, "v5p": 459, "v5e": 197, "v6e": 918}
