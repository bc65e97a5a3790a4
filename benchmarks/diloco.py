"""DiLoCo on CPU: quality vs synchronous data parallel, traffic vs ring all-reduce, a 2x slower learner,
a learner SIGKILLed half-way and restarted in place.

    flock /tmp/vtrain-heavy.lock .venv/bin/python benchmarks/diloco.py [--rounds 60] [--inner-steps 50]
    flock /tmp/vtrain-heavy.lock .venv/bin/python benchmarks/diloco.py --only fp32,hetero,allwait --step-ms 5
    flock /tmp/vtrain-heavy.lock .venv/bin/python benchmarks/diloco.py --only tune,dp,single,fp32   # ~15 min
    flock /tmp/vtrain-heavy.lock .venv/bin/python benchmarks/diloco.py --only fp32,dp --learners 2

Best against best (`--only tune`): a quality claim made at one setting says little, so DP, the single
learner and DiLoCo are each tuned on their own: the inner (Adam) learning rate over `--lr-grid` (DP,
single) and `--diloco-lr-grid` crossed with the outer lr/momentum pairs of `--outer-grid` (DiLoCo).
Each setting is picked by its loss on a validation set and scored on a separate test set
(`eval_loss`), so the pick is not graded on the examples it was picked by. Reported: the grids, each
method's best, the best DiLoCo against the best DP, and the best inner lr per outer setting.
`--learners` changes the learner count (and DP's global batch): the bytes saved against a ring
depend on it (2 (N-1)/N x H for fp32).

Real processes: the syncer is `python -m vtrain.diloco`; each learner is this script in `learner`
mode, a Keras MLP (26k parameters) trained with a custom loop and `vtrain.runtime.diloco`. The task is
a fixed random teacher network's 10-way labels (with 10% noise) on 64 features; each learner reads
its own shard. Baselines at the same examples: synchronous DP = one process with the 4x global batch
(the same maths as 4 all-reducing replicas), and a single learner (1/4 of the examples). Reported:
final eval loss, the share of the single→DP gap recovered, bytes per learner per step (measured by
the client) vs ring all-reduce, and utilisation (1 - waiting / wall time over all learners; also
without the first exchange, which waits for every learner's TensorFlow to start). On 2 shared cores a
learner's CPU step takes ~1.5 ms, so a round is ~75 ms and the exchange's fixed latency (~10 ms with 5
processes on 2 cores) weighs far more than in a real job, whose rounds last minutes: `--step-ms` pads
each step (sleeping, like a host whose accelerator computes) to show utilisation at longer rounds.
The overlap rows run with `overlap: true` (learners train on while the syncer merges).
The fault row: the last learner SIGKILLs itself mid-round half-way, is restarted at once (as Vertex
restarts a failed replica), rejoins with the global model and goes on from the global round's step.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BATCH, FEATURES, CLASSES = 32, 64, 10
LEARNERS = int(os.environ.get("DILOCO_BENCH_LEARNERS", "4"))  # --learners; the learners inherit it
LR = 2e-3  # the inner (Adam) learning rate when none is tuned


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf


def data(tf: Any, n: int, seed: int) -> tuple[Any, Any]:
    teacher = tf.random.stateless_normal((FEATURES, CLASSES), seed=(7, 7))
    hidden = tf.random.stateless_normal((FEATURES, FEATURES), seed=(8, 8)) / FEATURES ** 0.5
    x = tf.random.stateless_normal((n, FEATURES), seed=(seed, 1))
    logits = tf.tanh(x @ hidden) @ teacher * 2.0
    y = tf.argmax(logits, axis=1)
    noise = tf.random.stateless_uniform((n,), seed=(seed, 2)) < 0.1
    y = tf.where(noise, tf.random.stateless_uniform((n,), seed=(seed, 3), maxval=CLASSES, dtype=tf.int64), y)
    return x, y


def model_and_step(tf: Any, seed: int, lr: float = LR) -> tuple[Any, Any, Any]:
    import keras

    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(128, activation="relu"), keras.layers.Dense(CLASSES)])
    opt = keras.optimizers.Adam(lr)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    def evaluate() -> dict[str, float]:
        """Loss on a validation set (what the grids pick by) and on a separate test set (what is reported),
        so a setting tuned on one is not scored on the same examples."""
        out = {}
        for name, seed in (("val_loss", 998), ("eval_loss", 999)):
            x, y = data(tf, 20000, seed)
            out[name] = float(loss_fn(y, model(x, training=False)))
        return out

    return model, step, evaluate


def train(steps: int, batch: int, shard: int, shards: int, sync: Any = None, slow: float = 1.0,
          model_bits: Any = None, die_at: int = 0, step_ms: float = 0.0, hang_at: int = 0,
          lr: float = LR) -> dict[str, float]:
    tf = _tf()
    model, step, evaluate = model_bits or model_and_step(tf, 1, lr)
    first = 0
    if sync is not None:
        sync = sync(model)
        first = min(sync.rounds) * sync.every  # a restarted learner goes on from the global model's step
    x, y = data(tf, steps * batch, 100 + shard)
    for i in range(first, steps):
        if die_at and i == die_at:
            os.kill(os.getpid(), signal.SIGKILL)  # a real SIGKILL mid-round: its unsent steps are lost
        if hang_at and i == hang_at:
            os.kill(os.getpid(), signal.SIGSTOP)  # hung (heartbeats too) until the harness sends SIGCONT
        start = time.perf_counter()
        step(x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch])
        if step_ms:  # an accelerator step: the host waits, its CPU free for the others
            time.sleep(max(0.0, step_ms / 1000 - (time.perf_counter() - start)))
        if slow > 1:
            time.sleep((slow - 1) * (time.perf_counter() - start))
        if sync is not None:
            sync.step()
            if sync.stopped:  # a quorum finished: a straggler stops
                break
    if sync is not None:
        sync.finish()
    return evaluate()


def learner_main(args: argparse.Namespace) -> None:
    from vtrain import runtime

    holder: dict[str, Any] = {}

    def make(model: Any) -> Any:
        holder["sync"] = runtime.Diloco(model, examples_per_step=BATCH)
        return holder["sync"]

    losses = train(args.steps, BATCH, args.index, LEARNERS, make, args.slow, die_at=args.die_at,
                   step_ms=args.step_ms, hang_at=args.hang_at, lr=args.lr)
    Path(args.out).write_text(json.dumps({**losses, **holder["sync"].summary()}))


def diloco_run(name: str, steps: int, settings: dict[str, Any], slow: dict[int, float] | None = None,
               die: dict[int, int] | None = None, hang: tuple[int, int, float] | None = None,
               step_ms: float = 0.0, lr: float = LR) -> dict[str, Any]:
    """One DiLoCo job; `die`: learner -> the step where it SIGKILLs itself, then is restarted in place
    at once (as Vertex restarts a failed replica) and rejoins with the global model; `hang`: (learner,
    step, seconds): it SIGSTOPs itself there and the harness sends SIGCONT that many seconds later."""
    from vtrain.local.ports import free_ports

    tmp = Path(tempfile.mkdtemp(prefix=f"diloco-bench-{name}-"))
    port = free_ports(1)[0]
    spec = {"cluster": {"workerpool0": [f"127.0.0.1:{port}"], "workerpool1": ["127.0.0.1:9"] * LEARNERS}}
    base = {**os.environ, "VTRAIN_DILOCO": json.dumps(settings), "CLOUD_ML_JOB_ID": f"bench-{name}",
            "AIP_CHECKPOINT_DIR": str(tmp / "ckpt"), "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2",
            "VTRAIN_LOG_LEVEL": "WARNING", "DILOCO_BENCH_LEARNERS": str(LEARNERS)}

    def env(task: str, index: int) -> dict[str, str]:
        return {**base, "CLUSTER_SPEC": json.dumps({**spec, "task": {"type": task, "index": index}})}

    logs = [open(tmp / f"{n}.log", "wb") for n in ["syncer", *[f"l{i}" for i in range(LEARNERS)]]]  # noqa: SIM115
    procs = [subprocess.Popen([sys.executable, "-m", "vtrain.diloco"], env=env("workerpool0", 0), stdout=logs[0],
                              stderr=subprocess.STDOUT)]

    def learner(i: int, die_at: int = 0) -> subprocess.Popen[bytes]:
        hang_at = hang[1] if hang is not None and hang[0] == i else 0
        return subprocess.Popen([sys.executable, __file__, "learner", "--index", str(i), "--steps", str(steps),
                                 "--slow", str((slow or {}).get(i, 1.0)), "--out", str(tmp / f"l{i}.json"),
                                 "--die-at", str(die_at), "--step-ms", str(step_ms), "--hang-at", str(hang_at),
                                 "--lr", str(lr)],
                                env=env("workerpool1", i), stdout=logs[i + 1], stderr=subprocess.STDOUT)

    procs += [learner(i, (die or {}).get(i, 0)) for i in range(LEARNERS)]
    restarts = 0
    deadline = time.monotonic() + 1800
    stopped_at: float | None = None
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        for i in range(LEARNERS):
            if procs[i + 1].poll() == -signal.SIGKILL and (die or {}).get(i):
                restarts += 1
                procs[i + 1] = learner(i)  # restarted in place; its new process rejoins
        if hang is not None and stopped_at is None and _state(procs[hang[0] + 1].pid) == "T":
            stopped_at = time.monotonic()
        if stopped_at is not None and hang is not None and time.monotonic() - stopped_at >= hang[2]:
            procs[hang[0] + 1].send_signal(signal.SIGCONT)
            hang = None
        time.sleep(0.05)
    codes = [p.wait(10) for p in procs]
    if any(codes):
        raise SystemExit(f"{name}: exit codes {codes}; logs in {tmp}")
    results = [json.loads((tmp / f"l{i}.json").read_text()) for i in range(LEARNERS)]
    summary = json.loads((tmp / "ckpt" / "diloco" / "summary.json").read_text())
    waited = sum(r["wait_seconds"] for r in results)
    wall = sum(r["seconds"] for r in results)
    first = sum(r["first_sync_wait"] for r in results)  # the first merge waits for every learner to start
    return {"eval_loss": results[0]["eval_loss"], "val_loss": results[0]["val_loss"],
            "rounds": summary["rounds"][0], "merges": summary["merges"],
            "stale_merged": summary["stale_merged"], "max_stall_s": round(summary["max_stall"], 3),
            "sent_per_step": results[0]["sent"] / steps, "received_per_step": results[0]["received"] / steps,
            "utilisation": 1 - waited / wall, "utilisation_after_start": 1 - (waited - first) / (wall - first),
            "wall_s": max(r["seconds"] for r in results), "restarts": restarts,
            "rejoins": sum(r["reconnects"] for r in results),
            "merged_while_training": sum(r.get("merged_while_training", 0) for r in results),
            **_gaps(summary["merge_log"])}


def _state(pid: int) -> str:
    """A process's state letter from /proc (T: stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def _gaps(merge_log: list[list[float]]) -> dict[str, float]:
    """The usual time between merges, the longest gap, and the longest stall after the first merge (how long
    the first delta of a round waited for its merge): a fault must not stall a merge by more than a round."""
    times = [m[0] for m in merge_log]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)] or [0.0]
    stalls = [m[5] for m in merge_log[1:]] or [0.0]  # the first merge waits for every learner's start-up
    median = max(statistics.median(gaps), 1e-9)
    return {"median_round_s": median, "longest_gap_s": max(gaps), "longest_gap_in_rounds": max(gaps) / median,
            "max_stall_after_start_s": max(stalls), "max_stall_in_rounds": max(stalls) / median,
            "merges_stalled_over_a_round": sum(stall > median for stall in stalls)}


def tune(args: argparse.Namespace, steps: int, base: dict[str, Any]) -> dict[str, Any]:
    """Best against best: DP, the single learner and DiLoCo each with the inner learning rate (and DiLoCo the
    outer lr/momentum) that gives it the lowest validation loss; the test loss of each best is compared."""
    lrs = [float(v) for v in args.lr_grid.split(",")]
    diloco_lrs = [float(v) for v in args.diloco_lr_grid.split(",")]
    outer = [tuple(float(x) for x in pair.split("/")) for pair in args.outer_grid.split(",")]
    grid: dict[str, dict[str, dict[str, float]]] = {"dp": {}, "single": {}, "diloco": {}}
    for lr in lrs:
        grid["dp"][f"lr {lr:g}"] = train(steps, BATCH * LEARNERS, 0, 1, lr=lr)
        grid["single"][f"lr {lr:g}"] = train(steps, BATCH, 0, 1, lr=lr)
        print("tune dp/single", lr, grid["dp"][f"lr {lr:g}"], grid["single"][f"lr {lr:g}"], file=sys.stderr, flush=True)
    for lr in diloco_lrs:
        for outer_lr, momentum in outer:
            name = f"lr {lr:g}, outer {outer_lr:g}/{momentum:g}"
            run = diloco_run(f"tune-{lr:g}-{outer_lr:g}-{momentum:g}", steps,
                             {**base, "outer_lr": outer_lr, "outer_momentum": momentum}, step_ms=args.step_ms, lr=lr)
            grid["diloco"][name] = {k: run[k] for k in ("val_loss", "eval_loss", "wall_s")}
            print("tune", name, grid["diloco"][name], file=sys.stderr, flush=True)
    best = {kind: min(runs, key=lambda name: runs[name]["val_loss"]) for kind, runs in grid.items()}
    dp = grid["dp"][best["dp"]]["eval_loss"]
    single = grid["single"][best["single"]]["eval_loss"]
    out: dict[str, Any] = {**grid, "best": {kind: {"setting": name, **grid[kind][name]} for kind, name in best.items()}}
    diloco = grid["diloco"][best["diloco"]]["eval_loss"]
    out["best_diloco_vs_best_dp"] = diloco / dp - 1
    out["best_gap_recovered"] = (single - diloco) / (single - dp)
    # Each outer setting with its own best inner lr: which momentum wins when the inner lr is tuned too.
    out["per_outer_setting"] = {}
    for outer_lr, momentum in outer:
        tag = f"outer {outer_lr:g}/{momentum:g}"
        name = min((n for n in grid["diloco"] if n.endswith(tag)), key=lambda n: grid["diloco"][n]["val_loss"])
        out["per_outer_setting"][tag] = {"setting": name, "eval_loss": grid["diloco"][name]["eval_loss"],
                                         "vs_best_dp": grid["diloco"][name]["eval_loss"] / dp - 1}
    # The untuned comparison the README used to make: DiLoCo at DP's best inner lr (its best outer setting).
    at_dp_lr = [n for n in grid["diloco"] if n.startswith(best["dp"] + ",")]
    if at_dp_lr:
        name = min(at_dp_lr, key=lambda n: grid["diloco"][n]["val_loss"])
        out["diloco_at_dps_lr"] = {"setting": name, "vs_best_dp": grid["diloco"][name]["eval_loss"] / dp - 1}
    return out


def main() -> None:
    global LEARNERS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", nargs="?", default="bench", choices=["bench", "learner"])
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--inner-steps", type=int, default=50)
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--slow", type=float, default=1.0)
    p.add_argument("--out", default="")
    p.add_argument("--die-at", type=int, default=0)
    p.add_argument("--hang-at", type=int, default=0)
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="pad each DiLoCo learner step to this many ms (sleeping, as a host does while its "
                        "accelerator computes): rounds as long as a real job's make the exchange latency small")
    p.add_argument("--lr", type=float, default=LR, help=argparse.SUPPRESS)  # a learner's inner learning rate
    p.add_argument("--learners", type=int, default=LEARNERS, help="DiLoCo learners (and DP replicas), default 4")
    p.add_argument("--lr-grid", default="1e-3,2e-3,4e-3,8e-3",
                   help="--only tune: the inner learning rates DP and the single learner are each tuned over")
    p.add_argument("--diloco-lr-grid", default="1e-3,2e-3,4e-3", help="--only tune: DiLoCo's inner learning rates")
    p.add_argument("--outer-grid", default="1.0/0.6,0.7/0.9,1.0/0.9",
                   help="--only tune: DiLoCo's outer learning rate/momentum pairs (crossed with --diloco-lr-grid)")
    p.add_argument("--only", default="", help="comma-separated runs: dp,single,fp32,int8,int4,hetero,allwait,kill,hang,"
                                             "overlap,hetero_overlap,tune")
    args = p.parse_args()
    LEARNERS = args.learners
    os.environ["DILOCO_BENCH_LEARNERS"] = str(LEARNERS)
    if args.mode == "learner":
        learner_main(args)
        return
    from vtrain.diloco import traffic

    h, steps = args.inner_steps, args.inner_steps * args.rounds
    only = set(filter(None, args.only.split(",")))

    def want(name: str) -> bool:
        return not only or name in only

    base = {"inner_steps": h, "grace": 2.0, "straggler_timeout": 10.0, "registration_timeout": 120.0,
            "checkpoint_every": 30.0}
    out: dict[str, Any] = {"learners": LEARNERS, "inner_steps": h, "rounds": args.rounds, "batch": BATCH,
                           "step_ms": args.step_ms}
    if want("dp"):
        out["dp"] = train(steps, BATCH * LEARNERS, 0, 1)
    if want("single"):
        out["single"] = train(steps, BATCH, 0, 1)
    if "tune" in only:  # only on request: 3 x 3 DiLoCo jobs
        out["tune"] = tune(args, steps, base)
    runs = {"fp32": ({}, None), "int8": ({"compression": "int8"}, None), "int4": ({"compression": "int4"}, None),
            "hetero": ({"min_quorum": LEARNERS - 1}, {LEARNERS - 1: 2.0}), "allwait": ({}, {LEARNERS - 1: 2.0}),
            "overlap": ({"overlap": True}, None),
            "hetero_overlap": ({"min_quorum": LEARNERS - 1, "overlap": True}, {LEARNERS - 1: 2.0})}
    for name, (extra, slow) in runs.items():
        if want(name):
            out[name] = diloco_run(name, steps, {**base, **extra}, slow, step_ms=args.step_ms)
            print(name, out[name], file=sys.stderr, flush=True)
    if want("kill"):  # SIGKILL the last learner half-way (mid-round), restart it in place
        out["kill"] = diloco_run("kill", steps, base, die={LEARNERS - 1: steps // 2 + h // 2}, step_ms=args.step_ms)
        if "fp32" in out:
            out["kill"]["vs_fault_free"] = out["kill"]["eval_loss"] / out["fp32"]["eval_loss"] - 1
        print("kill", out["kill"], file=sys.stderr, flush=True)
    if want("hang"):  # SIGSTOP the last learner half-way for longer than straggler_timeout, then SIGCONT
        hung = base["straggler_timeout"] + 5.0
        out["hang"] = diloco_run("hang", steps, base, hang=(LEARNERS - 1, steps // 2 + h // 2, hung),
                                 step_ms=args.step_ms)
        out["hang"]["hung_s"] = hung
        out["hang"]["stall_bound_s"] = base["grace"] + base["straggler_timeout"]
        if "fp32" in out:
            out["hang"]["vs_fault_free"] = out["hang"]["eval_loss"] / out["fp32"]["eval_loss"] - 1
        print("hang", out["hang"], file=sys.stderr, flush=True)
    tf = _tf()
    params = sum(int(v.shape.num_elements()) for v in model_and_step(tf, 1)[0].weights)
    ring = traffic.ring_allreduce_bytes_per_step(params, LEARNERS)["up"]
    out["params"], out["ring_allreduce_sent_per_step"] = params, ring
    for name in ("fp32", "int8", "int4", "hetero", "overlap"):
        if name in out:
            out[name]["ring_over_sent"] = ring / out[name]["sent_per_step"]
            codec = name if name in ("int8", "int4") else "none"
            out[name]["formula_sent_per_step"] = traffic.bytes_per_step(params, h, codec)["up"]
    if "dp" in out:
        for name in ("fp32", "int8", "int4", "hetero", "allwait", "kill", "hang", "overlap", "hetero_overlap"):
            if name in out:
                out[name]["vs_dp"] = out[name]["eval_loss"] / out["dp"]["eval_loss"] - 1
                if "single" in out:
                    gap = out["single"]["eval_loss"] - out["dp"]["eval_loss"]
                    out[name]["gap_recovered"] = (out["single"]["eval_loss"] - out[name]["eval_loss"]) / gap
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
