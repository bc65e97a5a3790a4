"""``--runtime image``: a Python package job's replicas in Vertex's own prebuilt image, in containers here.

The image the pool names (``executorImageUri``; the CPU image of the same version when the job asks for a GPU
image and this machine has no GPU) is pulled through the registry client (:func:`~vtrain.trainer.image.registry.
pull_client`, so ``VTRAIN_REGISTRY_MIRRORS`` serves it), resolved to its digest and unpacked once per digest
(:mod:`vtrain.local.rootfs`). Each replica is a runc/crun container on it (:mod:`vtrain.local.containers`:
host network, its own writable layer, the job's output directory bound at its path) that does what the
prebuilt image does with a Python package: ``pip install`` the job's packages (bound read-only under
``/vtrain/packages``), then ``python -m MODULE ARGS``. Each replica installs them itself, as each Vertex VM does:
that install is this runtime's start cost per replica (benchmarks/image_stack.py measures it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtrain.errors import BackendError, PackagingError
from vtrain.local.cachefolders import Lease, hold
from vtrain.local.containers import Container, ContainerImage

PACKAGES = "/vtrain/packages"
#: What runs first in each replica's container: the packages installed by the image's own pip (into the image's
#: site-packages when the root is writable, else the user site under /tmp), then `python -m MODULE ARGS` in place.
BOOTSTRAP = """\
import importlib.util, os, site, subprocess, sys
count = int(sys.argv[1])
packages, command = sys.argv[2:2 + count], sys.argv[2 + count:]
pip = [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--no-warn-script-location",
       "--quiet", "--root-user-action=ignore"]
if importlib.util.find_spec("setuptools") is not None:
    pip.append("--no-build-isolation")
if not any(os.access(d, os.W_OK) for d in site.getsitepackages()):
    os.environ["PYTHONUSERBASE"] = "/tmp/.vtrain-user"
    pip.append("--user")
done = subprocess.run(pip + packages)
if done.returncode != 0:
    sys.exit(f"vtrain: pip could not install the job's packages in the image (exit {done.returncode})")
os.execv(sys.executable, [sys.executable, "-m", *command])
"""


@dataclass(frozen=True)
class PackageImage:
    """A prebuilt image unpacked here, and the job's packages its replicas install."""

    image: ContainerImage
    packages: tuple[Path, ...]

    @property
    def uri(self) -> str:
        return self.image.image.uri

    @property
    def lease(self) -> Lease | None:
        """Its hold on the cache's image folders (`vtrain cache clear` keeps them while the job runs)."""
        return self.image.lease

    def replica(self, pool: Mapping[str, Any], **kwargs: Any) -> tuple[Container, dict[str, str]]:
        """One replica's container: the pythonPackageSpec's module and args after the install, as the image runs
        them (the pool's env over the image's, Vertex's over both: :meth:`ContainerImage.replica`)."""
        spec = pool["pythonPackageSpec"]
        inside = [f"{PACKAGES}/{i}-{p.name}" for i, p in enumerate(self.packages)]
        command = ["python3", "-c", BOOTSTRAP, str(len(inside)), *inside, str(spec["pythonModule"]),
                   *[str(a) for a in spec.get("args", [])]]
        as_container = {**pool, "containerSpec": {"imageUri": self.uri, "command": command, "args": [],
                                                  "env": spec.get("env", [])}}
        binds = [(str(p), where, False) for p, where in zip(self.packages, inside, strict=True)]
        return self.image.replica(as_container, extra_mounts=binds, **kwargs)


_GPU = re.compile(r"/tf-gpu\.")


def cpu_variant(uri: str, gpu_here: bool) -> str:
    """The image to pull: a GPU image's CPU variant (same version and Python) when this machine has no GPU."""
    return uri if gpu_here else _GPU.sub("/tf-cpu.", uri)


def prebuilt_images(uris: Sequence[str], packages: Sequence[Path], cache: Path, *, gpu_here: bool,
                    notice: Callable[[str], None] = lambda text: None,
                    credentials: Any = None) -> dict[str, PackageImage]:
    """executorImageUri → its prebuilt image pulled (by the digest its tag names now), unpacked and ready for
    runc/crun. A machine that cannot run a container, or a registry out of reach, is one BackendError line."""
    from vtrain.local.containers import find_runtime
    from vtrain.local.image import _pull_credentials, _pull_unpacked

    runtime, why = find_runtime(cache)
    if runtime is None:
        raise BackendError(f"--runtime image runs each replica in the prebuilt image with runc or crun: {why}; "
                           "--runtime stack runs the image's TensorFlow and Python without a container")
    out: dict[str, PackageImage] = {}
    try:
        lease = hold(cache, "image-blobs", "containers")  # released with the job that runs them
    except PackagingError as err:
        raise BackendError(f"--runtime image: {err}") from None
    try:
        for uri in uris:
            pulled = cpu_variant(uri, gpu_here)
            if pulled != uri:
                notice(f"this machine has no GPU: the replicas of {uri} run in its CPU variant {pulled}")
            try:
                unpacked = _pull_unpacked(pulled, cache, credentials if credentials is not None else
                                          _pull_credentials, runtime.rootless, notice)
            except (PackagingError, BackendError) as err:
                raise BackendError(f"--runtime image: cannot pull {pulled}: {err}") from None
            notice(f"image {pulled}@{unpacked.digest}: replicas run in {runtime.name} containers on "
                   f"{unpacked.rootfs}, each installing the job's packages with the image's pip first")
            out[uri] = PackageImage(ContainerImage(unpacked, runtime, lease), tuple(packages))
    except BaseException:
        lease.release()
        raise
    return out


__all__ = ["BOOTSTRAP", "PACKAGES", "PackageImage", "cpu_variant", "prebuilt_images"]
