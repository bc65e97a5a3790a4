"""Issue 30, class 5: `vtrain render` of a trainer folder holding a 3 GB file: wall time and peak RSS.

    .venv/bin/python benchmarks/large_trainer_file.py                      # this checkout
    .venv/bin/python benchmarks/large_trainer_file.py --src /work/main     # another checkout (before)
    .venv/bin/python benchmarks/large_trainer_file.py --cases dropped,kept --size-gb 3

The file is sparse (no disk is used for it) and sits beside the trainer as a dataset would:
`dropped` puts it at the folder's root, where setuptools leaves it out of its own sdist (the issue's
case; since issue 32 vtrain adds it back: the sdist holds the selection, and its name hashes it);
`kept` names it in MANIFEST.in. Either way its bytes are in the sdist's name (hashed, streamed).
Each case renders twice, `first` (an empty cache) and `again` (before issue 32 the first render of a
layout built the sdist once to learn what the backend keeps; now both read the files alike). Each render is
`python -m vtrain render JOB` in a fresh process; peak RSS is that process's own (wait4's rusage).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "big-trainer"
version = "0.1.0"

[tool.setuptools]
packages = ["trainer"]
"""


def _trainer(root: Path, size: int, kept: bool) -> Path:
    (root / "trainer").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("print('trained')\n")
    with open(root / "data.bin", "wb") as fh:
        fh.truncate(size)
    if kept:
        (root / "MANIFEST.in").write_text("include data.bin\n")
    job = root.parent / "job.yaml"
    job.write_text(textwrap.dedent(f"""\
        name: big
        staging_bucket: gs://bkt/staging
        trainer: {{package: {root}, module: trainer.task}}
        cluster: {{chief: {{machine_type: n1-standard-4}}}}
        """))
    return job


def _render(job: Path, src: Path, cache: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit status) of one `vtrain render`."""
    env = {**os.environ, "PYTHONPATH": str(src), "VTRAIN_CACHE_DIR": str(cache)}
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "vtrain", "render", str(job)], cwd=src, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and proc.stderr is not None:
        print(proc.stderr.read().decode(errors="replace")[-2000:], file=sys.stderr)
    return seconds, usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose vtrain renders (default: this one)")
    parser.add_argument("--size-gb", type=float, default=3.0)
    parser.add_argument("--cases", default="dropped,kept")
    args = parser.parse_args()
    size = int(args.size_gb * (1 << 30))
    print(f"vtrain from {args.src}; a {size / (1 << 30):.1f} GiB sparse file in the trainer folder")
    print(f"{'case':<8} {'render':<6} {'seconds':>8} {'peak RSS MB':>12} {'exit':>5}")
    for case in args.cases.split(","):
        with tempfile.TemporaryDirectory(prefix="vtrain-bench-big-") as tmp:
            job = _trainer(Path(tmp) / "t", size, kept=case == "kept")
            for label in ("first", "again"):
                seconds, rss, code = _render(job, args.src.resolve(), Path(tmp) / "cache")
                print(f"{case:<8} {label:<6} {seconds:>8.1f} {rss:>12.0f} {code:>5}", flush=True)


if __name__ == "__main__":
    main()
