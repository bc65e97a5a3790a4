"""The launcher image (vtrain.trainer.image.launcher, issue 33): built daemonlessly on a real Python base, pushed
to a real docker-registry, unpacked with umoci and run under runc/crun: vtrain, kfp and the step's imports work
inside, the job file is at its absolute path, no layer holds a credential, and a second build sends nothing.

The base is this machine's Debian python3.11 with its whole standard library and the libraries its extension
modules link (~60 MB); the requirements are vtrain's own (core + pipelines extra), resolved as wheels from the
machine's pip index. kfp-server-api ships only an sdist: the launcher builds it as a pure wheel from the index (a folder
KFP_WHEELS names, default /tmp/pipelines_whl, is added to pip's find-links when it holds one: an offline machine)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import write_job
from tests.trainer.image_helpers import Registry, make_trainer, needs_registry, push_base, unpack_bundle
from vtrain.cli import cli
from vtrain.errors import PackagingError
from vtrain.trainer.credentials import credential_name_reason
from vtrain.trainer.image.launcher import LauncherFiles, launcher_files
from vtrain.trainer.image.layers import Entry

pytest.importorskip("kfp", reason="the pipelines extra is not installed")
pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is not installed")
from vtrain.pipelines import launcher_image, planned_launcher_image  # noqa: E402
from vtrain.pipelines.image import launcher_job  # noqa: E402

KFP_WHEELS = Path(os.environ.get("KFP_WHEELS", "/tmp/pipelines_whl"))
#: A PEM private key with its body (code that only names the header, as a secret scanner does, is no key).
KEY_BLOCK = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{60,}")
STEP = """\
import os, subprocess, sys
os.environ["_KFP_RUNTIME"] = "true"  # as KFP's executor runs a component
import kfp.dsl.executor_main  # noqa: F401
from vtrain.pipelines.launcher import launch  # the step's body: kfp, Google's VertexModel, vtrain
print("step imports ok", launch.__name__)
for argv in (["--version"], ["validate", sys.argv[1]]):
    done = subprocess.run([sys.executable, "-m", "vtrain", *argv], capture_output=True, text=True)
    print(argv[0], done.returncode, done.stdout.strip(), done.stderr.strip()[-800:])
"""


def _job(folder: Path) -> Path:
    make_trainer(folder)
    return write_job(folder, """
        name: launched
        region: us-central1
        staging_bucket: gs://launcher-test/staging
        trainer:
          package: .
          module: trainer.task
        cluster:
          chief: {machine_type: n1-standard-4}
        """)


def _full_python() -> list[Entry] | None:
    """Debian's python3.11, its whole standard library (less tests and GUI) and what ldd says it and its
    extension modules need: a base in which pip-installed wheels import."""
    python, stdlib = Path("/usr/bin/python3.11"), Path("/usr/lib/python3.11")
    if not python.is_file() or not stdlib.is_dir() or shutil.which("ldd") is None:
        return None
    skip = {"dist-packages", "site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "__pycache__"}
    entries: list[Entry] = [("usr/bin/python3.11", python, True), ("usr/bin/python3", python, True)]
    linked: set[str] = set()
    for path in sorted(stdlib.rglob("*")):
        parts = path.relative_to(stdlib).parts
        if skip & set(parts) or not path.is_file() or path.is_symlink():
            continue
        entries.append((str(path).lstrip("/"), path, False))
    for binary in [python, *sorted((stdlib / "lib-dynload").glob("*.so"))]:
        done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            parts = line.split()
            found = parts[2] if "=>" in parts and len(parts) > 3 else (parts[0] if parts else "")
            if found.startswith("/") and os.path.isfile(found):
                linked.add(found)  # as ldd names it: /lib64/ld-linux-x86-64.so.2 is the ELF interpreter
    for extra in ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"):
        if os.path.isfile(extra):  # manylinux wheels (grpcio, protobuf) take them from the system
            linked.add(extra)
    entries += [(p.lstrip("/"), Path(p), os.access(p, os.X_OK)) for p in sorted(linked)]
    return entries


def _layer_names(blob: Path) -> list[str]:
    with gzip.open(blob) as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
        return [member.name for member in tar]


@pytest.mark.slow
@needs_registry
def test_the_launcher_image_runs_vtrain_and_the_step_with_the_job_at_its_path(
        registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vtrain.local.containers import find_runtime, runtime_spec

    runtime, why = find_runtime(tmp_path / "cache")
    if runtime is None:
        pytest.skip(f"no container runs here: {why}")
    if shutil.which("skopeo") is None:
        pytest.skip("skopeo is not installed (apt-get install skopeo; .ci/run does)")
    entries = _full_python()
    if entries is None:
        pytest.skip("no /usr/bin/python3.11 with its standard library (and ldd) to make a base image from")
    if any(KFP_WHEELS.glob("kfp_server_api-*")):  # pip's own setting, so that `vtrain package` sees it as well
        monkeypatch.setenv("PIP_FIND_LINKS", f"{os.environ.get('PIP_FIND_LINKS', '')} {KFP_WHEELS}".strip())
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(tmp_path / "vtrain-cache"))
    push_base(registry.client(), "base/python", entries, tmp_path,
              env=["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHON_VERSION=3.11.2", "LANG=C.UTF-8"])
    base = f"{registry.host}/base/python:base"
    job = _job(tmp_path / "jobs" / "launched")
    repository = f"{registry.host}/team/launcher"
    planned = planned_launcher_image(job, repository, base)
    try:
        pushed = launcher_image(job, repository, base=base)
    except PackagingError as err:
        if "kfp-server-api" in str(err) and not any(KFP_WHEELS.glob("kfp_server_api-*")):
            pytest.skip(f"the pip index has no kfp-server-api sdist to build its wheel from: {err}")
        raise
    assert pushed.image.split("@")[0] == planned
    assert {b["role"] for b in pushed.blobs} >= {"base", "requirements", "vtrain", "job", "config"}

    layers = tmp_path / "vtrain-cache" / "image-layers"
    names = [n for layer in layers.glob("requirements-*.tar.gz") for n in _layer_names(layer)]
    assert any(n.endswith("site-packages/kfp/dsl/executor_main.py") for n in names)
    assert any(n.endswith("google_cloud_pipeline_components/types/artifact_types.py") for n in names)

    layout, bundle = tmp_path / "layout", tmp_path / "bundle"
    tag = planned.rsplit(":", 1)[1]
    subprocess.run(["skopeo", "copy", "--src-tls-verify=false", f"docker://{planned}", f"oci:{layout}:{tag}"],
                   check=True, capture_output=True, timeout=300)
    rootfs = unpack_bundle(layout, tag, bundle)
    assert (rootfs / str(job).lstrip("/")).read_text() == job.read_text()
    assert (rootfs / str(job.parent / "trainer" / "task.py").lstrip("/")).is_file()
    # no credential in any layer vtrain added: no private key anywhere (the wheels' CA bundles are public
    # certificates), no file of vtrain's or the job folder's that looks like one by its name
    added = [p for p in [*(rootfs / "opt/vtrain").rglob("*"), *(rootfs / str(job.parent).lstrip("/")).rglob("*")]
             if p.is_file() and not p.is_symlink()]
    assert [p for p in added if KEY_BLOCK.search(p.read_bytes())] == []
    site = rootfs / "opt/vtrain/deps/lib/python3.11/site-packages"
    ours = [p for p in added if not p.is_relative_to(site) or p.relative_to(site).parts[0].startswith("vtrain")]
    assert ours and [p for p in ours if credential_name_reason(p.relative_to(rootfs).as_posix())] == []
    image = json.loads((bundle / "config.json").read_text())["process"]
    env = dict(item.split("=", 1) for item in image["env"])
    assert image["args"] == ["python3", "-m", "vtrain"] and image["cwd"] == str(job.parent)
    spec = runtime_spec(rootfs=rootfs, args=["python3", "-c", STEP, str(job)],  # the root writable, as on Vertex
                        env={**env, "HOME": "/root", "VTRAIN_CACHE_DIR": "/root/.cache/vtrain"}, cwd=str(job.parent),
                        mounts=[], rootless=runtime.rootless, readonly=False)
    run_bundle = tmp_path / "run"
    run_bundle.mkdir()
    (run_bundle / "config.json").write_text(json.dumps(spec))
    name = f"vtrain-launcher-test-{os.getpid()}"
    try:
        done = subprocess.run(runtime.command("run", "--bundle", str(run_bundle), name), capture_output=True,
                              text=True, timeout=300, check=False)
    finally:
        subprocess.run(runtime.command("delete", "--force", name), capture_output=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "step imports ok launch"
    assert lines[1].startswith("--version 0 vtrain, version ")
    assert lines[2].startswith("validate 0 "), lines[2]

    again = CliRunner().invoke(cli, ["package", str(job), "--launcher", repository, "--launcher-base", base,
                                     "-o", "json"])
    assert again.exit_code == 0, again.output
    said = json.loads(again.stdout)
    assert said["image"] == pushed.image and said["sent"] == 0
    assert {b["action"] for b in said["blobs"]} == {"present"}
    text = CliRunner().invoke(cli, ["package", str(job), "--launcher", repository, "--launcher-base", base])
    assert text.exit_code == 0 and f"launcher {pushed.image}  (nothing sent: the registry had it)" in text.stdout


def _files(job: Path, *, allow_credentials: bool = False) -> LauncherFiles:
    """What the launcher image of `job` holds, as vtrain.pipelines and `package --launcher` choose it."""
    named = launcher_job(job, allow_credentials=allow_credentials)
    return launcher_files(job, named.package, files=named.files, allow_credentials=allow_credentials)


def test_a_credential_in_the_trainer_folder_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    job = _job(tmp_path / "jobs" / "launched")
    (job.parent / "service-account.json").write_text(json.dumps({"type": "service_account", "private_key": "x"}))
    with pytest.raises(PackagingError, match="service-account.json"):
        _files(job)
    files = _files(job, allow_credentials=True)
    assert any(name.endswith("service-account.json") for name, _, _ in files.job)


def test_the_job_folder_goes_in_at_its_absolute_path_with_the_job_file_and_vtrains_own_files(tmp_path: Path) -> None:
    job = _job(tmp_path / "jobs" / "launched")
    files = _files(job)
    names = [name for name, _, _ in files.job]
    assert str(job.absolute()).lstrip("/") in names
    assert str(job.parent / "trainer" / "task.py").lstrip("/") in names
    own = [name for name, _, _ in files.vtrain]
    assert "vtrain/pipelines/launcher.py" in own and "vtrain/cli.py" in own
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in own)
    assert planned_launcher_image(job, "127.0.0.1:5000/team/launcher", "127.0.0.1:5000/base/python:base") == \
        planned_launcher_image(job, "127.0.0.1:5000/team/launcher", "127.0.0.1:5000/base/python:base")
    before = planned_launcher_image(job, "127.0.0.1:5000/team/launcher", "127.0.0.1:5000/base/python:base")
    (job.parent / "trainer" / "task.py").write_text("print('changed')\n")
    assert planned_launcher_image(job, "127.0.0.1:5000/team/launcher", "127.0.0.1:5000/base/python:base") != before


def test_package_launcher_refuses_a_credential_before_any_registry_is_asked(tmp_path: Path) -> None:
    job = _job(tmp_path / "jobs" / "launched")
    (job.parent / ".env").write_text("TOKEN=abc\n")
    done = CliRunner().invoke(cli, ["package", str(job), "--launcher", "127.0.0.1:9/team/launcher"])
    assert done.exit_code == 1
    assert "refusing to package 1 file" in done.output and ".env" in done.output
    assert "Traceback" not in done.output and "127.0.0.1:9" not in done.output  # no registry was asked


@pytest.mark.parametrize(("argv", "said"), [
    (["--launcher-base", "python:3.11-slim"], "--launcher-base needs --launcher REPOSITORY"),
    (["--launcher", "127.0.0.1:9/team/launcher", "--set", "name=other"], "--set does not apply to --launcher"),
    (["--launcher", "Not A Repository!"], "Not A Repository!"),
])
def test_package_launcher_mistakes_are_one_line(tmp_path: Path, argv: list[str], said: str) -> None:
    job = _job(tmp_path / "jobs" / "launched")
    done = CliRunner().invoke(cli, ["package", str(job), *argv])
    assert done.exit_code in (1, 2) and said in done.output, done.output
    assert "Traceback" not in done.output and len(done.output.strip().splitlines()) == 1


def test_a_trainer_outside_the_job_folder_goes_in_at_its_own_path(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path / "trainers" / "t")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "requirements.txt").write_text("numpy==1.26.4\n")
    job = write_job(tmp_path / "configs", """
        name: launched
        region: us-central1
        staging_bucket: gs://launcher-test/staging
        trainer:
          package: ../trainers/t
          module: trainer.task
        cluster:
          chief: {machine_type: n1-standard-4}
        """)
    names = [name for name, _, _ in _files(job).job]
    assert str(trainer / "trainer" / "task.py").lstrip("/") in names
    # the job file names no requirements.txt (no trainer.build): the rest of its folder stays out
    assert str(tmp_path / "configs" / "requirements.txt").lstrip("/") not in names
    (trainer / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    with pytest.raises(PackagingError, match="id_rsa"):
        launcher_files(job, trainer)
    from vtrain.jobfile.load import load_config

    assert load_config(str(job)).trainer.package == trainer  # what vtrain.pipelines and package --launcher pass
    with pytest.raises(PackagingError, match="id_rsa"):
        planned_launcher_image(job, "127.0.0.1:9/team/launcher")
