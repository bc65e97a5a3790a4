"""What does a trainer process cost before its first step, and where does it go? Run by hand (not a test):

    .venv/bin/python benchmarks/process_start.py [--runs N]

A replica of a TensorFlow job (and most of `make test`'s time: each TensorFlow process of the suite starts
like this) imports TensorFlow, Keras and vtrain's runtime before it trains. Each line below is the median CPU
(user + sys) of N fresh processes of this interpreter, interleaved so that a busy machine slows all alike:

- `trainer start`: ``import tensorflow as tf; tf.keras.layers.Dense; import vtrain.runtime``;
- the same with matplotlib and pandas made unimportable: Keras imports both when they are installed
  (``keras.src.visualization``, ``array_slicing``), which is their share of every start;
- ``import numpy, ml_dtypes`` against ``import numpy``: ml_dtypes 0.7.0 alone took 1.3 CPU-s here, so the
  development set pins it below 0.7 (pyproject.toml);
- the aiplatform, kfp and vtrain CLI import that `make install` also runs to write bytecode.

Bytecode: the first process after an install compiles what it imports (~20 CPU-s for the trainer start in a
fresh venv here, ~5.5 after); `make install` runs these imports once so that the suite does not compile them
in several processes at once. This script measures the warm case: run it twice after a fresh install to see
both. No target: the numbers are quoted in docs/development/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

START = "import tensorflow as tf; tf.keras.layers.Dense; import vtrain.runtime"
HIDDEN = "import sys; sys.modules['matplotlib'] = sys.modules['pandas'] = None; " + START
CASES = {
    "trainer start": START,
    "trainer start, matplotlib and pandas hidden": HIDDEN,
    "numpy": "import numpy",
    "numpy + ml_dtypes": "import numpy, ml_dtypes",
    "aiplatform + kfp + vtrain CLI": "import google.cloud.aiplatform, google.cloud.storage, kfp, vtrain.cli",
}


def cpu_seconds(code: str) -> float:
    """CPU (user + sys) of one fresh `python -c code`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    seen: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.runs):
        for name, code in CASES.items():
            seen[name].append(cpu_seconds(code))
    import ml_dtypes
    import numpy

    print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}, ml_dtypes {ml_dtypes.__version__}; "
          f"median CPU of {args.runs} processes")
    for name, values in seen.items():
        print(f"  {name:<45} {statistics.median(values):6.2f} CPU-s")


if __name__ == "__main__":
    main()
