"""How much does hostile input cost before it is refused? Run by hand (not a test):

    .venv/bin/python benchmarks/hostile_input.py

Each case runs in its own child process and reports wall time and the child's peak RSS (from
wait4), so the numbers are those of one `vtrain` run. The issue's starting point: 1e6 keys took
95 s and 1.4 GB before the node-limit error, a FIFO job file hung, and `--plot` on 1e8 workers
never ended; issue 20 (class 5) added the inputs that are not the job file (`--set`, `--prices`,
`diff --against`, `diloco.fragments`, `scheduling.fallback`); issue 30 the files others wrote
(a run's result.json for `vtrain timeline`, a profile for `estimate --from-run`). Targets: every case under 2 s and
under 200 MB. A case still running after 60 s is killed (exit -9).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
LIFTED = """\
import sys, vtrain.jobfile.yamlpos as y
y.MAX_BYTES = 1 << 40  # only the node limit stands: does the parser stop at it?
data, _, problems = y.load_yaml(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1])
print(problems[0].message if problems else "parsed")
"""
GPU_JOB = """\
name: huge
trainer: {container: {image_uri: us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest}}
cluster:
  chief: {machine_type: a2-highgpu-8g}
  workers: {replicas: 100000000}
  reduction_server: {replicas: auto}
"""


SMALL_JOB = """\
name: small
trainer: {container: {image_uri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest}}
cluster:
  chief: {machine_type: n1-standard-4}
"""


def measure(argv: list[str], timeout: float = 60) -> tuple[float, float, int, str, int]:
    """(seconds, peak RSS in MB, exit code, last line of output, bytes of output) of one child."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    last = (output.strip().splitlines() or [""])[-1]
    return seconds, usage.ru_maxrss / 1024, proc.returncode, last, len(output)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="vtrain-bench-") as tmp:
        d = Path(tmp)
        keys = d / "million-keys.yaml"
        with keys.open("w", encoding="utf-8") as f:
            f.writelines(f"k{i}: {i}\n" for i in range(1_000_000))
        dense = d / "dense.yaml"
        dense.write_text("x: [" + "1," * 500_000 + "1]\n", encoding="utf-8")  # ~1 MB, 500k values
        laughs = d / "laughs.yaml"
        lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
        for i in range(1, 9):
            prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
            lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
        laughs.write_text("\n".join(lines) + "\n", encoding="utf-8")
        fifo = d / "fifo.yaml"
        os.mkfifo(fifo)
        job = d / "huge.yaml"
        job.write_text(GPU_JOB, encoding="utf-8")
        # Issue 20, class 5: inputs other than the job file.
        small = d / "small.yaml"
        small.write_text(SMALL_JOB, encoding="utf-8")
        bomb = "[&a [1,1,1,1,1,1,1,1,1]," + ",".join(
            f"&{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(7)) + "]"
        prices = d / "prices.yaml"
        prices.write_text(f"currency: {bomb}\nmachines: {{n1-standard-4: *h}}\n", encoding="utf-8")  # 9^8 values
        deep = d / "deep.json"
        deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
        fragments = d / "fragments.yaml"
        fragments.write_text(SMALL_JOB.replace("name: small", "name: small\ndistribution_strategy: diloco\n"
                                               "diloco: {inner_steps: 999999999989, fragments: 999999999988}")
                             .replace("chief: {machine_type: n1-standard-4}",
                                      "chief: {machine_type: n1-standard-4}\n  workers: {replicas: 2}"),
                             encoding="utf-8")
        fallback = d / "fallback.yaml"
        fallback.write_text(SMALL_JOB + "scheduling:\n  fallback:\n" + "".join(
            f"    - {{region: us-east{1 + i % 4}}}\n" for i in range(2000)), encoding="utf-8")
        # Issue 30: result.json and profiles, read through vtrain.foreign.data.
        run = d / "run"
        (run / "profile").mkdir(parents=True)
        (run / "result.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
        huge_run = d / "huge-run"
        huge_run.mkdir()
        with (huge_run / "result.json").open("wb") as f:
            f.truncate(3 * 1024**3)  # 3 GB, sparse
        fifo_run = d / "fifo-run"
        fifo_run.mkdir()
        os.mkfifo(fifo_run / "result.json")
        (run / "profile" / "chief-0.json").write_text("{" + '"a":{' * 100_000 + "}" * 100_001, encoding="utf-8")
        big_profile = d / "big-profile" / "profile"
        big_profile.mkdir(parents=True)
        with (big_profile / "chief-0.json").open("wb") as f:
            f.truncate(3 * 1024**3)
        cases = {
            "validate: 1e6 keys (12 MB file)": [PY, "-m", "vtrain", "validate", str(keys)],
            "load_yaml: 1e6 keys, byte limit lifted": [PY, "-c", LIFTED, str(keys)],
            "validate: 500k values in ~1 MB": [PY, "-m", "vtrain", "validate", str(dense)],
            "validate: 9^9 alias expansion": [PY, "-m", "vtrain", "validate", str(laughs)],
            "validate: a FIFO as the job file": [PY, "-m", "vtrain", "validate", str(fifo)],
            "validate: /dev/zero as the job file": [PY, "-m", "vtrain", "validate", "/dev/zero"],
            "estimate --params 1e308": [PY, "-m", "vtrain", "estimate", str(job), "--params", "1e308"],
            "estimate --plot, 1e8 workers": [PY, "-m", "vtrain", "estimate", str(job), "--params", "1B",
                                             "--plot", str(d / "plot.png")],
            "validate --set x=<222-char alias bomb>": [PY, "-m", "vtrain", "validate", str(small), "--set",
                                                       f"trainer.args={bomb}"],
            "estimate --prices <alias bomb file>": [PY, "-m", "vtrain", "estimate", str(small), "--params", "1B",
                                                    "--prices", str(prices)],
            "diff --against a FIFO": [PY, "-m", "vtrain", "diff", str(small), "--against", str(fifo)],
            "diff --against /dev/zero": [PY, "-m", "vtrain", "diff", str(small), "--against", "/dev/zero"],
            "diff --against 100k-deep JSON": [PY, "-m", "vtrain", "diff", str(small), "--against", str(deep)],
            "validate: diloco.fragments ~1e12": [PY, "-m", "vtrain", "validate", str(fragments)],
            "validate: 2,000 scheduling.fallback entries": [PY, "-m", "vtrain", "validate", str(fallback)],
            "timeline: 100k-deep result.json": [PY, "-m", "vtrain", "timeline", str(run)],
            "timeline: 3 GB result.json": [PY, "-m", "vtrain", "timeline", str(huge_run)],
            "timeline: result.json a FIFO": [PY, "-m", "vtrain", "timeline", str(fifo_run)],
            "estimate --from-run: 100k-deep profile": [PY, "-m", "vtrain", "estimate", str(small), "--from-run",
                                                       str(run)],
            "estimate --from-run: 3 GB profile": [PY, "-m", "vtrain", "estimate", str(small), "--from-run",
                                                  str(big_profile.parent)],
            "python -c pass (baseline)": [PY, "-c", "pass"],
        }
        print(f"{'case':42s} {'seconds':>8s} {'peak MB':>8s} {'exit':>5s} {'out bytes':>10s}  last line")
        for name, argv in cases.items():
            seconds, mb, code, last, size = measure(argv)
            print(f"{name:42s} {seconds:8.2f} {mb:8.0f} {code:5d} {size:10,d}  {last[:90]}")


if __name__ == "__main__":
    main()
