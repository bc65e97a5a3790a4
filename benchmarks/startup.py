"""How fast does `vtrain render` start? Run by hand: `make bench` (not a test).

Reports the median wall time of `vtrain render configs/multi-worker-gpu.yaml` against
`python -c pass` and `python -c "import google.cloud.aiplatform"`. Target: render
under 1/3 of the time of importing google.cloud.aiplatform.

Then project/region resolution: `render` of a job file with no region, gcloud on PATH and a
gcloud configuration that names project and ai/region (read from gcloud's files), against the
same render with region and project given. Target: ratio ≤ 1.2. For reference, one
`gcloud config get-value` call (what vtrain used to run, twice per render).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = 7


def median_seconds(argv: list[str], env: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def resolution(py: str) -> None:
    """render with the region from gcloud's configuration vs with the region in the job file."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VTRAIN_", "GOOGLE_CLOUD_", "CLOUDSDK_"))}
    with tempfile.TemporaryDirectory() as tmp:
        config_dir = Path(tmp) / "gcloud"
        (config_dir / "configurations").mkdir(parents=True)
        (config_dir / "active_config").write_text("bench")
        (config_dir / "configurations" / "config_bench").write_text(
            "[core]\nproject = bench-project\n\n[ai]\nregion = europe-west4\n"
        )
        without = "configs/multi-worker-gpu.yaml"
        env = {**clean, "CLOUDSDK_CONFIG": str(config_dir)}
        render = [py, "-m", "vtrain", "render", "-o", "gcloud"]
        cases = {
            "render, region+project given": (render + [without, "--set", "region=europe-west4", "--project", "p-given"],
                                             env),
            "render, region+project from gcloud": (render + [without, "--set", "region=null"], env),
        }
        results = {name: median_seconds(argv, env) for name, (argv, env) in cases.items()}
        header = subprocess.run(render + [without, "--set", "region=null"], cwd=REPO, env=env, capture_output=True,
                                text=True, check=True)
        gcloud = shutil.which("gcloud")
        if gcloud:
            results["gcloud config get-value project (one call)"] = median_seconds(
                [gcloud, "config", "get-value", "project"], env
            )
    for name, seconds in results.items():
        print(f"{name:40s} {seconds * 1000:8.0f} ms (median of {RUNS})")
    print("  " + header.stdout.splitlines()[1].strip())
    ratio = results["render, region+project from gcloud"] / results["render, region+project given"]
    print(f"gcloud-resolved / given = {ratio:.2f} (target <= 1.2): {'OK' if ratio <= 1.2 else 'TOO SLOW'}")


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
    resolution(py)


if __name__ == "__main__":
    main()
