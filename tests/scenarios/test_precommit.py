"""The `vtrain-validate` hook of .pre-commit-hooks.yaml, run by the real `pre-commit try-repo`.

pre-commit installs this repository into a fresh virtualenv (from the package registry) the
way a user's `.pre-commit-config.yaml` would, then runs the hook on the files of a temporary git
repository. One test, two runs on one installed environment. The development set has pre-commit-uv, so uv
makes that environment (~16 s for the test, where pip took ~46 s); without it, or with
DISABLE_PRE_COMMIT_UV_PATCH=1, pip does, and the test is the same. Either installs the versions uv.lock pins.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

GOOD = """\
name: good-job
trainer: {package_uris: [gs://my-bucket/trainer-0.1.tar.gz], module: trainer.task, image: tf-cpu.2-17}
cluster: {chief: {machine_type: n1-standard-4}, workers: {replicas: 2}}
"""
BAD = """\
name: bad-job
trainer: {package_uris: [gs://my-bucket/trainer-0.1.tar.gz], module: trainer.task, image: tf-cpu.2-17}
cluster:
  chief: {machine_type: n1-standard-8, accelerator: t4, accelerator_count: 3}
  workerz: {replicas: 7}
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})  # fmt: skip


def _snapshot(dest: Path) -> Path:
    """This working tree (tracked and new files, as a user would commit them) as a one-commit
    repository, so try-repo sees one fixed revision and installs its environment once."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True, capture_output=True
    ).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if rel.split("/", 1)[0] in ("tests", "benchmarks", "configs", "examples", ".ci"):
            continue  # not part of what pip installs: less to copy and build
        src = REPO / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)
    _git(dest, "init", "-q", ".")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "snapshot")
    return dest


def test_hook_manifest_names_vtrain_validate() -> None:
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "vtrain-validate" and hook["entry"] == "vtrain validate" and hook["language"] == "python"


@pytest.mark.slow
def test_pre_commit_try_repo_passes_the_good_file_and_fails_the_bad_one(tmp_path: Path) -> None:
    hooks = _snapshot(tmp_path / "vtrain-src")
    work = tmp_path / "work"
    work.mkdir()
    (work / "good.vtrain.yaml").write_text(GOOD)
    (work / "bad.vtrain.yaml").write_text(BAD)
    (work / "notes.yaml").write_text("not: a job file\n")  # not matched by the hook's `files`
    _git(work, "init", "-q", ".")
    _git(work, "add", "-A")
    # PIP_NO_COMPILE=0 is pip's `--no-compile` (its environment booleans of `--no-*` options read inverted), for
    # when pip makes the environment (uv compiles nothing unless asked): it installs without byte-compiling
    # aiplatform's thousands of modules, which took half the test's time (88 s → 49 s) and is not what the hook's
    # behaviour depends on.
    # The hook's environment resolves vtrain's requirements from the index as a user's would, constrained to what
    # uv.lock pins (UV_CONSTRAINT for uv, PIP_CONSTRAINT for pip), so a release on the index cannot turn the suite red.
    pins = tmp_path / "lock-constraints.txt"
    subprocess.run([str(Path(sys.executable).with_name("uv")), "export", "--frozen", "--no-hashes", "--no-emit-project",
                    "--quiet", "-o", str(pins)], cwd=REPO, check=True, capture_output=True)  # fmt: skip
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never",
           "PIP_NO_COMPILE": "0", "UV_CONSTRAINT": str(pins), "PIP_CONSTRAINT": str(pins)}  # fmt: skip
    pre_commit = [sys.executable, "-m", "pre_commit", "try-repo", str(hooks), "vtrain-validate", "--files"]

    good = subprocess.run([*pre_commit, "good.vtrain.yaml", "notes.yaml"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert good.returncode == 0, good.stdout + good.stderr
    assert "vtrain validate" in good.stdout and "Passed" in good.stdout

    bad = subprocess.run([*pre_commit, "bad.vtrain.yaml", "good.vtrain.yaml"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout and "exit code: 2" in bad.stdout
    assert "bad.vtrain.yaml:4:76: cluster.chief.accelerator_count:" in bad.stdout
    assert "bad.vtrain.yaml:5:3: cluster.workerz: unknown key 'workerz'" in bad.stdout
    assert "good.vtrain.yaml: valid: chief 1 × n1-standard-4; workers 2 × n1-standard-4" in bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr
