"""The DTensor GPU (NCCL) path, prepared for a GPU machine: `python benchmarks/gpu_check.py --dtensor`.

Never part of CI; without a GPU it stops at once with a message (exit 2): the CPU path is covered by
tests/runtime/test_dtensor.py. Each case runs the model-parallel template in fresh processes (DTensor
initialises once per process), TF32 off (NVIDIA_TF32_OVERRIDE=0) so float32 losses are comparable:

1. reference: the unsharded model on the CPU (CUDA_VISIBLE_DEVICES=""), mesh batch=1,model=1.
2. gpu x1: the same on one GPU (runtime.dtensor_mesh() picks GPU and sets NCCL collectives).
3. with >= 2 GPUs: one process, mesh batch=1,model=N (tensor parallel over NCCL inside a replica);
   with >= 4: batch=2,model=N/2; and 2 processes, half the GPUs each (multi-client NCCL, DTENSOR_*
   from a hand-built TF_CONFIG on 127.0.0.1), mesh batch=2,model=N/2.
Every case must match the reference's per-step losses within --rtol (default 1e-3) and every client
must end with the same weights checksum. Then steps/s of the bare MLP step on each GPU mesh at a
larger size (benchmarks/model_parallel.py's child: no input pipeline in the timed loop).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "trainer_templates" / "model-parallel"
ARGS = ["--epochs=2", "--steps-per-epoch=10", "--checkpoint-every=10", "--num-features=64", "--hidden=512",
        "--learning-rate=0.01"]


def gpu_count() -> int:
    probe = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, check=True,
    )  # fmt: skip
    return int(probe.stdout.strip().splitlines()[-1])


def _ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_case(name: str, mesh: str, batch_size: int, visible: list[str], out: Path) -> dict[str, Any]:
    """The template as len(visible) processes, process i seeing GPUs visible[i]; the records of all."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CONFIG", "CLUSTER_SPEC", "DTENSOR_",
                                                                       "VTRAIN_", "AIP_"))}  # fmt: skip
    base.update(PYTHONPATH=os.pathsep.join([str(REPO), str(TEMPLATE)]), TF_CPP_MIN_LOG_LEVEL="2",
                NVIDIA_TF32_OVERRIDE="0", AIP_MODEL_DIR=str(out / "model"), AIP_CHECKPOINT_DIR=str(out / "ckpt"))
    addrs = [f"127.0.0.1:{p}" for p in _ports(len(visible))] if len(visible) > 1 else []
    procs = []
    for i, devices in enumerate(visible):
        env = {**base, "CUDA_VISIBLE_DEVICES": devices}
        if addrs:
            task = {"type": "chief" if i == 0 else "worker", "index": 0 if i == 0 else i - 1}
            env["TF_CONFIG"] = json.dumps({"cluster": {"chief": addrs[:1], "worker": addrs[1:]}, "task": task})
        argv = [sys.executable, "-m", "trainer.task", f"--mesh={mesh}", f"--batch-size={batch_size}", *ARGS]
        procs.append(subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))  # fmt: skip
    logs = [p.communicate(timeout=540)[0] for p in procs]
    if any(p.returncode for p in procs):
        return {"case": name, "mesh": mesh, "error": "\n".join(log[-1500:] for log in logs)}
    paths = [out / "model" / "weights.json"] + [out / "workertemp" / f"worker-{i}" / "weights.json"
                                                 for i in range(len(visible) - 1)]  # fmt: skip
    records = [json.loads(p.read_text()) for p in paths]
    on_gpu = all("GPU" in d for r in records for d in r["device_bytes"])
    return {"case": name, "mesh": mesh, "records": records, "on_gpu": on_gpu}


def speed(mesh: str, devices: str) -> str:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "model_parallel.py"), "--child", mesh, "--features=2048",
         "--hidden=8192", "--global-batch=512", "--steps=50", "--warmup=10"],
        capture_output=True, text=True, timeout=540,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TEMPLATE)]), "TF_CPP_MIN_LOG_LEVEL": "2",
             "NVIDIA_TF32_OVERRIDE": "0", "CUDA_VISIBLE_DEVICES": devices},
    )  # fmt: skip
    if done.returncode:
        return f"FAILED: {done.stderr.strip().splitlines()[-1:]}"
    r = json.loads(done.stdout.strip().splitlines()[-1])
    return f"{r['steps_per_s']:.1f} steps/s, {r['device_weight_bytes']:,} weight bytes/device"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    gpus = gpu_count()
    if not gpus:
        print("NO GPU VISIBLE: the DTensor GPU (NCCL) check needs a GPU machine; nothing was run. "
              "The CPU path is tested by tests/runtime/test_dtensor.py.")  # fmt: skip
        return 2
    ids = [str(i) for i in range(gpus)]
    cases = [("reference (CPU)", "batch=1,model=1", 16, [""]), ("gpu x1", "batch=1,model=1", 16, ["0"])]
    if gpus >= 2:
        cases.append((f"1 process, {gpus} GPUs", f"batch=1,model={gpus}", 16, [",".join(ids)]))
    if gpus >= 4 and gpus % 2 == 0:
        half = gpus // 2
        cases.append((f"1 process, {gpus} GPUs", f"batch=2,model={half}", 8, [",".join(ids)]))
        cases.append((f"2 processes x {half} GPUs", f"batch=2,model={half}", 8,
                      [",".join(ids[:half]), ",".join(ids[half:])]))  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        results = [run_case(*case, Path(tmp) / str(i)) for i, case in enumerate(cases)]
    reference = results[0].get("records", [{}])[0].get("losses")
    failed = False
    print(f"{gpus} GPU(s) visible; per-step losses against the CPU reference (rtol {args.rtol})")
    for r in results:
        if "error" in r or reference is None:
            print(f"{r['case']:<26}{r['mesh']:<18} FAILED\n{r.get('error', 'no reference')}")
            failed = True
            continue
        losses = r["records"][0]["losses"]
        worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, reference, strict=True))
        same = len({rec["sha256"] for rec in r["records"]}) == 1
        ok = worst <= args.rtol and same and (r["on_gpu"] or r is results[0])
        failed |= not ok
        print(f"{r['case']:<26}{r['mesh']:<18} worst rel. loss error {worst:.2e}, clients agree: {same}, "
              f"on GPU: {r['on_gpu']} -> {'ok' if ok else 'FAILED'}")  # fmt: skip
    for _, mesh, _, visible in cases[1:]:
        print(f"speed {mesh:<18} {speed(mesh, visible[0]) if len(visible) == 1 else '(single-process only)'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"gpus": gpus, "results": results}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
