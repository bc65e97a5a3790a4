"""Image references, the config and manifest on the base's, the Python version, the offline tag."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.trainer.image_helpers import make_trainer
from vtrain.errors import PackagingError
from vtrain.trainer.image import config as cfg
from vtrain.trainer.image.build import planned_image
from vtrain.trainer.image.layers import Layer
from vtrain.trainer.image.reference import base_url, parse_reference, parse_repository, reference_problem

BASE_CONFIG = {
    "architecture": "amd64", "os": "linux",
    "config": {"Env": ["PATH=/usr/bin", "PYTHONPATH=/base/lib", "LANG=C"], "Cmd": ["bash"],
               "Labels": {"maintainer": "x"}},
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "a" * 64]},
    "history": [{"created_by": "base"}],
}


def _layer(role: str, n: str) -> Layer:
    return Layer(path=Path("/nowhere"), digest="sha256:" + n * 64, diff_id="sha256:" + n.upper() * 64, size=10,
                 role=role)


def _spec(**kw: object) -> cfg.ImageSpec:
    base = {"base": "127.0.0.1:5000/base/py:3.11", "repository": "127.0.0.1:5000/team/trainer",
            "module": "trainer.task"}
    return cfg.ImageSpec(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "registry", "repository", "reference"), [
    ("ubuntu", "registry-1.docker.io", "library/ubuntu", "latest"),
    ("tensorflow/tensorflow:2.17.0", "registry-1.docker.io", "tensorflow/tensorflow", "2.17.0"),
    ("us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest", "us-docker.pkg.dev",
     "vertex-ai/training/tf-cpu.2-17.py310", "latest"),
    ("localhost:5000/a/b@sha256:" + "0" * 64, "localhost:5000", "a/b", "sha256:" + "0" * 64),
    ("127.0.0.1:40000/base/py:base", "127.0.0.1:40000", "base/py", "base"),
])
def test_references_read_as_docker_reads_them(text: str, registry: str, repository: str, reference: str) -> None:
    ref = parse_reference(text)
    assert (ref.registry, ref.repository, ref.reference) == (registry, repository, reference)


@pytest.mark.parametrize("text", ["Upper/Case", "host:5000/repo:bad tag", "a/b@sha256:short", "a//b"])
def test_bad_references_are_one_line(text: str) -> None:
    with pytest.raises(PackagingError) as err:
        parse_reference(text)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("text", "said"), [
    (" ubuntu", "whitespace or a control character in it, which no image reference has; try 'ubuntu'"),
    ("ubuntu\n", "try 'ubuntu'"),
    ("https://localhost:5000/a/b:1", "an image reference has no scheme"),
    ("Localhost:5000/a/B:Tag", "upper-case letters: an image's registry host and repository are lower-case (only a "
                               "tag may have upper case); try 'localhost:5000/a/b:Tag'"),
    ("a/" + "b" * 10**6, "it is 1,000,002 characters; an image reference is at most 456"),
])  # fmt: skip
def test_the_one_reference_check_strips_nothing_and_is_bounded(text: str, said: str) -> None:
    """Every reader of an image reference (a build's base and target, the launcher image, the job file's image
    URIs, the emulator's uploads) goes through it: it used to strip whitespace and read any length."""
    with pytest.raises(PackagingError) as err:
        parse_reference(text, what="base image")
    assert said in str(err.value) and str(err.value).startswith("base image '") and len(str(err.value)) < 600
    assert reference_problem(text) == str(err.value).replace("base image", "image", 1)


def test_a_push_target_has_no_tag_and_loopback_is_plain_http() -> None:
    with pytest.raises(PackagingError, match="without a tag"):
        parse_repository("127.0.0.1:5000/team/trainer:v1")
    assert base_url("127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert base_url("localhost:5000") == "http://localhost:5000"
    assert base_url("[::1]:5000") == "http://[::1]:5000"
    assert base_url("us-docker.pkg.dev") == "https://us-docker.pkg.dev"
    assert base_url("127.example.com") == "https://127.example.com"


def test_the_python_version_comes_from_the_config_never_a_guess() -> None:
    assert cfg.python_version({"config": {"Env": ["PYTHON_VERSION=3.10.14"]}}, "i") == "3.10"
    assert cfg.python_version({"config": {"Labels": {"com.example.python.version": "3.9"}}}, "i") == "3.9"
    assert cfg.python_version({"config": {}}, "i", override="3.12") == "3.12"
    with pytest.raises(PackagingError, match="cannot tell which Python base image tf:2 has") as err:
        cfg.python_version({"config": {"Env": ["PATH=/usr/bin"], "Labels": {"version": "3.10"}}}, "tf:2")
    assert "\n" not in str(err.value)


def test_the_config_keeps_the_base_and_appends_vtrains() -> None:
    spec = _spec(args=("--epochs", "2"), env=(("LANG", "C.UTF-8"), ("SEED", "1")))
    layers = [_layer("requirements", "1"), _layer("runtime", "2"), _layer("trainer", "3")]
    new = cfg.image_config(BASE_CONFIG, spec, layers, epoch=0, python_version="3.11")
    inner = new["config"]
    # the requirements' site dir is the user site of PYTHONUSERBASE (so its .pth files run), and on PYTHONPATH
    assert inner["Env"] == ["LANG=C.UTF-8", "SEED=1",
                            "PYTHONPATH=/opt/vtrain/trainer:/opt/vtrain/runtime:"
                            "/opt/vtrain/deps/lib/python3.11/site-packages:/base/lib",
                            "PYTHONUSERBASE=/opt/vtrain/deps", "PATH=/opt/vtrain/deps/bin:/usr/bin"]
    assert inner["Entrypoint"] == ["python3", "-m", "trainer.task"]
    assert inner["Cmd"] == ["--epochs", "2"]
    assert inner["WorkingDir"] == "/opt/vtrain/trainer"
    assert inner["Labels"] == {"maintainer": "x"}
    assert new["rootfs"]["diff_ids"] == ["sha256:" + "a" * 64, *(layer.diff_id for layer in layers)]
    assert [h["created_by"] for h in new["history"]][0] == "base"
    assert len(new["history"]) == 4 and new["created"] == "1970-01-01T00:00:00Z"
    assert BASE_CONFIG["config"]["Cmd"] == ["bash"]  # the base's config is left as read
    assert "Cmd" not in cfg.image_config(BASE_CONFIG, _spec(), layers, python_version="3.11")["config"]  # no `bash`
    env = cfg.image_config(BASE_CONFIG, _spec(), layers, src_layout=True, python_version="3.11")["config"]["Env"]
    assert [e for e in env if e.startswith("PYTHONPATH=/opt/vtrain/trainer/src:")]
    plain = cfg.image_config(BASE_CONFIG, _spec(), layers[1:])["config"]["Env"]  # no requirements: no deps dir
    assert plain == ["PATH=/usr/bin", "LANG=C", "PYTHONPATH=/opt/vtrain/trainer:/opt/vtrain/runtime:/base/lib"]


@pytest.mark.parametrize(("base_type", "manifest_type", "config_type", "layer_type"), [
    (cfg.OCI_MANIFEST, cfg.OCI_MANIFEST, cfg.OCI_CONFIG, "application/vnd.oci.image.layer.v1.tar+gzip"),
    (cfg.DOCKER_MANIFEST, cfg.DOCKER_MANIFEST, cfg.DOCKER_CONFIG, cfg.DOCKER_LAYER),
])
def test_the_manifest_has_the_bases_flavour(base_type: str, manifest_type: str, config_type: str,
                                            layer_type: str) -> None:
    base_layer = {"mediaType": "whatever", "digest": "sha256:" + "b" * 64, "size": 5}
    manifest = cfg.image_manifest({"mediaType": base_type, "layers": [base_layer]}, "sha256:" + "c" * 64, 99,
                                  [_layer("trainer", "3")])
    assert manifest["mediaType"] == manifest_type
    assert manifest["config"] == {"mediaType": config_type, "digest": "sha256:" + "c" * 64, "size": 99}
    assert manifest["layers"][0] == base_layer
    assert manifest["layers"][1]["mediaType"] == layer_type


def test_a_manifest_list_gives_linux_amd64_or_says_what_it_has() -> None:
    index = {"manifests": [{"digest": "sha256:1", "platform": {"os": "linux", "architecture": "arm64"}},
                           {"digest": "sha256:2", "platform": {"os": "linux", "architecture": "amd64"}}]}
    assert cfg.pick_platform(index, "i")["digest"] == "sha256:2"
    with pytest.raises(PackagingError, match=r"no linux/amd64 variant \(it has: linux/arm64\)"):
        cfg.pick_platform({"manifests": index["manifests"][:1]}, "i")


def test_the_tag_hashes_every_input() -> None:
    spec = _spec()
    tag = cfg.image_tag(spec, "t" * 12, "r" * 12)
    assert tag == cfg.image_tag(spec, "t" * 12, "r" * 12)
    assert len(tag) == 12
    changed = [cfg.image_tag(spec, "u" * 12, "r" * 12), cfg.image_tag(spec, "t" * 12, "s" * 12),
               cfg.image_tag(_spec(base="127.0.0.1:5000/base/py:3.12"), "t" * 12, "r" * 12),
               cfg.image_tag(_spec(requirements=("numpy",)), "t" * 12, "r" * 12),
               cfg.image_tag(_spec(args=("--x",)), "t" * 12, "r" * 12),
               cfg.image_tag(_spec(env=(("A", "1"),)), "t" * 12, "r" * 12),
               cfg.image_tag(_spec(module="trainer.other"), "t" * 12, "r" * 12),
               cfg.image_tag(_spec(dependencies=False), "t" * 12, "r" * 12),
               cfg.image_tag(_spec(arch="arm64"), "t" * 12, "r" * 12)]
    assert len({tag, *changed}) == 10
    assert tag == "fbdd0793ef37"  # an amd64 image's tag is what it was before arch was an input
    # requirement order and spacing do not matter; the pip index does not go into the image
    assert cfg.image_tag(_spec(requirements=("b", "a")), "t" * 12, "r" * 12) == cfg.image_tag(
        _spec(requirements=("a ", "b"), index_args=("--no-index",)), "t" * 12, "r" * 12)


def test_the_planned_image_needs_no_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_trainer(tmp_path / "t")

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("planned_image opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    planned = planned_image(_spec(), root)
    assert planned.startswith("127.0.0.1:5000/team/trainer:")
    assert planned == planned_image(_spec(), root)
    (root / "trainer" / "task.py").write_text("print('changed')\n")
    assert planned_image(_spec(), root) != planned
