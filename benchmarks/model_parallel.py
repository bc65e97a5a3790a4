"""Data vs tensor parallelism with DTensor on CPU, run by hand: `python benchmarks/model_parallel.py`.

The model-parallel template's MLP block (features F, hidden H, global batch B) trained with SGD on
meshes {batch: 4, model: 1}, {batch: 2, model: 2} and {batch: 1, model: 4}: 4 logical CPU devices in
one process (--processes 1) or 2 processes x 2 (--processes 2, TF_CONFIG on 127.0.0.1). Each mesh runs
in its own process(es) (DTensor is initialised once per process) and reports steps/s after a warm-up,
the weight bytes one device holds, and the bytes each device exchanges per step.

Bytes exchanged are computed from the layouts, not counted on the wire (DTensor exposes no collective
byte counter): a ring all-reduce of S bytes among n devices moves 2(n-1)/n x S per device. Per step:
two all-reduces of an activation [B/batch, F] over `model` (the block's output partial sums forward,
the gradient of its input backward) and one all-reduce over `batch` of every weight's local piece
(the gradient average). On CPUs the "network" is memory: the steps/s say what the split costs in
compute and copies here, not what NCCL or ICI would do.

Beside them, what `vtrain estimate` predicts for the same mesh (vtrain.estimate.dtensor.mesh_plan):
the weights / model per device, and its per-step bytes (the gradient all-reduce over `batch` plus an
FSDP-style gather/reduce-scatter of the weights over `model`; the template's Megatron split moves
activations instead, so the two columns differ by design where `model` > 1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vtrain.local.ports import free_ports

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "trainer_templates" / "model-parallel"
MESHES = ("batch=4,model=1", "batch=2,model=2", "batch=1,model=4")


def exchanged_bytes(batch: int, model: int, global_batch: int, features: int, hidden: int) -> int:
    """Bytes one device sends (= receives) per step under ring all-reduces, from the layouts."""
    def ring(size_bytes: float, n: int) -> float:
        return 2 * (n - 1) / n * size_bytes if n > 1 else 0.0

    activation = 4 * (global_batch // batch) * features
    local_weights = 4 * ((2 * features * hidden + hidden) / model + 2 * features + 1)
    return int(2 * ring(activation, model) + ring(local_weights, batch))


def child(mesh_text: str, args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(TEMPLATE))
    from vtrain import runtime

    mesh = runtime.dtensor_mesh(mesh_text)
    import tensorflow as tf
    from tensorflow.experimental import dtensor
    from trainer import data
    from trainer.model import TensorParallelMLP

    from vtrain.runtime import dtensor_layouts as layouts

    model = TensorParallelMLP(mesh, args.features, args.hidden, seed=1)
    variables = list(model.named().values())
    start, stop = layouts.client_rows(mesh, args.global_batch)

    @tf.function
    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        for v, g in zip(variables, tape.gradient(loss, variables), strict=True):
            v.assign_sub(0.01 * g)
        return loss

    x, y = data.rows(1, 0, start, stop, args.features)
    batch = (layouts.pack_batch(x, mesh, args.global_batch), layouts.pack_batch(y, mesh, args.global_batch))
    for _ in range(args.warmup):
        loss = step(*batch)
    float(dtensor.unpack(loss)[0].numpy())
    began = time.perf_counter()
    for _ in range(args.steps):
        loss = step(*batch)
    float(dtensor.unpack(loss)[0].numpy())  # waits for the last step
    seconds = time.perf_counter() - began
    dims = dict(runtime.dtensor.mesh_dims(mesh))
    b, m = dims.get("batch", 1), dims.get("model", 1)
    return {
        "mesh": mesh_text,
        "client": runtime.dtensor.client_id(),
        "steps_per_s": args.steps / seconds,
        "device_weight_bytes": max(layouts.device_bytes(variables).values()),
        "exchanged_bytes_per_device": exchanged_bytes(b, m, args.global_batch, args.features, args.hidden),
    }


def run_mesh(mesh_text: str, args: argparse.Namespace) -> dict[str, Any]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CONFIG", "CLUSTER_SPEC", "DTENSOR_"))}
    base.update(PYTHONPATH=os.pathsep.join([str(REPO), str(TEMPLATE)]), TF_CPP_MIN_LOG_LEVEL="2")
    argv = [sys.executable, __file__, "--child", mesh_text, f"--features={args.features}",
            f"--hidden={args.hidden}", f"--global-batch={args.global_batch}", f"--steps={args.steps}",
            f"--warmup={args.warmup}"]  # fmt: skip
    envs = [base]
    if args.processes > 1:
        addrs = [f"127.0.0.1:{p}" for p in free_ports(args.processes)]
        cluster = {"chief": addrs[:1], "worker": addrs[1:]}
        tasks = [("chief", 0)] + [("worker", i) for i in range(args.processes - 1)]
        envs = [{**base, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": t, "index": i}})}
                for t, i in tasks]  # fmt: skip
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for env in envs]  # fmt: skip
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode:
            raise SystemExit(f"{mesh_text}: exit {p.returncode}\n{err[-3000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    chief = results[0]
    chief["steps_per_s"] = min(r["steps_per_s"] for r in results)  # the slowest client sets the pace
    return chief


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=1, choices=(1, 2, 4))
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return
    params = 2 * args.features * args.hidden + args.hidden + 2 * args.features + 1
    print(f"MLP block F={args.features} H={args.hidden} ({params} parameters, {4 * params} bytes), global batch "
          f"{args.global_batch}, 4 logical CPUs in {args.processes} process(es), {os.cpu_count()} cores")
    from vtrain.estimate.dtensor import mesh_plan
    from vtrain.runtime.dtensor_env import parse_mesh

    print(f"{'mesh':<18}{'steps/s':>9}{'weight bytes/device':>21}{'exchanged bytes/device/step':>29}"
          f"{'estimate: weights':>19}{'estimate: exchanged':>21}")  # fmt: skip
    for mesh_text in MESHES:
        r = run_mesh(mesh_text, args)
        plan = mesh_plan(parse_mesh(mesh_text), replicas=args.processes, devices_per_replica=4 // args.processes,
                         state_bytes=4 * params, activations=None, grad_bytes=4 * params, device_bytes=None,
                         nic_gbps=0)  # fmt: skip
        predicted = plan.batch_bytes_per_step + plan.model_bytes_per_step
        print(f"{mesh_text:<18}{r['steps_per_s']:>9.1f}{r['device_weight_bytes']:>21,}"
              f"{r['exchanged_bytes_per_device']:>29,}{plan.state_bytes_per_device:>19,.0f}{predicted:>21,.0f}")


if __name__ == "__main__":
    main()
