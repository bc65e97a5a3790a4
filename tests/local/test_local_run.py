"""`vtrain local` as real processes: a tiny probe trainer for the launcher, real TensorFlow for training.

The probe (tests/data/trainers/probe) dumps what its replica sees and exits, raises, sleeps,
listens or forks as told, so every launcher rule is checked in about a second. The `slow`
tests train the keras template with real TensorFlow on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import QuickstartRun, write_job
from vtrain.errors import BackendError, JobFailed, WaitTimeout
from vtrain.local.runner import LocalJob, run_local

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "data" / "trainers" / "probe"
KERAS = REPO / "trainer_templates" / "keras"
FULL = """  chief: {machine_type: n1-standard-4}
  workers: {replicas: 2}
  parameter_servers: {replicas: 1}
  evaluator: {}"""
TWO_WORKERS = """  chief: {machine_type: n1-standard-4}
  workers: {replicas: 2}"""
ONE_WORKER = """  chief: {machine_type: n1-standard-4}
  workers: {replicas: 1}"""  # the smallest cluster in which a peer outlives a lost replica


def job_file(tmp_path: Path, args: list[str], cluster: str = FULL, package: Path = PROBE, extra: str = "") -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: local-test\n"
        f"trainer:\n  package: {package}\n  module: trainer.task\n  args: {json.dumps(args)}\n"
        "  env: {MY_VAR: hello}\n"
        f"cluster:\n{cluster}\n{extra}\n",
        encoding="utf-8",
    )
    return path


def start(tmp_path: Path, cache: Path, args: list[str], cluster: str = FULL, **kw: Any) -> tuple[LocalJob, io.StringIO]:
    out = io.StringIO()
    job = run_local(job_file(tmp_path, args, cluster, **kw.pop("file", {})), output_dir=tmp_path / "out",
                    cache_dir=cache, out=out, **kw)
    return job, out


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie left to an init that does not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def group_alive(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def assert_clean(job: LocalJob, extra_pids: list[int] = ()) -> None:  # type: ignore[assignment]
    for label, pid in job.pids.items():
        assert not group_alive(pid), f"{label}'s process group outlived the job"
    for pid in extra_pids:
        assert not alive(pid), f"process {pid} outlived the job"
    for label, port in job.ports.items():
        assert port_free(port), f"{label}'s port {port} is still taken"


# --------------------------------------------------------------------------- fidelity


@pytest.mark.slow
def test_each_replica_sees_what_vertex_gives_it(tmp_path: Path, cache: Path) -> None:
    dump = tmp_path / "seen"
    # The chief waits a second: a successful chief ends the job and stops every other replica.
    job, out = start(tmp_path, cache, [f"--dump={dump}", "--sleep=chief-0", "--seconds=1"])
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED" and job.exit_code == 0
    labels = ["chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0"]
    assert sorted(job.pids) == sorted(labels)
    assert sorted(d.name for d in (job.run_dir / "tmp").iterdir()) == sorted(labels)  # kept with the run (keep)
    seen = {label: json.loads((dump / f"{label}.json").read_text()) for label in labels}
    ran = json.loads((job.run_dir / "job.json").read_text())
    ports = {label: f"127.0.0.1:{port}" for label, port in job.ports.items()}
    for label, s in seen.items():
        env = s["env"]
        spec = json.loads(env["CLUSTER_SPEC"])
        assert spec["job"] == ran["jobSpec"]
        assert spec["cluster"] == {"workerpool0": [ports["chief-0"]], "workerpool1": [ports["worker-0"],
                                   ports["worker-1"]], "workerpool2": [ports["ps-0"]],
                                   "workerpool3": [ports["evaluator-0"]]}
        tf = json.loads(env["TF_CONFIG"])
        assert tf["cluster"] == {"chief": [ports["chief-0"]], "worker": [ports["worker-0"], ports["worker-1"]],
                                 "ps": [ports["ps-0"]]}
        role, index = label.rsplit("-", 1)
        assert tf["task"] == {"type": role, "index": int(index)} and tf["environment"] == "cloud"
        assert env["AIP_MODEL_DIR"] == f"{tmp_path / 'out'}/model/"
        assert env["CLOUD_ML_JOB_ID"] == job.name
        assert env["MY_VAR"] == "hello" and env["VTRAIN_DISTRIBUTION_STRATEGY"] == "auto"
        assert env["CUDA_VISIBLE_DEVICES"] == "" and env["PYTHONUNBUFFERED"] == "1"
        assert "PYTHONPATH" not in env
        # Issue 20, class 11: its own TMPDIR in the run folder (removed with the run), not the user's /tmp.
        assert env["TMPDIR"] == env["TMP"] == env["TEMP"] == str(job.run_dir / "tmp" / label)
        # The packaged trainer and runtime from the isolated environment, not the source tree.
        venv = env["VIRTUAL_ENV"]
        assert venv.startswith(str(cache)) and s["executable"].startswith(venv)
        assert s["trainer_file"].startswith(venv) and s["vtrain_file"].startswith(venv)
        assert s["argv"][1:] == [f"--dump={dump}", "--sleep=chief-0", "--seconds=1"]
    log = out.getvalue()
    for label in labels:
        assert f"[{label}] probe {label} done" in log
        assert f"probe {label} done" in job.replica_log(label).read_text()
    assert list(job.logs())[0].startswith("[")
    assert_clean(job)


@pytest.mark.slow
def test_a_packaging_mistake_fails_locally(tmp_path: Path, cache: Path) -> None:
    trainer = tmp_path / "trainer-src"
    shutil.copytree(PROBE, trainer)
    (trainer / "trainer" / "helper.py").write_text("VALUE = 1\n")
    task = trainer / "trainer" / "task.py"
    task.write_text(task.read_text().replace("import argparse\n", "import argparse\n\nfrom trainer import helper\n"))
    (trainer / ".vtrainignore").write_text("trainer/helper.py\n")  # works from source, not from the package
    job, _ = start(tmp_path, cache, [], "  chief: {machine_type: n1-standard-4}", file={"package": trainer})
    assert job.wait(timeout=60) == "JOB_STATE_FAILED"
    # An import that fails is one of Vertex's permanent errors: FAILED at once, no restart.
    assert (job.error or "").startswith("chief-0 exited 1: permanent error, a module cannot be imported "
                                        "(ImportError: cannot import name 'helper' from 'trainer'")
    assert "ImportError: cannot import name 'helper' from 'trainer'" in (job.error or "").splitlines()[-1]
    assert job.summary["restarts"]["restarts"] == {"chief-0": 0} and job.summary["restarts"]["attempts"] == 1


# --------------------------------------------------------------------------- behaving like a job


@pytest.mark.slow
def test_a_raising_trainer_fails_the_job_with_its_traceback(tmp_path: Path, cache: Path) -> None:
    """Fail-fast (--restart-policy never): the first failed replica ends the job, with its traceback."""
    started = time.monotonic()
    job, _ = start(tmp_path, cache, ["--raise=worker-1", "--fail-after=0.5", "--sleep=all"], restart_policy="never")
    assert job.wait(timeout=60) == "JOB_STATE_FAILED" and job.exit_code == 10
    assert time.monotonic() - started < 15
    error = job.error or ""
    assert error.startswith("worker-1 exited 1\nlast lines of worker-1")
    assert "RuntimeError: probe worker-1 was told to raise" in error.splitlines()[-1]
    assert "Traceback (most recent call last)" in error
    # The reason a trial reports (infeasibleReason) is its last stderr line, not whichever pipe was read last.
    assert job.error_reason == "RuntimeError: probe worker-1 was told to raise"
    with pytest.raises(JobFailed) as failed:  # result(): the handle's method, JobFailed unless SUCCEEDED
        job.result(timeout=1)
    assert failed.value.exit_code == 10 and "worker-1 exited 1" in str(failed.value)
    assert_clean(job)


@pytest.mark.slow
def test_success_follows_the_chief(tmp_path: Path, cache: Path) -> None:
    cluster = TWO_WORKERS + "\n  evaluator: {}"
    job, out = start(tmp_path, cache, ["--sleep=worker-1,evaluator-0", "--fail=worker-0", "--fail-after=1.5"],
                     cluster, worker_grace=2.0)
    started = time.monotonic()
    followed = list(job.logs(follow=True))  # returns once the job has ended
    assert job.done and job.wait(timeout=1) == "JOB_STATE_SUCCEEDED"
    assert "[worker-0] worker-0 exiting with 3" in followed and "[chief-0] probe chief-0 done" in followed
    # The evaluator is stopped at once; worker-0's failure after the chief's success does not count;
    # worker-1 is stopped after the grace period.
    assert time.monotonic() - started < 10
    assert job.summary["replicas"]["chief-0"] == 0
    assert job.summary["replicas"]["worker-1"] == -signal.SIGTERM
    assert_clean(job)


@pytest.mark.slow
def test_wait_hooks_report_states_follow_logs_and_time_out(tmp_path: Path, cache: Path) -> None:
    """The handle owns waiting: on_state and on_log work on a local job as on a Vertex one."""
    job, _ = start(tmp_path, cache, ["--sleep=all"], TWO_WORKERS)
    states: list[str] = []
    with pytest.raises(WaitTimeout) as timeout:
        job.wait(timeout=0.5, on_state=lambda state, elapsed: states.append(state))
    assert timeout.value.exit_code == 12 and set(states) == {"JOB_STATE_RUNNING"}
    lines: list[str] = []
    with pytest.raises(WaitTimeout):
        job.wait(timeout=1.5, on_log=lines.append)
    assert "[chief-0] probe chief-0 starting" in "\n".join(lines)
    job.cancel()
    assert job.wait(timeout=30, on_state=lambda state, elapsed: states.append(state)) == "JOB_STATE_CANCELLED"
    assert states[-1] == "JOB_STATE_CANCELLED"
    assert_clean(job)


def test_parameter_servers_stop_with_the_chief(tmp_path: Path, cache: Path) -> None:
    job, _ = start(tmp_path, cache, ["--sleep=worker-0,worker-1,ps-0,evaluator-0"], worker_grace=60)
    assert job.wait(timeout=30) == "JOB_STATE_SUCCEEDED"  # no 60 s grace: ps workers only serve
    assert_clean(job)


@pytest.mark.slow
def test_a_replica_that_never_starts_its_server_fails_the_job(tmp_path: Path, cache: Path) -> None:
    job, _ = start(tmp_path, cache, ["--listen=chief-0,worker-0", "--sleep=all"], TWO_WORKERS,
                   startup_timeout=2.0)
    assert job.wait(timeout=60) == "JOB_STATE_FAILED"
    assert (job.error or "").startswith("worker-1 did not start its TensorFlow server within 2 s "
                                        "while chief-0, worker-0 waited for it")
    assert_clean(job)


@pytest.mark.slow
def test_timeout_kills_whole_process_groups(tmp_path: Path, cache: Path) -> None:
    job, out = start(tmp_path, cache, ["--fork=all", "--sleep=all", "--ignore-term=worker-0"], TWO_WORKERS,
                     timeout=3.0, kill_grace=1.0)
    assert job.wait(timeout=60) == "JOB_STATE_FAILED"
    assert job.error == "timed out after 3 s (--timeout / scheduling.timeout)"
    forked = [int(pid) for pid in re.findall(r"forked (\d+)", out.getvalue())]
    assert len(forked) == 3
    assert job.summary["replicas"]["worker-0"] == -signal.SIGKILL  # ignored SIGTERM: killed after the grace
    assert_clean(job, forked)


def test_result_waits_and_returns_the_state(tmp_path: Path, cache: Path) -> None:
    """Issue 30, class 7: `job.result()` is the handle's method (it was a dict of the run's summary, so
    calling it raised TypeError); the summary is `job.summary`, as result.json has it."""
    job, _ = start(tmp_path, cache, [], TWO_WORKERS)
    assert job.result(timeout=60) == "JOB_STATE_SUCCEEDED"
    assert job.summary["state"] == "JOB_STATE_SUCCEEDED"
    assert json.loads((job.run_dir / "result.json").read_text(encoding="utf-8")) == job.summary
    assert_clean(job)


def test_cancel(tmp_path: Path, cache: Path) -> None:
    job, _ = start(tmp_path, cache, ["--sleep=all"])
    assert job.state == "JOB_STATE_RUNNING" and not job.done
    time.sleep(0.5)
    job.cancel()
    assert job.state in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    assert job.wait(timeout=30) == "JOB_STATE_CANCELLED" and job.exit_code == 11
    assert_clean(job)


def test_max_replicas_and_container_pools(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notices = io.StringIO()
    cluster = "  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 5}\n  parameter_servers: {replicas: 2}"
    path = job_file(tmp_path, [], cluster)
    job = run_local(path, output_dir=tmp_path / "o", cache_dir=cache, max_replicas=3, notices=notices)
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED"
    assert sorted(job.pids) == ["chief-0", "ps-0", "worker-0"]
    assert "[vtrain] --max-replicas 3: shrank workers 5 → 1, parameter_servers 2 → 1 (8 → 3 replicas)" \
        in notices.getvalue()
    container = write_job(tmp_path, """
        name: c
        trainer: {container: {image_uri: us-docker.pkg.dev/p/r/trainer:1}}
        cluster: {chief: {machine_type: n1-standard-4}}
        """, "container.yaml")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(BackendError, match="cannot run this job's image in a container here: neither docker nor "
                       "podman is installed; umoci"):  # no runtime either (tests/local/test_local_containers.py)
        run_local(container, output_dir=tmp_path / "c", cache_dir=cache)


@pytest.mark.slow
def test_prebuilt_packages_from_cloud_storage(gcs, tmp_path: Path, cache: Path) -> None:  # type: ignore[no-untyped-def]
    """trainer.package_uris: fetched from gs:// (here the storage emulator) and installed as they are."""
    from vtrain.trainer.packaging import build_sdist

    sdist = build_sdist(PROBE, tmp_path / "dist")
    gcs.create_bucket("pkgs")
    gcs.client().bucket("pkgs").blob(f"trainers/{sdist.name}").upload_from_filename(str(sdist))
    path = write_job(tmp_path, f"""
        name: prebuilt
        trainer: {{package_uris: [gs://pkgs/trainers/{sdist.name}], module: trainer.task}}
        cluster: {{chief: {{machine_type: n1-standard-4}}}}
        """)
    out = io.StringIO()
    job = run_local(path, output_dir=tmp_path / "out", cache_dir=cache, out=out)
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED", job.error
    assert "[chief-0] probe chief-0 done" in out.getvalue()
    ran = json.loads((job.run_dir / "job.json").read_text())
    assert ran["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"] == [
        f"gs://pkgs/trainers/{sdist.name}"]


# --------------------------------------------------------------------------- the command


def cli_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "VTRAIN_CACHE_DIR": str(cache)}


def test_cli_json_summary(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, [], ONE_WORKER)
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(tmp_path / "o"),
                           "-o", "json"], env=cli_env(cache), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["state"] == "JOB_STATE_SUCCEEDED" and result["replicas"] == {"chief-0": 0, "worker-0": 0}
    assert "[worker-0] probe worker-0 done" in done.stderr


@pytest.mark.alone
def test_cli_ctrl_c_cancels(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, ["--sleep=all", "--fork=chief-0"], TWO_WORKERS)
    cli = subprocess.Popen([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir",
                            str(tmp_path / "o")], env=cli_env(cache), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    pids: list[int] = []
    assert cli.stdout is not None
    deadline = time.monotonic() + 60
    while len(pids) < 4 and time.monotonic() < deadline:
        line = cli.stdout.readline()
        pids += [int(p) for p in re.findall(r"(?:pid|forked) (\d+)", line)]
    assert len(pids) == 4, "the replicas did not start"
    cli.send_signal(signal.SIGINT)
    _, err = cli.communicate(timeout=30)
    assert cli.returncode == 11
    assert "JOB_STATE_CANCELLED" in err
    assert not [p for p in pids if alive(p)]


def test_cli_output_dir_that_cannot_be_created_is_one_line(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, [], "  chief: {machine_type: n1-standard-4}")
    (tmp_path / "afile").write_text("x")
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--set",
                           f"base_output_dir={tmp_path / 'afile' / 'out'}"], env=cli_env(cache),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"error: cannot write the output directory {tmp_path / 'afile' / 'out'}: Not a directory" in done.stderr


def test_cli_unusable_cache_dir_is_one_line(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, [], "  chief: {machine_type: n1-standard-4}")
    (tmp_path / "afile").write_text("x")
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path)],
                          env={**cli_env(cache), "VTRAIN_CACHE_DIR": str(tmp_path / "afile")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (f"error: cannot create the environment cache {tmp_path / 'afile'}: File exists; set "
                           "VTRAIN_CACHE_DIR to a writable directory\n")


@pytest.mark.parametrize(("open_files", "workers", "message"), [
    (200, 300, "error: cannot open 301 ports on 127.0.0.1 for the replicas (Too many open files); run fewer with "
               "--max-replicas"),  # too few for the ports
    (44, 30, "error: could not start the replicas: [Errno 24] Too many open files"),  # ports yes, processes no
])
def test_cli_more_replicas_than_open_files_is_one_line(tmp_path: Path, cache: Path, open_files: int, workers: int,
                                                       message: str) -> None:
    import resource

    path = job_file(tmp_path, ["--sleep=all", "--seconds=30"],
                    f"  chief: {{machine_type: n1-standard-4}}\n  workers: {{replicas: {workers}}}")

    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(tmp_path / "o")],
                          env=cli_env(cache), capture_output=True, text=True, timeout=120, preexec_fn=few_files)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert message in done.stderr


# --------------------------------------------------------------------------- real TensorFlow


def tf_job(tmp_path: Path, cluster: str, args: list[str], extra: str = "") -> Path:
    return job_file(tmp_path, args, cluster, package=KERAS, extra=extra)


@pytest.mark.slow
def test_tf_config_parsed_by_tensorflow(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tensorflow as tf

    dump = tmp_path / "seen"
    job, _ = start(tmp_path, cache, [f"--dump={dump}", "--sleep=chief-0", "--seconds=1"])
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED"
    addr = {label: f"127.0.0.1:{port}" for label, port in job.ports.items()}
    for label in job.pids:
        env = json.loads((dump / f"{label}.json").read_text())["env"]
        monkeypatch.setenv("TF_CONFIG", env["TF_CONFIG"])
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        assert resolver.cluster_spec().as_dict() == {
            "chief": [addr["chief-0"]], "worker": [addr["worker-0"], addr["worker-1"]], "ps": [addr["ps-0"]]}
        role, index = label.rsplit("-", 1)
        assert (resolver.task_type, resolver.task_id) == (role, int(index))
        if role != "evaluator":  # the address this replica's server binds to
            assert resolver.master(rpc_layer="grpc") == f"grpc://{addr[label]}"


@pytest.mark.slow
def test_multi_worker_training_is_really_synchronised(quickstart_run: QuickstartRun) -> None:
    """The quickstart (the keras template, multi_worker_mirrored, a chief and 2 workers) as its page runs it:
    `quickstart_run` in tests/conftest.py, shared with the tests that read the same run."""
    quickstart_run.assert_succeeded()
    out = quickstart_run.output_dir
    assert (out / "model" / "saved_model.pb").is_file()
    records = [json.loads(p.read_text()) for p in [out / "model" / "weights.json",
                                                    *sorted(out.glob("workertemp/worker-*/weights.json"))]]
    assert [(r["task_type"], r["task_index"]) for r in records] == [("chief", 0), ("worker", 0), ("worker", 1)]
    assert {r["strategy"] for r in records} == {"multi_worker_mirrored"}
    assert len({r["sha256"] for r in records}) == 1, "replicas ended with different weights"
    for label in ("chief-0", "worker-0", "worker-1"):  # the template's own account: MultiWorkerMirrored, tf_keras
        log = (quickstart_run.run_dir / f"{label}.log").read_text()
        assert "using multi_worker_mirrored strategy" in log and "3 replica(s) in sync" in log, log[-2000:]
        assert "keras tf_keras" in log
    assert not list(out.glob("workertemp/worker-*/model"))  # the workers' scratch copies of the model removed
    # Its processes and ports are gone when `vtrain local` has exited; assert_clean checks that of a Keras
    # multi-worker job in test_local_restarts.py (a worker killed mid-run) and of the jobs above.


@pytest.mark.slow
def test_parameter_server_job(tmp_path: Path, cache: Path) -> None:
    cluster = "  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 1}\n  parameter_servers: {replicas: 1}"
    path = tf_job(tmp_path, cluster, ["--epochs=1", "--steps-per-epoch=5", "--batch-size=16"],
                  "distribution_strategy: parameter_server")
    job = run_local(path, output_dir=tmp_path / "out", cache_dir=cache)
    assert job.wait(timeout=170) == "JOB_STATE_SUCCEEDED", job.error
    assert json.loads((tmp_path / "out" / "model" / "weights.json").read_text())["strategy"] == "parameter_server"
    assert_clean(job)


@pytest.mark.slow
def test_a_killed_worker_fails_the_job_fast(tmp_path: Path, cache: Path) -> None:
    """--restart-policy never (for debugging): the first lost replica ends the job at once (chief + 1 worker:
    the smallest cluster where a peer outlives the lost one)."""
    path = tf_job(tmp_path, ONE_WORKER, ["--epochs=1000", "--steps-per-epoch=20", "--batch-size=16"])
    job = run_local(path, output_dir=tmp_path / "out", cache_dir=cache, restart_policy="never")
    deadline = time.monotonic() + 150
    while "Epoch 2/" not in job.replica_log("worker-0").read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert job.state == "JOB_STATE_RUNNING", job.error
    os.kill(job.pids["worker-0"], signal.SIGKILL)
    killed = time.monotonic()
    assert job.wait(timeout=60) == "JOB_STATE_FAILED"
    assert time.monotonic() - killed < 10
    assert (job.error or "").startswith("worker-0 exited 137 (SIGKILL)\nlast lines of worker-0")
    assert_clean(job)
