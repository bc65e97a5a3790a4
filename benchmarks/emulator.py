"""What does `vtrain local` cost over launching the processes by hand? Run by hand (not a test):

    python benchmarks/emulator.py [--runs 3] [--steps 40] [--epochs 3]

For chief + 2 workers training the keras template with MultiWorkerMirroredStrategy, it
measures, from the moment the command starts: the time to the chief's first training step,
and the steady steps/sec (epochs after the first). "vtrain local" is the full command
(load, validate, package, cached environment, supervise); "bare" is a script that only sets
TF_CONFIG (and the AIP_* dirs) and starts the three processes from the source tree. The
trainer is the keras template plus one callback that prints when the first batch ends.
It also times the first-time package install (sdists + environment) and the cached one.
Target: vtrain's launch overhead, with the environment cached, within 10% of bare.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "trainer_templates" / "keras"
FIRST = re.compile(r"BENCH first-step (\d+\.\d+)")
RATE = re.compile(r"epoch (\d+): ([\d.]+) steps/sec")

BENCH_MODULE = '''"""The keras template, plus a callback that prints the wall time at the end of the first batch."""
import time

from trainer import task

_throughput = task.throughput


def throughput(keras, steps, global_batch):
    base = _throughput(keras, steps, global_batch)

    class WithFirstStep(type(base)):
        def on_train_batch_end(self, batch, logs=None):
            if not getattr(self, "_seen", False):
                self._seen = True
                print(f"BENCH first-step {time.time():.3f}", flush=True)

    return WithFirstStep()


task.throughput = throughput

if __name__ == "__main__":
    task.main()
'''


def make_trainer(root: Path) -> Path:
    trainer = root / "trainer-src"
    shutil.copytree(TEMPLATE, trainer)
    (trainer / "trainer" / "bench.py").write_text(BENCH_MODULE, encoding="utf-8")
    return trainer


def job_file(root: Path, trainer: Path, args: list[str]) -> Path:
    path = root / "bench.yaml"
    path.write_text(
        "name: bench\n"
        f"trainer:\n  package: {trainer}\n  module: trainer.bench\n  args: {json.dumps(args)}\n"
        "distribution_strategy: multi_worker_mirrored\n"
        "cluster:\n  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 2}\n",
        encoding="utf-8",
    )
    return path


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def parse(chief_log: str, start: float) -> tuple[float, float]:
    first = FIRST.search(chief_log)
    rates = [float(m.group(2)) for m in RATE.finditer(chief_log) if int(m.group(1)) > 1]
    if first is None or not rates:
        raise RuntimeError("no first step / steps/sec in the chief's log:\n" + chief_log[-2000:])
    return float(first.group(1)) - start, statistics.mean(rates)


def run_vtrain(job: Path, out: Path, cache: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "VTRAIN_CACHE_DIR": str(cache)}
    start = time.time()
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(job), "--output-dir", str(out)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    chief = "\n".join(line for line in done.stdout.splitlines() if line.startswith("[chief-0]"))
    return parse(chief, start)


def run_bare(trainer: Path, out: Path, args: list[str]) -> tuple[float, float]:
    """Only what TensorFlow needs: TF_CONFIG and the output dirs, three processes, source on PYTHONPATH."""
    start = time.time()
    ports = free_ports(3)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{p}" for p in ports[1:]]}
    tasks = [("chief", 0), ("worker", 0), ("worker", 1)]
    procs = []
    logs = []
    for kind, index in tasks:
        env = {**os.environ, "PYTHONPATH": f"{trainer}:{REPO}", "PYTHONUNBUFFERED": "1",
               "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}}),
               "AIP_MODEL_DIR": f"{out}/model/", "AIP_CHECKPOINT_DIR": f"{out}/checkpoints/",
               "AIP_TENSORBOARD_LOG_DIR": f"{out}/logs/", "VTRAIN_DISTRIBUTION_STRATEGY": "multi_worker_mirrored"}
        log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - read back after the run
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, "-m", "trainer.bench", *args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT, cwd=trainer))
    codes = [p.wait() for p in procs]
    logs[0].seek(0)
    chief = logs[0].read()
    if any(codes):
        raise RuntimeError(f"bare launch failed {codes}:\n{chief[-3000:]}")
    return parse(chief, start)


def time_install(trainer: Path, root: Path) -> tuple[float, float, float]:
    """(sdists built, environment installed, both again with the cache warm) in seconds."""
    sys.path.insert(0, str(REPO))
    from vtrain.local import envcache as localpkg
    from vtrain.trainer import packaging
    from vtrain.trainer.staging import uri_to_path

    cache = root / "install-cache"
    (cache / "sdists").mkdir(parents=True)

    def once() -> tuple[float, float]:
        t0 = time.perf_counter()
        staged = packaging.build_and_stage(trainer, str(cache / "sdists"), "trainer.bench", progress=False)
        t1 = time.perf_counter()
        localpkg.prepare_env([p for p in (uri_to_path(s.uri) for s in staged) if p], cache)
        return t1 - t0, time.perf_counter() - t1

    build, install = once()
    warm = sum(once())
    return build, install, warm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    opts = ap.parse_args()
    args = [f"--epochs={opts.epochs}", f"--steps-per-epoch={opts.steps}", "--batch-size=64"]
    with tempfile.TemporaryDirectory(prefix="vtrain-bench-") as tmp:
        root = Path(tmp)
        trainer = make_trainer(root)
        job = job_file(root, trainer, args)
        build, install, warm = time_install(trainer, root)
        print(f"first-time install: sdists built {build:.2f} s + environment {install:.2f} s; "
              f"cached: {warm:.3f} s")
        cache = root / "cache"
        run_vtrain(job, root / "warm-up", cache)  # fills this cache: the runs below are all cached
        results: dict[str, list[tuple[float, float]]] = {"vtrain local": [], "bare": []}
        for i in range(opts.runs):  # interleaved, so drift in machine load hits both alike
            results["vtrain local"].append(run_vtrain(job, root / f"v{i}", cache))
            results["bare"].append(run_bare(trainer, root / f"b{i}", args))
        print(f"chief + 2 workers, keras template, {opts.steps} steps/epoch, {opts.runs} runs each (median):")
        med = {}
        for name, runs in results.items():
            first = statistics.median(r[0] for r in runs)
            rate = statistics.median(r[1] for r in runs)
            med[name] = first
            print(f"  {name:13s} first step after {first:6.2f} s   {rate:6.1f} steps/sec   "
                  f"(runs: {', '.join(f'{r[0]:.2f}' for r in runs)})")
        overhead = med["vtrain local"] / med["bare"] - 1
        print(f"vtrain launch overhead: {overhead * 100:+.1f}% ({med['vtrain local'] - med['bare']:+.2f} s); "
              f"target within +10%: {'met' if overhead <= 0.10 else 'NOT met'}")


if __name__ == "__main__":
    main()
