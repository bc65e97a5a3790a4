"""Issue 10's local classes, each against real processes: concurrent runs on one output dir (1),
SIGTERM while building (6), daemonizing trainers (7), the environment cache (10), exit codes and
small things (12). The probe trainer (tests/data/trainers/probe) stands in for TensorFlow.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.local.test_local_run import PROBE, TWO_WORKERS, alive, cli_env, job_file
from vtrain.cli import cli
from vtrain.local import envcache
from vtrain.local.runner import run_local

CHIEF = "  chief: {machine_type: n1-standard-4}"


def vtrain(*args: str, env: dict[str, str], **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "vtrain", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)  # type: ignore[call-overload]


def read_until(stream: io.TextIOBase, pattern: str, timeout: float = 120) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m
    raise AssertionError(f"{pattern!r} never came; got:\n{''.join(seen)}")


def runs(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "vtrain-local").iterdir() if p.name.startswith("local-"))


# --------------------------------------------------------------------------- class 1: concurrent runs


@pytest.mark.slow
def test_concurrent_runs_keep_their_own_files_and_never_share_a_model_dir(tmp_path: Path, cache: Path) -> None:
    """Three real `vtrain local` processes on one trainer: two run at once in two output dirs (one
    environment, built once); a third on a live run's dir is refused and touches nothing there."""
    path = job_file(tmp_path, ["--write=all", "--sleep=chief-0", "--seconds=3600"], TWO_WORKERS)
    shared, other = tmp_path / "shared", tmp_path / "other"
    env = cli_env(cache)
    a = vtrain("local", str(path), "--output-dir", str(shared), env=env)
    c = vtrain("local", str(path), "--output-dir", str(other), env=env)
    try:
        for proc in (a, c):
            assert proc.stdout is not None
            read_until(proc.stdout, r"\[chief-0\] probe chief-0 starting")
        [a_id] = runs(shared)
        [c_id] = runs(other)
        assert a_id != c_id
        until_written = time.monotonic() + 30
        while not (shared / "model" / "chief-0").exists() and time.monotonic() < until_written:
            time.sleep(0.1)
        refused = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(shared)],
                                 env=env, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 1, refused.stderr
        assert (f"error: output directory {shared} is in use by job {a_id} (pid {a.pid}, started "
                in refused.stderr), refused.stderr
        assert "Traceback" not in refused.stderr
        assert runs(shared) == [a_id]  # the refused run made no folder and wrote no model
        assert (shared / "model" / "chief-0").read_text() == a_id
    finally:
        for proc in (a, c):
            proc.send_signal(signal.SIGTERM)  # SIGTERM cancels like Ctrl-C
    for proc, run_id, out in ((a, a_id, shared), (c, c_id, other)):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 11, err
        assert "[vtrain] interrupted (SIGTERM): stopping every replica" in err, err  # not "Ctrl-C"
        result = json.loads((out / "vtrain-local" / run_id / "result.json").read_text())
        assert result["state"] == "JOB_STATE_CANCELLED"
        log = (out / "vtrain-local" / run_id / "job.log").read_text()
        assert "[chief-0] probe chief-0 starting" in log and "[worker-1] probe worker-1 done" in log
    # The dir is free again: the next run gets a folder of its own, and `latest` points to it.
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(shared),
                           "--set", "trainer.args=[--write=all]"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    b_id = next(r for r in runs(shared) if r != a_id)
    assert runs(shared) == sorted([a_id, b_id])
    assert os.readlink(shared / "vtrain-local" / "latest") == b_id
    assert (shared / "model" / "chief-0").read_text() == b_id
    assert json.loads((shared / "vtrain-local" / a_id / "result.json").read_text())["state"] == "JOB_STATE_CANCELLED"
    assert f"logs in {shared / 'vtrain-local' / b_id}" in done.stderr


@pytest.mark.slow
def test_a_sdk_run_refuses_a_held_output_dir_and_frees_it_when_done(tmp_path: Path, cache: Path) -> None:
    from vtrain.errors import BackendError

    path = job_file(tmp_path, ["--sleep=chief-0", "--seconds=3600"], CHIEF)
    first = run_local(path, output_dir=tmp_path / "o", cache_dir=cache)
    with pytest.raises(BackendError, match=f"is in use by job {first.name} \\(pid {os.getpid()}"):
        run_local(path, output_dir=tmp_path / "o", cache_dir=cache)
    first.cancel(force=True)
    assert first.wait(timeout=60) == "JOB_STATE_CANCELLED"
    second = run_local(job_file(tmp_path, [], CHIEF), output_dir=tmp_path / "o", cache_dir=cache)
    assert second.wait(timeout=60) == "JOB_STATE_SUCCEEDED"
    assert second.run_dir != first.run_dir and (first.run_dir / "job.log").is_file()


# --------------------------------------------------------------------------- class 7: daemons


def daemons(text: str) -> list[int]:
    return [int(p) for p in re.findall(r"daemonized (\d+)", text)]


@pytest.mark.slow
def test_cli_a_daemonizing_trainer_does_not_outlive_the_job(tmp_path: Path, cache: Path) -> None:
    """The chief double-forks a daemon that ignores SIGTERM, then succeeds: the job ends it."""
    path = job_file(tmp_path, ["--daemonize=all"], TWO_WORKERS)
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(tmp_path / "o")],
                          env=cli_env(cache), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pids = daemons(done.stdout)
    assert len(pids) == 3
    assert not [p for p in pids if alive(p)]
    assert "ended 3 process(es) the replicas left running outside their process groups" in done.stderr, done.stderr


@pytest.mark.parametrize("how", ["fails", "cancelled", "times out"])
@pytest.mark.slow
def test_daemons_end_with_their_job_and_only_theirs(tmp_path: Path, cache: Path, how: str) -> None:
    """Two jobs in one process (as in the emulator): ending one ends its daemons, not the other's."""
    (tmp_path / "k").mkdir()
    keep = run_local(job_file(tmp_path / "k", ["--daemonize=chief-0", "--sleep=all"], CHIEF),
                     output_dir=tmp_path / "k" / "o", cache_dir=cache, out=(kept := io.StringIO()))
    args = {"fails": ["--daemonize=all", "--fail=worker-0", "--fail-after=1", "--sleep=chief-0"],
            "cancelled": ["--daemonize=all", "--sleep=all"],
            "times out": ["--daemonize=all", "--sleep=all"]}[how]
    out = io.StringIO()
    job = run_local(job_file(tmp_path, args, TWO_WORKERS), output_dir=tmp_path / "o", cache_dir=cache, out=out,
                    timeout=3 if how == "times out" else None, kill_grace=1, restart_policy="never")
    deadline = time.monotonic() + 30
    while len(daemons(out.getvalue())) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    if how == "cancelled":
        job.cancel()
    state = job.wait(timeout=60)
    assert state == {"fails": "JOB_STATE_FAILED", "cancelled": "JOB_STATE_CANCELLED",
                     "times out": "JOB_STATE_FAILED"}[how]
    pids = daemons(out.getvalue())
    assert len(pids) == 3 and not [p for p in pids if alive(p)]
    [other] = daemons(kept.getvalue())
    assert alive(other) and not keep.done
    keep.cancel(force=True)
    keep.wait(timeout=60)
    assert not alive(other)


# --------------------------------------------------------------------------- class 6: SIGTERM while building

SLOW_BACKEND = '''
"""A build backend that takes its time and starts a helper process, like a real one compiling."""
import os, subprocess, sys, time

def get_requires_for_build_sdist(config_settings=None):
    return []

def build_sdist(sdist_directory, config_settings=None):
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["SLOW_BACKEND_PIDS"], "w") as f:
        f.write(f"{os.getpid()} {helper.pid}\\n")
    time.sleep(600)
'''


def slow_trainer(tmp_path: Path) -> Path:
    pkg = tmp_path / "slow"
    (pkg / "trainer").mkdir(parents=True)
    (pkg / "trainer" / "__init__.py").write_text("")
    (pkg / "trainer" / "task.py").write_text("print('hi')\n")
    (pkg / "slow_backend.py").write_text(SLOW_BACKEND)
    (pkg / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = []
        build-backend = "slow_backend"
        backend-path = ["."]

        [project]
        name = "slow"
        version = "0.1"
        """))
    path = tmp_path / "job.yaml"
    path.write_text(f"name: slow\nstaging_bucket: {tmp_path / 'staging'}\ntrainer:\n  package: {pkg}\n"
                    "  module: trainer.task\ncluster:\n  chief: {machine_type: n1-standard-4}\n")
    (tmp_path / "staging").mkdir()
    return path


@pytest.mark.alone
@pytest.mark.parametrize(("command", "sig", "code"), [
    (["package", "--target", "local"], signal.SIGTERM, 143),
    (["package", "--target", "local"], signal.SIGINT, 130),
    (["submit", "--dry-run", "--project", "my-project", "--set", "staging_bucket=gs://bkt/x"], signal.SIGTERM, 143),
    (["local"], signal.SIGTERM, 11),
    (["local"], signal.SIGINT, 11),  # Ctrl-C while the environment is prepared: CANCELLED, as the README says
])
def test_a_signal_while_building_leaves_no_process_and_no_temp_files(tmp_path: Path, cache: Path, command: list[str],
                                                                     sig: int, code: int) -> None:
    path = slow_trainer(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    pids_file = tmp_path / "pids"
    env = {**cli_env(cache), "TMPDIR": str(tmp), "SLOW_BACKEND_PIDS": str(pids_file)}
    cmd = vtrain(*command, str(path), env=env)
    deadline = time.monotonic() + 120
    while not pids_file.exists() or not pids_file.read_text().endswith("\n"):
        assert time.monotonic() < deadline and cmd.poll() is None, cmd.communicate()
        time.sleep(0.05)
    backend, helper = map(int, pids_file.read_text().split())
    assert alive(backend) and alive(helper)
    assert any(p.name.startswith("vtrain-") for p in tmp.iterdir())  # the build tree is there
    cmd.send_signal(sig)
    out, err = cmd.communicate(timeout=60)
    assert cmd.returncode == code, err
    assert "Traceback" not in err and "Aborted!" not in err
    if code != 11:
        assert f"error: interrupted by {signal.Signals(sig).name}: stopped every process it started" in err
    else:
        assert "ended JOB_STATE_CANCELLED before its replicas started" in err
    assert not alive(backend) and not alive(helper)
    assert list(tmp.iterdir()) == []
    assert not list((tmp_path / "staging").rglob("*.tar.gz"))


@pytest.mark.slow
def test_what_a_killed_copy_left_is_swept(tmp_path: Path) -> None:
    from vtrain.trainer import packaging

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = int(dead.stdout)
    staging = tmp_path / "staging" / "vtrain"
    staging.mkdir(parents=True)
    stale = [staging / f".trainer-abc.tar.gz.{gone}.x1y2.tmp", Path(tempfile.gettempdir()) / f"vtrain-build-{gone}-ab"]
    live = [staging / f".other.tar.gz.{os.getpid()}.x1y2.tmp",  # its vtrain still runs
            staging / f".young.tar.gz.{gone}.x1y2.tmp"]  # just written: perhaps another pid namespace's
    stale[0].write_bytes(b"half")
    stale[1].mkdir(exist_ok=True)
    for p in live:
        p.write_bytes(b"in progress")
    for p in [*stale, live[0]]:
        os.utime(p, (time.time() - 3600, time.time() - 3600))
    staged = packaging.build_and_stage(PROBE, str(tmp_path / "staging"), "trainer.task", progress=False)
    assert not [p for p in stale if p.exists()] and all(p.exists() for p in live)
    for obj in staged:  # a staged file reads like any other (0644 under umask 022), not mkstemp's 0600
        mode = stat.S_IMODE(Path(obj.uri[len("file://"):]).stat().st_mode)
        umask = os.umask(0o22)
        os.umask(umask)
        assert mode == 0o666 & ~umask


# --------------------------------------------------------------------------- class 10: the environment cache


@pytest.mark.slow
def test_env_cache_rebuilds_what_it_cannot_trust_and_cache_commands(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = job_file(tmp_path, [], CHIEF)

    def run() -> str:
        notes = io.StringIO()
        job = run_local(path, output_dir=tmp_path / "o", cache_dir=cache, notices=notes)
        assert job.wait(timeout=120) == "JOB_STATE_SUCCEEDED", job.error
        return notes.getvalue()

    assert "installed in" in run()
    [venv] = [p for p in (cache / "envs").iterdir() if p.is_dir()]
    assert "cached in" in run()
    assert not list(venv.glob(".*.tmp"))  # the marker went in whole, through a rename
    marker = venv / envcache.READY
    marker.write_text(marker.read_text()[:20])  # a marker cut short (a full disk, a kill)
    assert "ready marker is damaged" in (notes := run()) and "installed in" in notes
    trainer = next((envcache._site_packages(venv) / "trainer").glob("task.py"))
    trainer.unlink()  # packages removed from under the environment
    assert "installed file(s) are gone, e.g. lib/" in (notes := run()) and "installed in" in notes
    assert "cached in" in run()

    env = {"VTRAIN_CACHE_DIR": str(cache)}
    info = CliRunner().invoke(cli, ["cache", "info", "-o", "json"], env=env)
    assert info.exit_code == 0, info.output
    data = json.loads(info.output)
    assert data["cache_dir"] == str(cache) and [e["state"] for e in data["envs"]] == ["ready"]
    assert data["envs"][0]["size"] > 0
    assert data["folders"]["sdists"]["files"] == 3  # 2 sdists, the trainer's backend list
    # An environment a running job uses is kept; the rest goes.
    (tmp_path / "p").mkdir()
    job = run_local(job_file(tmp_path / "p", ["--sleep=all"], CHIEF), output_dir=tmp_path / "p", cache_dir=cache)
    text = CliRunner().invoke(cli, ["cache", "info"], env=env).output
    assert f"cache {cache}:" in text and " in use " in text
    cleared = CliRunner().invoke(cli, ["cache", "clear"], env=env)
    assert cleared.exit_code == 0 and f"kept {venv} (in use by a running job)" in cleared.output
    assert f"removed {cache / 'sdists'}" in cleared.output and venv.is_dir()
    job.cancel(force=True)
    job.wait(timeout=60)
    cleared = CliRunner().invoke(cli, ["cache", "clear", "-o", "json"], env=env)
    assert json.loads(cleared.output)["removed"] == [str(venv)] and not venv.exists()
    assert "installed in" in run()


@pytest.mark.parametrize("part", ["envs", "sdists", "env-as-file"])
@pytest.mark.slow
def test_a_file_where_a_cache_dir_belongs_is_one_line_or_replaced(tmp_path: Path, part: str) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    path = job_file(tmp_path, [], CHIEF)
    if part == "env-as-file":  # debris where one environment goes is the cache's own: replaced
        done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(tmp_path / "o")],
                              env={**cli_env(cache)}, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        [venv] = [p for p in (cache / "envs").iterdir() if p.is_dir()]
        envcache.remove(venv)
        venv.write_text("not a venv")
    else:
        (cache / part).write_text("x")
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(tmp_path / "o")],
                          env=cli_env(cache), capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr
    if part == "env-as-file":
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 1
        *notices, said = done.stderr.splitlines()  # the runtime chosen (the suite's: host), when it got that far
        assert said == (f"error: cannot use the environment cache: {cache / part}: File exists; remove it, "
                        "or run `vtrain cache clear`")
        assert notices in ([], ["[vtrain] runtime: host: VTRAIN_RUNTIME=host: this machine's Python and TensorFlow, "
                                "not the image's"])
        cleared = CliRunner().invoke(cli, ["cache", "clear"], env={"VTRAIN_CACHE_DIR": str(cache)})
        assert cleared.exit_code == 0 and not (cache / part).exists()


# --------------------------------------------------------------------------- class 12: exit codes and small things


@pytest.mark.parametrize(("args", "message"), [
    (["local", "{job}", "--max-replicas", "1"], "--max-replicas 1 is too small: this job needs at least 2"),
    (["status", "abc"], "'abc' is neither a job ID (digits) nor a resource name"),
    (["cancel", "12/34"], "'12/34' is neither a job ID"),
    (["init", ""], "must not be empty (pass . for the current directory)"),
    (["init", "{tmp}/t", "--bucket", "gs://my-bucket#x"], "--bucket 'gs://my-bucket#x' holds '#'"),
    (["init", "{tmp}/t", "--bucket", "gs://my-bucket\nname: x"], "holds '\\n', ' '"),
    (["init", "{tmp}/t", "--bucket", "gs://UPPER"], "'UPPER' is not a valid bucket name"),
    (["init", "{tmp}/t", "--name", " "], "--name must not be blank"),
])
def test_usage_errors_exit_2_and_write_nothing(tmp_path: Path, cache: Path, args: list[str], message: str) -> None:
    path = job_file(tmp_path, [], TWO_WORKERS)
    argv = [a.format(job=path, tmp=tmp_path) for a in args]
    done = subprocess.run([sys.executable, "-m", "vtrain", *argv], env=cli_env(cache), capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "t").exists() and not (tmp_path / "vtrain.yaml").exists()


@pytest.mark.slow
def test_outputs_inside_the_package_never_change_its_hash(tmp_path: Path, cache: Path) -> None:
    """`vtrain local --output-dir .` run from the trainer's own directory, twice: built once."""
    import shutil

    from vtrain.trainer import packaging

    pkg = tmp_path / "pkg"
    shutil.copytree(PROBE, pkg)
    (pkg / "logs").mkdir()  # a folder the trainer ships, named like an output but a package
    (pkg / "logs" / "__init__.py").write_text("")
    before = packaging.scan_package(pkg)
    path = job_file(pkg, ["--write=chief-0"], CHIEF, package=pkg)
    notes = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", "."],
                              env=cli_env(cache), capture_output=True, text=True, timeout=300, cwd=pkg)
        assert done.returncode == 0, done.stderr
        notes.append(done.stderr)
    assert (pkg / "model" / "chief-0").is_file() and (pkg / "vtrain-local" / "latest").is_symlink()
    after = packaging.scan_package(pkg)
    assert after.files == sorted([*before.files, "job.yaml"]) and "logs/__init__.py" in after.files
    assert "cached in" in notes[1]
