"""`vtrain submit` of a `trainer.build` job (issue 23): the image is built and pushed to a real CNCF
distribution registry on 127.0.0.1 (Debian's docker-registry) before the CustomJob is created in the
in-repo Vertex emulator, with the real aiplatform client. Unchanged code pushes 0 bytes; a one-line
change pushes the trainer layer (and the config) only; a push that cannot happen creates no job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import write_job
from tests.trainer.image_helpers import (
    FAKE_LIBC,
    PASSWORD,
    USER,
    Registry,
    make_sdist,
    make_trainer,
    make_wheel,
    needs_registry,
    push_base,
    stop_registry,
)
from vtrain.cli import cli
from vtrain.cloud.submit import submit_job
from vtrain.cloud.target import Where
from vtrain.emulator import Emulator, RunContext, RunResult
from vtrain.errors import PackagingError

PROJECT = "test-project"


def _runner(job: object, ctx: RunContext) -> RunResult:
    return RunResult()


pytestmark = [needs_registry, pytest.mark.slow, pytest.mark.emulator(runner=_runner, cancel_seconds=0.2)]


@pytest.fixture
def setup(tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """A base image on the registry, a trainer, a requirements file with a local wheel; returns the job file."""
    monkeypatch.delenv("VTRAIN_CACHE_DIR")  # the cache under XDG_CACHE_HOME, this test's own
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    push_base(registry.client(), "base/python", [("usr/bin/python3", b"#!/bin/sh\n", True), FAKE_LIBC], tmp_path)
    make_trainer(tmp_path / "t")
    wheels = make_wheel(tmp_path / "wheels").parent
    make_sdist(wheels)
    (tmp_path / "requirements.txt").write_text(f"--no-index\n--find-links {wheels}\ntinyreq==1.0\n")
    return write_job(tmp_path, f"""
        name: built
        region: us-central1
        trainer:
          package: t
          module: trainer.task
          image: {registry.host}/base/python:base
          build:
            repository: {registry.host}/team/trainer
            requirements: requirements.txt
          args: [--epochs=1]
        cluster:
          chief: {{machine_type: n1-standard-4}}
          workers: {{replicas: 1}}
        """)


def _where(emu: Emulator) -> Where:
    return Where(project=PROJECT, api_endpoint=emu.url, env={}, gcloud=lambda prop: None)


def _sent(result: object, role: str) -> int:
    return sum(int(b["size"]) for b in result.images[0].blobs  # type: ignore[attr-defined]
               if b["role"] == role and b["action"] == "uploaded")


def test_submit_pushes_the_image_then_creates_the_job_with_its_tag(setup: Path, emu: Emulator,
                                                                   registry: Registry) -> None:  # noqa: F811
    first = submit_job(setup, where=_where(emu))
    [pushed] = first.images
    tag = pushed.image.split("@")[0]
    pools = first.job.proto.job_spec.worker_pool_specs
    assert [p.container_spec.image_uri for p in pools] == [tag, tag]
    assert list(pools[1].container_spec.command) == ["python3", "-m", "trainer.task"]
    assert list(pools[1].container_spec.args) == ["--epochs=1"]
    assert {b["role"]: b["action"] for b in pushed.blobs} == {  # the base layer mounted, never streamed
        "base": "mounted", "requirements": "uploaded", "runtime": "uploaded", "trainer": "uploaded",
        "config": "uploaded"}
    assert registry.client().manifest("team/trainer", tag.rsplit(":", 1)[1]) is not None
    assert first.staged == ()  # nothing staged: the trainer is in the image

    again = submit_job(setup, where=_where(emu))
    assert again.images[0].sent == 0 and again.images[0].image == pushed.image  # same digest, 0 bytes
    assert {b["action"] for b in again.images[0].blobs} == {"present"}

    task = setup.parent / "t" / "trainer" / "task.py"
    task.write_text(task.read_text() + "# one more line\n")
    changed = submit_job(setup, where=_where(emu))
    sent = {b["role"] for b in changed.images[0].blobs if b["action"] == "uploaded"}
    assert sent == {"trainer", "config"} and changed.images[0].sent == _sent(changed, "trainer") + _sent(
        changed, "config")
    assert changed.job.proto.job_spec.worker_pool_specs[0].container_spec.image_uri != tag
    assert len(emu.jobs()) == 3


def test_a_push_that_cannot_happen_creates_no_job(setup: Path, emu: Emulator, registry: Registry,  # noqa: F811
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stop_registry(registry)
    monkeypatch.setenv("VTRAIN_NETWORK_TIMEOUT", "1")  # gives up within 3 s: 3 attempts, not 5 over 7.5 s
    with pytest.raises(PackagingError) as info:
        submit_job(setup, where=_where(emu))
    assert "\n" not in str(info.value) and registry.host in str(info.value)
    assert not [r for r in emu.requests if r["method"] == "POST"] and emu.jobs() == []


def test_an_unauthorised_registry_is_one_line_exit_1_and_no_job(tmp_path: Path, emu: Emulator,
                                                                auth_registry: Registry) -> None:  # noqa: F811
    push_base(auth_registry.client(credentials=lambda host: (USER, PASSWORD)), "base/python",
              [("usr/bin/python3", b"#!/bin/sh\n", True), FAKE_LIBC], tmp_path)
    make_trainer(tmp_path / "t")
    job = write_job(tmp_path, f"""
        name: built
        trainer:
          package: t
          module: trainer.task
          image: {auth_registry.host}/base/python:base
          build: {{repository: {auth_registry.host}/team/trainer}}
        cluster:
          chief: {{machine_type: n1-standard-4}}
        """)
    done = CliRunner().invoke(cli, ["submit", str(job), "--project", PROJECT, "--api-endpoint", emu.url])
    assert done.exit_code == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: registry {auth_registry.host} refused access (401 unauthorized)")
    assert emu.jobs() == []


def test_a_missing_base_or_an_sdist_only_requirement_is_one_line_and_no_job(setup: Path, emu: Emulator,
                                                                             registry: Registry) -> None:  # noqa: F811
    with pytest.raises(PackagingError, match="^base image .*base/python:gone not found"):
        submit_job(setup, where=_where(emu), overrides=[f"trainer.image={registry.host}/base/python:gone"])
    reqs = setup.parent / "requirements.txt"
    reqs.write_text(reqs.read_text() + "onlysdist==1.0\n")
    with pytest.raises(PackagingError, match="requirement 'onlysdist==1.0' has no wheel for Python 3.11"):
        submit_job(setup, where=_where(emu))
    assert emu.jobs() == [] and registry.client().manifest("team/trainer", "latest") is None


def test_the_cli_submits_and_says_what_each_image_sent(setup: Path, emu: Emulator) -> None:
    args = ["submit", str(setup), "--project", PROJECT, "--api-endpoint", emu.url, "-o", "json"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    lines = [line for line in done.stderr.splitlines() if line.startswith("image ")]
    assert len(lines) == 1 and "mounted: base, uploaded: requirements trainer runtime config" in lines[0]
    body = json.loads(done.stdout)
    assert body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] in lines[0]
    text = CliRunner().invoke(cli, args[:-2])  # text: each layer's fate as it happens, on stderr
    assert text.exit_code == 0, text.output
    assert [line.split()[:2] for line in text.stderr.splitlines() if line.startswith("  ")][:5] == [
        [role, "present"] for role in ("base", "requirements", "trainer", "runtime", "config")]
    dry = CliRunner().invoke(cli, ["submit", str(setup), "--dry-run", "-o", "json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["images"] == [body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]]


def test_package_builds_and_pushes_the_image_and_again_sends_nothing(setup: Path, registry: Registry) -> None:  # noqa: F811
    first = CliRunner().invoke(cli, ["package", str(setup), "-o", "json"])
    assert first.exit_code == 0, first.output
    [image] = json.loads(first.stdout)
    assert image["sent"] > 0 and image["image"].startswith(f"{registry.host}/team/trainer:")
    again = CliRunner().invoke(cli, ["package", str(setup)])
    assert again.exit_code == 0, again.output
    assert again.stdout == f"image    {image['image']}  (sent 0 B; present: base requirements trainer runtime config)\n"
    assert [line.split()[:2] for line in again.stderr.splitlines()] == [  # progress, layer by layer
        [role, "present"] for role in ("base", "requirements", "trainer", "runtime", "config")]
