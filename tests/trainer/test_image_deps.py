"""Dependencies as Vertex will see them (issue 29, item 2): wheels for the base's C library (every
manylinux tag it allows, never only manylinux2014), what the base already has left out, and the
trainer's declared dependencies in the image."""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.trainer.image_helpers import (
    Registry,
    make_wheel,
    needs_registry,
    push_base,
    python_rootfs_entries,
    unpack_bundle,
)
from vtrain.errors import PackagingError
from vtrain.jobfile.artifacts import base_packages, base_platform
from vtrain.trainer.image import wheels
from vtrain.trainer.image.build import build_and_push
from vtrain.trainer.image.config import ImageSpec
from vtrain.trainer.image.layers import Entry, write_layer
from vtrain.trainer.image.libc import Libc, platform_problem, platform_tags, read_libc

SITE = "opt/vtrain/deps/lib/python3.11/site-packages"


def test_a_glibc_allows_every_older_manylinux_tag_newest_first() -> None:
    tags = platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux_2_17_x86_64" in tags and "manylinux_2_5_x86_64" in tags
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_29_x86_64" not in tags
    assert platform_tags("manylinux2014_aarch64")[0] == "manylinux_2_17_aarch64"
    assert "manylinux2010_aarch64" not in platform_tags("manylinux2014_aarch64")
    assert platform_tags("musllinux_1_2_x86_64") == ("musllinux_1_2_x86_64", "musllinux_1_1_x86_64")
    assert platform_problem("linux_x86_64") is not None and platform_problem("manylinux_2_35_x86_64") is None


def test_a_prebuilt_base_is_known_to_have_glibc_231_and_its_tensorflow() -> None:
    prebuilt = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"
    assert base_platform(prebuilt) == "manylinux_2_31_x86_64"
    assert base_packages(prebuilt) == ("tensorflow==2.17.*",)
    assert base_platform("python:3.11-slim") is None and base_packages("python:3.11-slim") == ()


def _layer(tmp: Path, name: str, entries: list[Entry], symlinks: dict[str, str] | None = None) -> tuple[
        str, str, functools.partial[io.BufferedReader]]:
    path = tmp / f"{name}.tar.gz"
    if symlinks:
        with tarfile.open(path, "w:gz") as tar:
            for link, target in symlinks.items():
                info = tarfile.TarInfo(link)
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
    else:
        write_layer(entries, path, role="base")
    return ("application/vnd.oci.image.layer.v1.tar+gzip", name, functools.partial(open, path, "rb"))


def test_the_bases_c_library_is_read_from_its_layers_bottom_up_and_cached(tmp_path: Path) -> None:
    glibc = b"\x7fELF..GNU C Library (Ubuntu GLIBC 2.35-0ubuntu3.8) stable release version 2.35.\n"
    layers = [_layer(tmp_path, "os", [("etc/hostname", b"x", False)]),
              _layer(tmp_path, "libc", [("usr/lib/x86_64-linux-gnu/libc.so.6", glibc, False)]),
              _layer(tmp_path, "app", [("opt/app/x", b"y", False)])]
    assert read_libc(layers, "base", "sha256:1", cache=tmp_path / "c") == Libc("glibc", 2, 35)
    assert Libc("glibc", 2, 35).tag("x86_64") == "manylinux_2_35_x86_64"
    # cached by the config digest: the layers are not read again
    assert read_libc([("x", "gone", lambda: 1 / 0)], "base", "sha256:1", cache=tmp_path / "c") == Libc("glibc", 2, 35)
    older = [_layer(tmp_path, "old", [], symlinks={"lib/x86_64-linux-gnu/libc.so.6": "libc-2.31.so"})]
    assert read_libc(older, "base", "sha256:2", cache=tmp_path / "c") == Libc("glibc", 2, 31)
    alpine = [_layer(tmp_path, "alpine", [("etc/os-release", b'ID=alpine\nVERSION_ID=3.19.1\n', False),
                                          ("lib/ld-musl-x86_64.so.1", b"\x7fELF", True)])]
    assert read_libc(alpine, "base", "sha256:3", cache=tmp_path / "c") == Libc("musl", 1, 2)
    with pytest.raises(PackagingError, match=r"cannot tell which C library base image scratch has .* set "
                                             r"trainer\.build\.platform"):
        read_libc([_layer(tmp_path, "none", [("bin/app", b"x", True)])], "scratch", "sha256:4", cache=tmp_path / "c")


def test_the_base_stacks_closure_is_read_off_the_resolution() -> None:
    def item(name: str, *requires: str) -> dict[str, object]:
        return {"metadata": {"name": name, "version": "1", "requires_dist": list(requires)}}

    report = {"install": [
        item("tensorflow", "numpy<2", "keras>=3", "tensorflow-intel; platform_system == 'Windows'",
             "nvidia-cudnn-cu12; extra == 'and-cuda'"),
        item("numpy"), item("keras", "rich"), item("rich"), item("tf-keras", "tensorflow<2.18"),
        item("pandas", "numpy>=1.22"), item("nvidia-cudnn-cu12"), item("tensorflow-intel")]}
    env = wheels._marker_env("3.10", ("manylinux_2_31_x86_64",))
    closure = wheels.provided_closure(["tensorflow==2.17.*"], report, env)
    assert closure == {"tensorflow", "numpy", "keras", "rich"}
    assert wheels._pins(report, closure) == ["nvidia-cudnn-cu12==1", "pandas==1", "tensorflow-intel==1",
                                             "tf-keras==1"]
    assert "nvidia-cudnn-cu12" in wheels.provided_closure(["tensorflow[and-cuda]==2.17.*"], report, env)


@pytest.mark.slow
def test_what_the_base_provides_is_not_installed_again_unless_asked(tmp_path: Path) -> None:
    """A TensorFlow-like base: the trainer's keras-like dependency fits its flow, only that is installed."""
    wheelhouse = tmp_path / "wheels"
    make_wheel(wheelhouse, "fakeflow", "2.17.1", requires=("fakenum<2",))
    make_wheel(wheelhouse, "fakeflow", "2.18.0", requires=("fakenum<3",))
    make_wheel(wheelhouse, "fakenum", "1.26.4")
    make_wheel(wheelhouse, "fakenum", "2.0.0")
    make_wheel(wheelhouse, "fakekeras", "2.17.0", requires=("fakeflow>=2.17,<2.18", "fakeutil"))
    make_wheel(wheelhouse, "fakeutil", "1.0")
    index = ("--no-index", "--find-links", str(wheelhouse))
    platforms = platform_tags("manylinux_2_31_x86_64")

    def names(layer: object) -> set[str]:
        assert isinstance(layer, wheels.Layer)
        with tarfile.open(layer.path) as tar:
            return {n[len(SITE) + 1:].split("-")[0].split(".")[0] for n in tar.getnames()
                    if n.startswith(SITE + "/") and n.endswith(".dist-info")}

    layer = wheels.requirements_layer([], "3.11", platforms=platforms, index_args=index, cache=tmp_path / "c",
                                      declared=["fakekeras"], provided=["fakeflow==2.17.*"])
    assert names(layer) == {"fakekeras", "fakeutil"}  # neither fakeflow nor its fakenum
    asked = wheels.requirements_layer(["fakenum==1.26.4"], "3.11", platforms=platforms, index_args=index,
                                      cache=tmp_path / "c", declared=["fakekeras"], provided=["fakeflow==2.17.*"])
    assert names(asked) == {"fakekeras", "fakeutil", "fakenum"}  # named in build.requirements: installed
    whole = wheels.requirements_layer([], "3.11", platforms=platforms, index_args=index, cache=tmp_path / "c",
                                      declared=["fakekeras"])
    assert names(whole) == {"fakekeras", "fakeutil", "fakeflow", "fakenum"}  # a base that provides nothing
    assert wheels.requirements_layer([], "3.11", platforms=platforms, index_args=index, cache=tmp_path / "c",
                                     declared=["fakenum"], provided=["fakeflow==2.17.*"]) is None  # all in the base
    with pytest.raises(PackagingError, match=r"conflict .* fit its TensorFlow"):
        wheels.requirements_layer([], "3.11", platforms=platforms, index_args=index, cache=tmp_path / "c",
                                  declared=["fakekeras"], provided=["fakeflow==2.18.*"])


@pytest.mark.slow
def test_numpy_246_resolves_for_a_cp311_base_and_manylinux2014_alone_says_which_tags(tmp_path: Path) -> None:
    """numpy 2.4's cp311 wheels are manylinux_2_28: a glibc 2.36 base takes them (downloads one ~16 MB wheel)."""
    layer = wheels.requirements_layer(["numpy==2.4.6"], "3.11", platforms=platform_tags("manylinux_2_36_x86_64"),
                                      cache=tmp_path / "c", dependencies=False)
    assert layer is not None
    with tarfile.open(layer.path) as tar:
        assert any(n.startswith(f"{SITE}/numpy-2.4.6.dist-info") for n in tar.getnames())
    with pytest.raises(PackagingError) as err:
        wheels.requirements_layer(["numpy==2.4.6"], "3.11", platforms=platform_tags("manylinux2014_x86_64"),
                                  cache=tmp_path / "c", dependencies=False)
    message = str(err.value)
    assert "\n" not in message
    assert ("requirement 'numpy==2.4.6' has no wheel for Python 3.11 (cp311) on manylinux_2_17_x86_64 and older "
            "manylinux tags (glibc 2.17)") in message


PROBE = """\
import importlib.util, os, site, sys
print(os.environ.get("PTH_RAN"), site.getusersitepackages() in sys.path,
      importlib.util.find_spec("tf_keras") is not None, importlib.util.find_spec("tensorflow") is not None)
"""


@pytest.mark.slow
@needs_registry
def test_the_keras_templates_declared_dependency_and_a_pth_file_work_in_the_image(
        registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    """The keras template on a plain Python base, `requirements` naming only a wheel with a .pth file: its
    own tf-keras is in the image (from its pyproject.toml) and the .pth file runs in the image's Python (a
    chroot of the unpacked image, the image's environment). tf-keras alone (dependencies false): no
    TensorFlow download."""
    if (why := _missing()) is not None:
        pytest.skip(why)
    entries = python_rootfs_entries()
    if entries is None:
        pytest.skip("no /usr/bin/python3.11 (and ldd) to make a runnable base image from")
    push_base(registry.client(), "base/python", entries, tmp_path,
              env=["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHON_VERSION=3.11"])
    root = tmp_path / "keras"
    shutil.copytree(REPO / "trainer_templates" / "keras", root)
    wheel = make_wheel(tmp_path / "wheels", "tinypth", "1.0",
                       extra={"tinypth.pth": "import os; os.environ.setdefault('PTH_RAN', 'yes')\n"})
    spec = ImageSpec(base=f"{registry.host}/base/python:base", repository=f"{registry.host}/team/keras",
                     module="trainer.task", requirements=("tinypth==1.0",), dependencies=False,
                     index_args=("--find-links", str(wheel.parent)), python="python3.11")
    pushed = build_and_push(spec, root, cache=tmp_path / "cache")
    rootfs, env, cwd = _unpack(pushed.image.split("@")[0], tmp_path)
    site_dir = rootfs / SITE
    assert (site_dir / "tf_keras").is_dir() and (site_dir / "tinypth.pth").is_file()
    assert not (site_dir / "tensorflow").exists()
    assert json.loads((tmp_path / "cache" / "image-bases").joinpath(
        next(p.name for p in (tmp_path / "cache" / "image-bases").iterdir())).read_text())["minor"] >= 17
    done = subprocess.run(["python3.11", "-c", PROBE], env=env, capture_output=True, text=True, timeout=60,
                          check=False, preexec_fn=lambda: (os.chroot(rootfs), os.chdir(cwd)))  # noqa: PLW1509
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["yes", "True", "True", "False"]


def _missing() -> str | None:
    for tool in ("skopeo", "umoci"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install skopeo umoci; .ci/run does)"
    if os.geteuid() != 0:
        return "umoci unpack and chroot need root"
    return None


def _unpack(image: str, tmp: Path) -> tuple[Path, dict[str, str], str]:
    """skopeo copies the pushed image to an OCI layout, umoci unpacks it: (rootfs, env, working dir)."""
    tag = image.rsplit(":", 1)[1]
    layout, bundle = tmp / "layout", tmp / "bundle"
    subprocess.run(["skopeo", "copy", "--src-tls-verify=false", f"docker://{image}", f"oci:{layout}:{tag}"],
                   check=True, capture_output=True, timeout=120)
    rootfs = unpack_bundle(layout, tag, bundle, timeout=120)
    process = json.loads((bundle / "config.json").read_text())["process"]
    return rootfs, dict(item.split("=", 1) for item in process["env"]), str(process["cwd"])
