"""Reports what the replica sees, then behaves as told: exit, raise, sleep, listen, fork.

Every flag naming replicas takes labels like chief-0,worker-1 (or `all`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

ROLES = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps", "workerpool3": "evaluator"}


def label() -> str:
    task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
    return f"{ROLES[task['type']]}-{task['index']}"


def port() -> int:
    spec = json.loads(os.environ["CLUSTER_SPEC"])
    task = spec["task"]
    return int(spec["cluster"][task["type"]][task["index"]].rsplit(":", 1)[1])


def picked(value: str, me: str) -> bool:
    return value == "all" or me in value.split(",")


def daemonize() -> int:
    """The classic daemon: fork, setsid, fork again, the middle process exits; the pid of the daemon."""
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:  # the daemon: out of our group and session, its parent gone; it ignores SIGTERM
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.write(write, f"{os.getpid()}\n".encode())
            time.sleep(3600)
        os._exit(0)
    os.close(write)
    os.waitpid(middle, 0)
    with os.fdopen(read) as f:
        return int(f.readline())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dump", help="write what this replica sees to DIR/<label>.json")
    p.add_argument("--fail", default="", help="replicas that exit with --code")
    p.add_argument("--code", type=int, default=3)
    p.add_argument("--raise", dest="raise_", default="", help="replicas that raise")
    p.add_argument("--sleep", default="", help="replicas that sleep --seconds before exiting 0")
    p.add_argument("--seconds", type=float, default=3600)
    p.add_argument("--listen", default="", help="replicas that listen on their port (a TF server)")
    p.add_argument("--fork", default="", help="replicas that leave a sleeping child process behind")
    p.add_argument("--fail-after", type=float, default=0.0, help="delay before --fail/--raise")
    p.add_argument("--fail-times", type=int, default=0,
                   help="--fail/--raise only in the first N runs of the replica (VTRAIN_RESTART_COUNT < N); 0: always")
    p.add_argument("--steps", default="", help="replicas that report steps 1..--count (runtime.report_step)")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--metric", action="append", default=[], help="NAME=VALUE reported by runtime.report_metric")
    p.add_argument("--step-seconds", type=float, default=0.1)
    p.add_argument("--raise-at", type=int, default=0, help="--steps replicas raise once they reported this step")
    p.add_argument("--checkpoint-at", type=int, default=0,
                   help="--steps replicas write this step to AIP_CHECKPOINT_DIR/<label>.step and resume after it")
    p.add_argument("--ignore-term", default="", help="replicas that ignore SIGTERM")
    p.add_argument("--daemonize", default="", help="replicas that leave a daemon behind (double fork + setsid)")
    p.add_argument("--native-log", default="", help="replicas that write TensorFlow-style C++ (absl) log lines")
    p.add_argument("--write", default="", help="replicas that write their job id into AIP_MODEL_DIR/<label>")
    args = p.parse_args()
    me = label()
    restarts = int(os.environ.get("VTRAIN_RESTART_COUNT", "0"))  # set by `vtrain local` at each (re)start
    if args.ignore_term and picked(args.ignore_term, me):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"probe {me} starting, pid {os.getpid()}", flush=True)
    if args.native_log and picked(args.native_log, me):  # what TensorFlow's C++ runtime prints at import
        print("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
              f"I0000 00:00:{time.time():.6f}   {os.getpid()} cpu_feature_guard.cc:227] This TensorFlow binary is "
              "optimized to use available CPU instructions in performance-critical operations.\n"
              "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the "
              "appropriate compiler flags.", file=sys.stderr, flush=True)
    if args.dump:
        import trainer

        os.makedirs(args.dump, exist_ok=True)
        seen = {"env": dict(os.environ), "argv": sys.argv, "cwd": os.getcwd(), "sys_path": sys.path,
                "trainer_file": trainer.__file__, "executable": sys.executable}
        try:
            import vtrain

            seen["vtrain_file"] = vtrain.__file__
        except ImportError:
            seen["vtrain_file"] = None
        name = f"{me}.restart{restarts}.json" if restarts else f"{me}.json"  # one per run of the replica
        with open(os.path.join(args.dump, name), "w") as f:
            json.dump(seen, f)
    server = None
    if picked(args.listen, me) if args.listen else False:
        server = socket.create_server(("127.0.0.1", port()))
        print(f"{me} listening on {port()}", flush=True)
    if args.fork and picked(args.fork, me):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        print(f"{me} forked {child.pid}", flush=True)
    if args.daemonize and picked(args.daemonize, me):
        print(f"{me} daemonized {daemonize()}", flush=True)
    if args.write and picked(args.write, me):
        os.makedirs(os.environ["AIP_MODEL_DIR"], exist_ok=True)
        with open(os.path.join(os.environ["AIP_MODEL_DIR"], me), "w") as f:
            f.write(os.environ["CLOUD_ML_JOB_ID"])
    print(f"{me} restart {restarts}, job attempt {os.environ.get('VTRAIN_JOB_ATTEMPT', '-')}", flush=True)
    if args.steps and picked(args.steps, me):
        from vtrain.runtime import report_step

        saved = os.path.join(os.environ.get("AIP_CHECKPOINT_DIR", "."), f"{me}.step")
        first = 1
        if args.checkpoint_at and os.path.exists(saved):
            with open(saved) as f:
                first = int(f.read()) + 1
            print(f"probe {me} resuming at step {first}", flush=True)
        for step in range(first, args.count + 1):
            time.sleep(args.step_seconds)
            # The line first: a fault fired at the report of step N (`kill@step:N`) then follows the line "step N".
            print(f"{me} step {step}", flush=True)
            report_step(step)
            if step == args.checkpoint_at:
                os.makedirs(os.path.dirname(saved), exist_ok=True)
                with open(saved, "w") as f:
                    f.write(str(step))
            if step == args.raise_at:
                raise RuntimeError(f"probe {me} was told to raise at step {step}")
    for item in args.metric:
        from vtrain.runtime import report_metric

        name, value = item.split("=", 1)
        report_metric(name, float(value))
    failing = not args.fail_times or restarts < args.fail_times
    if failing and ((args.fail and picked(args.fail, me)) or (args.raise_ and picked(args.raise_, me))):
        time.sleep(args.fail_after)
        if args.raise_ and picked(args.raise_, me):
            raise RuntimeError(f"probe {me} was told to raise")
        print(f"{me} exiting with {args.code}", flush=True)
        sys.exit(args.code)
    if args.sleep and picked(args.sleep, me):
        time.sleep(args.seconds)
    print(f"probe {me} done", flush=True)
    del server


if __name__ == "__main__":
    main()
