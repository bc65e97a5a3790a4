"""The requirements layer of the keras template on a prebuilt TensorFlow base, as vtrain builds it now
vs when the base's TensorFlow was installed again. Run by hand (not a test; fetches from the index):

    PYTHONPATH=. python benchmarks/image_deps.py [--before]

The trainer's declared dependencies (its pyproject.toml: tf-keras~=2.17.0) are resolved for the
tf-cpu.2-17.py310 base exactly as `vtrain package` would (Python 3.10, glibc 2.31 tags, the base
providing tensorflow==2.17.*), into an empty layer cache: it prints the layer's compressed size, the
packages in it and the time. `--before` also builds the layer with nothing known to be provided (what
vtrain did before, dependencies reinstalled over the base's TensorFlow) for comparison.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vtrain.jobfile.artifacts import base_packages, base_platform  # noqa: E402
from vtrain.trainer.image.libc import platform_tags  # noqa: E402
from vtrain.trainer.image.requirements import declared_requirements  # noqa: E402
from vtrain.trainer.image.wheels import requirements_layer, site_dir  # noqa: E402
from vtrain.trainer.packaging import scan_package  # noqa: E402

BASE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"


def _packages(path: Path) -> list[str]:
    site = site_dir("3.10")
    with tarfile.open(path) as tar:
        return sorted(n[len(site) + 1:].removesuffix(".dist-info") for n in tar.getnames()
                      if n.startswith(site + "/") and n.endswith(".dist-info"))


def measure(provided: tuple[str, ...], cache: Path) -> None:
    root = REPO / "trainer_templates" / "keras"
    scan = scan_package(root)
    declared = declared_requirements(root, scan.files, scan.digest, cache=cache)
    platform = base_platform(BASE)
    assert platform is not None
    start = time.perf_counter()
    layer = requirements_layer([], "3.10", platforms=platform_tags(platform), cache=cache, declared=declared,
                               provided=provided)
    took = time.perf_counter() - start
    what = f"provided {', '.join(provided)}" if provided else "nothing provided (before)"
    if layer is None:
        print(f"{what}: no requirements layer ({took:.1f} s)")
        return
    print(f"{what}: requirements layer {layer.size:,} B ({layer.size / 1e6:.1f} MB) in {took:.1f} s; "
          f"declared {list(declared)}; packages: {', '.join(_packages(layer.path))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", action="store_true", help="also build the layer with TensorFlow reinstalled")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vtrain-bench-deps-") as tmp:
        measure(base_packages(BASE), Path(tmp) / "after")
        if args.before:
            measure((), Path(tmp) / "before")


if __name__ == "__main__":
    main()
