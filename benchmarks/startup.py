"""How fast does `vtrain render` start? Run by hand: `make bench` (not a test).

Reports the median wall time of `vtrain render configs/multi-worker-gpu.yaml` against
`python -c pass` and `python -c "import google.cloud.aiplatform"`. Target: render
under 1/3 of the time of importing google.cloud.aiplatform.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = 7


def median_seconds(argv: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    py = sys.executable
    cases = {
        "python -c pass": [py, "-c", "pass"],
        "vtrain render multi-worker-gpu.yaml": [py, "-m", "vtrain", "render", "configs/multi-worker-gpu.yaml"],
        "vtrain validate multi-worker-gpu.yaml": [py, "-m", "vtrain", "validate", "configs/multi-worker-gpu.yaml"],
        "import google.cloud.aiplatform": [py, "-c", "import google.cloud.aiplatform"],
    }
    results = {name: median_seconds(argv) for name, argv in cases.items()}
    for name, seconds in results.items():
        print(f"{name:40s} {seconds * 1000:8.0f} ms (median of {RUNS})")
    ratio = results["vtrain render multi-worker-gpu.yaml"] / results["import google.cloud.aiplatform"]
    verdict = "OK" if ratio < 1 / 3 else "TOO SLOW"
    print(f"render / import aiplatform = {ratio:.2f} (target < 0.33): {verdict}")


if __name__ == "__main__":
    main()
