"""Does a first `vtrain render` cost what any render costs? Run by hand (not a test):

    .venv/bin/python benchmarks/render_cold.py [--repo PATH --python PY]

Renders `configs/quickstart.yaml` (a packaged trainer: its sdist's name is in the request) with a
cache directory that does not exist yet (cold: a new VTRAIN_CACHE_DIR every run) and with one
that earlier renders used (warm), interleaved so that a busy machine slows both alike; reports
the medians and whether the cold render wrote anything to the cache. Target: cold ≤ 1.2 × warm
(issue 32, "a pure request": the artifacts are named from the file selection, nothing is built).
`--repo`/`--python` measure another checkout (e.g. main before the change) the same way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = 7


def render_seconds(python: str, repo: Path, cache: Path) -> float:
    env = {**os.environ, "VTRAIN_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    subprocess.run([python, "-m", "vtrain", "render", "configs/quickstart.yaml"], cwd=repo, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    cold: list[float] = []
    warm: list[float] = []
    wrote: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="vtrain-bench-render-") as tmp:
        warm_cache = Path(tmp) / "warm"
        render_seconds(args.python, args.repo, warm_cache)  # warms it
        for i in range(RUNS):
            cache = Path(tmp) / f"cold-{i}"
            cold.append(render_seconds(args.python, args.repo, cache))
            if cache.exists():
                wrote.update(p.relative_to(cache).parts[0] for p in cache.rglob("*"))
            warm.append(render_seconds(args.python, args.repo, warm_cache))
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"vtrain render configs/quickstart.yaml ({args.repo})")
    print(f"  cold cache {c * 1000:8.0f} ms (median of {RUNS})")
    print(f"  warm cache {w * 1000:8.0f} ms (median of {RUNS})")
    print(f"  the cold render wrote to the cache: {', '.join(sorted(wrote)) if wrote else 'nothing'}")
    print(f"cold / warm = {c / w:.2f} (target <= 1.2): {'OK' if c / w <= 1.2 else 'TOO SLOW'}")


if __name__ == "__main__":
    main()
