"""`vtrain local` runs an image job's replicas in real containers (issue 29, item 4): runc (or crun) on the
image's unpacked rootfs, as `submit` would build it on a base pulled from a real docker-registry on
127.0.0.1. The base is this machine's /usr/bin/python3.11, the libraries ldd lists and the stdlib a start
needs, with an /etc/os-release of its own: a replica that sees it, its own PID namespace and the image's
interpreter runs in the container, not on this machine's Python."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import assert_cache_accounted, write_job
from tests.trainer.image_helpers import Registry, make_trainer, push_base, python_rootfs_entries
from vtrain.cli import cli
from vtrain.errors import BackendError
from vtrain.jobfile.load import load_config
from vtrain.local.containers import find_runtime, runtime_spec
from vtrain.local.runner import prepare_images, run_local

OS_RELEASE = 'PRETTY_NAME="vtrain test base"\nID=vtrain-test-base\n'
REPORT = """\
import json, os, sys
out = {"pid": os.getpid(), "ns": os.readlink("/proc/self/ns/pid"), "exe": sys.executable,
       "os_release": open("/etc/os-release").read().splitlines()[1], "cwd": os.getcwd(), "args": sys.argv[1:],
       "task": json.loads(os.environ["TF_CONFIG"])["task"]}
open("written-in-workdir", "w").close()
os.makedirs(os.environ["AIP_MODEL_DIR"], exist_ok=True)
open(os.path.join(os.environ["AIP_MODEL_DIR"], out["task"]["type"] + ".json"), "w").write(json.dumps(out))
print("REPORT " + json.dumps(out))
"""


REPORT_ONLY = REPORT.replace('open("written-in-workdir", "w").close()\n', "")  # its WorkingDir is /


def _missing() -> str | None:
    for tool in ("runc", "umoci"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install runc umoci; .ci/run does)"
    return None


@pytest.fixture
def base(registry: Registry, tmp_path: Path) -> str:  # noqa: F811
    if (why := _missing()) is not None:
        pytest.skip(why)
    runtime, why = find_runtime(tmp_path / "cache")  # as root, or rootless in a user namespace
    if runtime is None:
        pytest.skip(f"no container runs here: {why}")
    entries = python_rootfs_entries()
    if entries is None:
        pytest.skip("no /usr/bin/python3.11 (and ldd) to make a runnable base image from")
    release = tmp_path / "os-release"
    release.write_text(OS_RELEASE)
    python = next(path for name, path, _ in entries if name == "usr/bin/python3.11")
    entries += [("etc/os-release", release, False), ("usr/bin/python3", python, True)]
    push_base(registry.client(), "base/python", entries, tmp_path, env=["PATH=/usr/local/bin:/usr/bin:/bin",
                                                                        "PYTHON_VERSION=3.11", "LANG=C.UTF-8"])
    return f"{registry.host}/base/python:base"


def _job(tmp_path: Path, base: str, registry: Registry, body: str = REPORT) -> Path:  # noqa: F811
    make_trainer(tmp_path / "t", body=body)
    return write_job(tmp_path, f"""
        name: boxed
        region: us-central1
        trainer:
          package: t
          module: trainer.task
          image: {base}
          build:
            repository: {registry.host}/team/trainer
            python_version: "3.11"
          args: [--epochs=1]
        cluster:
          chief: {{machine_type: n1-standard-4}}
          workers: {{replicas: 1}}
        """)


def _leftovers(cache: Path) -> list[str]:
    state = cache / "containers" / "state" / "runc"
    done = subprocess.run(["runc", "--root", str(state), "list", "-q"], capture_output=True, text=True, check=False)
    return done.stdout.split()


@pytest.mark.slow
def test_each_replica_runs_in_its_own_container_of_the_image(tmp_path: Path, base: str,
                                                              registry: Registry) -> None:  # noqa: F811
    path = _job(tmp_path, base, registry)
    out, notices = (tmp_path / "out.txt").open("w+"), (tmp_path / "notices.txt").open("w+")
    cache = tmp_path / "cache"
    job = run_local(load_config(path, target="local"), cache_dir=cache, out=out, notices=notices,
                    output_dir=tmp_path / "run", containers="always")
    assert job.wait(timeout=120) == "JOB_STATE_SUCCEEDED", job.error
    reports = {}
    for who in ("chief", "worker"):
        reports[who] = json.loads((tmp_path / "run" / "model" / f"{who}.json").read_text())
    host_ns = os.readlink("/proc/self/ns/pid")
    for who, seen in reports.items():
        assert seen["pid"] == 1 and seen["ns"] != host_ns  # its own PID namespace
        assert seen["os_release"] == "ID=vtrain-test-base"  # the base's file system, not this machine's
        assert seen["exe"] == "/usr/bin/python3"  # the image's interpreter (the entry point's python3)
        assert seen["task"] == {"type": who, "index": 0} and seen["args"] == ["--epochs=1"]
    assert reports["chief"]["ns"] != reports["worker"]["ns"]
    assert reports["chief"]["cwd"] == "/opt/vtrain/trainer"  # the image's WorkingDir, a copy per replica
    rootfs = [p for p in (cache / "containers" / "rootfs").iterdir() if not p.name.startswith(".")]
    assert len(rootfs) == 1 and not list(rootfs[0].rglob("written-in-workdir"))  # the cached rootfs stays unwritten
    assert _leftovers(cache) == []
    notices.seek(0)
    said = notices.read()
    assert "unpacked in" in said and "runc containers" in said
    # a second run unpacks nothing: the rootfs is cached by the image's digest
    again = (tmp_path / "notices2.txt").open("w+")
    job = run_local(load_config(path, target="local"), cache_dir=cache, notices=again, output_dir=tmp_path / "run2",
                    containers="always")
    assert job.wait(timeout=120) == "JOB_STATE_SUCCEEDED", job.error
    again.seek(0)
    assert "unpacked in" not in again.read()
    assert_cache_accounted(cache)  # containers/, image-blobs/, …: released with the job, all cleared


@pytest.mark.slow
def test_a_package_the_image_lacks_fails_locally_naming_it(tmp_path: Path, base: str,
                                                            registry: Registry) -> None:  # noqa: F811
    import yaml  # this machine has it (vtrain needs it); the image does not

    assert yaml
    path = _job(tmp_path, base, registry, body="import yaml\n")
    job = run_local(load_config(path, target="local"), cache_dir=tmp_path / "cache", restart_policy="never",
                    output_dir=tmp_path / "run", containers="always")
    assert job.wait(timeout=120) == "JOB_STATE_FAILED"
    assert "No module named 'yaml'" in (job.error or "")
    assert _leftovers(tmp_path / "cache") == []


FAULTED = """\
import os, signal, sys, time
from vtrain.constants import RESTART_COUNT_ENV
from vtrain.runtime.recovery import report_step
n = int(os.environ.get(RESTART_COUNT_ENV, "0"))
def term(signum, frame):
    print("got SIGTERM in", n, flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, term)
for step in range(1, 4):
    report_step(step)
    time.sleep(0.3)
time.sleep(60 if n == 0 else 0)
"""


@pytest.mark.slow
def test_faults_reach_the_containers_process_and_steps_reach_the_view(tmp_path: Path, base: str,
                                                                      registry: Registry) -> None:  # noqa: F811
    from vtrain.local.faults import parse_fault

    path = _job(tmp_path, base, registry, body=FAULTED)
    out = (tmp_path / "out.txt").open("w+")
    faults = [parse_fault("chief-0:kill@step:3"), parse_fault("worker-0:preempt:5s@step:2")]
    job = run_local(load_config(path, target="local"), cache_dir=tmp_path / "cache", output_dir=tmp_path / "run",
                    containers="always", faults=faults, out=out)
    assert job.wait(timeout=120) == "JOB_STATE_SUCCEEDED", job.error
    restarts = job.summary["restarts"]["restarts"]
    assert restarts["chief-0"] == 1 and restarts["worker-0"] == 1
    out.seek(0)
    assert "[worker-0] got SIGTERM in 0" in out.read().splitlines()  # its handler ran, in the container (pid 1)
    assert [step for _, step in job.summary["steps"]["chief-0"]][:3] == [1, 2, 3]  # the status file, bound in
    assert _leftovers(tmp_path / "cache") == []


@pytest.mark.slow
def test_cancel_leaves_no_container(tmp_path: Path, base: str, registry: Registry) -> None:  # noqa: F811
    path = _job(tmp_path, base, registry, body="import time\nprint('up', flush=True)\ntime.sleep(120)\n")
    out = (tmp_path / "out.txt").open("w+")
    job = run_local(load_config(path, target="local"), cache_dir=tmp_path / "cache", output_dir=tmp_path / "run",
                    containers="always", out=out, kill_grace=1.0)
    for _ in range(200):
        out.seek(0)
        if out.read().count(" up") == 2:
            break
        job.wait(timeout=0.1) if job.done else __import__("time").sleep(0.1)
    assert _leftovers(tmp_path / "cache") != []  # running, under runc
    job.cancel()
    assert job.wait(timeout=60) == "JOB_STATE_CANCELLED"
    assert _leftovers(tmp_path / "cache") == []


def test_no_runtime_is_one_notice_and_the_host_python_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_CONTAINER_RUNTIME", "no-such-runtime")
    make_trainer(tmp_path / "t")
    path = write_job(tmp_path, """
        name: boxed
        trainer: {package: t, module: trainer.task, image: tf-cpu.2-17,
                  build: {repository: us-central1-docker.pkg.dev/p/r/demo}}
        cluster: {chief: {machine_type: n1-standard-4}}
        """)
    said: list[str] = []
    images = prepare_images(load_config(path, target="local"), tmp_path / "cache", False, said.append)
    assert [type(i).__name__ for i in images.values()] == ["LocalImage"]
    assert [s for s in said if s.startswith("no container here")] == [
        "no container here (no-such-runtime is not installed): the image's layers run on this machine's Python "
        "instead"] or "umoci" in said[0]
    with pytest.raises(BackendError, match="cannot run this job's image in a container here"):
        prepare_images(load_config(path, target="local"), tmp_path / "cache", False, said.append, "always")


def test_the_runtime_config_has_host_networking_and_its_own_pid_namespace(tmp_path: Path) -> None:
    spec = runtime_spec(rootfs=tmp_path, args=["python3", "-m", "trainer.task"], env={"TF_CONFIG": "{}"},
                        cwd="/opt/vtrain/trainer", mounts=[("/out", "/out", True)], rootless=False)
    kinds = [n["type"] for n in spec["linux"]["namespaces"]]
    assert "pid" in kinds and "network" not in kinds and "user" not in kinds
    assert spec["root"] == {"path": str(tmp_path), "readonly": True}
    assert spec["mounts"][-1] == {"destination": "/out", "type": "bind", "source": "/out",
                                  "options": ["rbind", "rw", "nosuid", "nodev"]}
    rootless = runtime_spec(rootfs=tmp_path, args=["x"], env={}, cwd="/", mounts=[], rootless=True)
    assert {"type": "user"} in rootless["linux"]["namespaces"]
    assert rootless["linux"]["uidMappings"] == [{"containerID": 0, "hostID": os.geteuid(), "size": 1}]


def test_find_runtime_says_why_none_runs(tmp_path: Path) -> None:
    runtime, why = find_runtime(tmp_path, {"VTRAIN_CONTAINER_RUNTIME": "no-such-runtime"})
    assert runtime is None and ("no-such-runtime is not installed" in why or "umoci" in why)


def test_cli_containers_takes_only_its_choices(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["local", str(tmp_path / "job.yaml"), "--containers", "sometimes"])
    assert done.exit_code == 2 and "'sometimes' is not one of 'auto', 'always', 'never'" in done.output


@pytest.mark.slow
def test_a_container_trainer_is_pulled_from_its_registry_and_run_with_the_pools_command(
        tmp_path: Path, base: str, registry: Registry) -> None:  # noqa: F811
    path = write_job(tmp_path, f"""
        name: pulled
        trainer:
          container: {{image_uri: "{base}", command: [python3, -c, {json.dumps(REPORT_ONLY)}]}}
          args: [--epochs=2]
        cluster:
          chief: {{machine_type: n1-standard-4}}
          workers: {{replicas: 1}}
        """)
    job = run_local(load_config(path, target="local"), cache_dir=tmp_path / "cache", output_dir=tmp_path / "run",
                    containers="always")
    assert job.wait(timeout=120) == "JOB_STATE_SUCCEEDED", job.error
    host_ns = os.readlink("/proc/self/ns/pid")
    for who in ("chief", "worker"):
        seen = json.loads((tmp_path / "run" / "model" / f"{who}.json").read_text())
        assert seen["pid"] == 1 and seen["ns"] != host_ns and seen["os_release"] == "ID=vtrain-test-base"
        assert seen["task"] == {"type": who, "index": 0} and seen["args"] == ["--epochs=2"]
        assert seen["cwd"] == "/"  # the base sets no WorkingDir


@pytest.mark.slow
def test_the_containers_a_killed_vtrain_left_are_deleted_at_the_next_run(tmp_path: Path) -> None:
    from vtrain.local import containers

    if (why := _missing()) is not None:
        pytest.skip(why)
    runtime, why = containers.find_runtime(tmp_path)
    if runtime is None:
        pytest.skip(why)
    dead = subprocess.Popen(["true"])
    dead.wait()
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    rootfs = tmp_path / "containers" / "probe" / "rootfs"
    spec = runtime_spec(rootfs=rootfs, args=["/true"], env={}, cwd="/", mounts=[], rootless=runtime.rootless)
    (bundle / "config.json").write_text(json.dumps(spec))
    name = f"vtrain-{dead.pid}-local-x-chief-0"
    subprocess.run(runtime.command("create", "--bundle", str(bundle), name), check=True, timeout=30,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # init keeps its fds
    assert name in _leftovers(tmp_path)
    assert containers.sweep(runtime) == [name]
    assert _leftovers(tmp_path) == []


def test_an_images_paths_never_lead_out_of_its_rootfs(tmp_path: Path) -> None:
    from vtrain.local.rootfs import Unpacked

    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "opt").symlink_to("/")  # a hostile image: its /opt is this machine's /
    (rootfs / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\ntrainer:x:1000:1001::/home:/bin/sh\n")
    image = Unpacked("x", "sha256:0", rootfs, {"WorkingDir": "../../etc", "User": "trainer", "Cmd": "python3"})
    assert image.workdir == "/etc"
    assert image.inside("/opt/etc") is None and image.inside("/etc/passwd") == (rootfs / "etc/passwd").resolve()
    assert image.user() == (1000, 1001)
    with pytest.raises(BackendError, match="its config's Cmd is not a list of strings"):
        image.argv({"containerSpec": {}})
    assert image.argv({"containerSpec": {"command": ["python3", "-m", "t"], "args": ["--x"]}}) == [
        "python3", "-m", "t", "--x"]
    with pytest.raises(BackendError, match="the image's User nobody-here is not in its passwd"):
        Unpacked("x", "sha256:0", rootfs, {"User": "nobody-here"}).user()


@pytest.mark.slow
def test_vtrain_local_containers_always_on_the_command_line(tmp_path: Path, base: str,
                                                            registry: Registry) -> None:  # noqa: F811
    path = _job(tmp_path, base, registry)
    done = CliRunner().invoke(cli, ["local", str(path), "--containers", "always", "--plain", "--output-dir",
                                    str(tmp_path / "run")], env={"VTRAIN_CACHE_DIR": str(tmp_path / "cache")})
    assert done.exit_code == 0, done.output
    assert "replicas run in runc containers" in done.output
    assert json.loads((tmp_path / "run" / "model" / "chief.json").read_text())["os_release"] == "ID=vtrain-test-base"


def _true_entries() -> list[tuple[str, Path, bool]]:
    """A base of this machine's `true` and the libraries ldd lists: it runs, and has no python3."""
    true = Path(shutil.which("true") or "/bin/true").resolve()
    false = Path(shutil.which("false") or "/bin/false").resolve()
    entries = [("bin/true", true, True), ("bin/false", false, True)]
    listed = subprocess.run(["ldd", str(true)], capture_output=True, text=True, timeout=30, check=False).stdout
    for line in listed.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 3 else parts[0] if parts else ""
        if path.startswith("/") and os.path.isfile(path):
            entries.append((path.lstrip("/"), Path(path), True))
    return entries


@pytest.mark.slow
@pytest.mark.parametrize(("case", "env", "user", "command", "said"), [
    ("ok", ["PATH=/bin"], None, ["true"], None),
    ("exits 1 once started", ["PATH=/bin"], None, ["false"], None),
    ("no python3", ["PATH=/usr/bin:/bin"], None, ["python3", "-m", "trainer.task"],
     'exec: "python3": executable file not found in $PATH'),
    ("bad Env entry", ["PATH=/bin", "=oops"], None, ["true"], '"=oops"'),
    ("impossible User", ["PATH=/bin"], "4294967295", ["true"], "uids and gids must be in range 0-2147483647"),
])
def test_a_container_that_cannot_start_fails_the_job_once_with_the_runtimes_reason(
        tmp_path: Path, registry: Registry, case: str, env: list[str], user: str | None,  # noqa: F811
        command: list[str], said: str | None) -> None:
    """Issue 46, class 13: 20 starts, then runc's raw error seven times. Now one start, the job FAILED at once, the
    runtime's reason (its words vary by version: matched by their gist) in its error once, escaped and bounded,
    under the default restart policy. A process that started and exited 1 is no start failure."""
    if (why := _missing()) is not None:
        pytest.skip(why)
    runtime, why = find_runtime(tmp_path / "cache")
    if runtime is None or runtime.name != "runc":
        pytest.skip(f"runc does not run a container here: {why}")
    push_base(registry.client(), "base/true", _true_entries(), tmp_path, env=env, user=user)
    path = write_job(tmp_path, f"""
        name: nostart
        trainer:
          container: {{image_uri: "{registry.host}/base/true:base", command: {json.dumps(command)}}}
        cluster:
          chief: {{machine_type: n1-standard-4}}
        """)
    notices = (tmp_path / "notices.txt").open("w+")
    never = case == "exits 1 once started"  # its restarts are the policy's as ever: one start is enough to see
    job = run_local(load_config(path, target="local"), cache_dir=tmp_path / "cache", output_dir=tmp_path / "run",
                    containers="always", notices=notices, restart_policy="never" if never else "vertex")
    state = job.wait(timeout=120)
    if said is None:
        assert state == ("JOB_STATE_FAILED" if never else "JOB_STATE_SUCCEEDED"), job.error
        assert not never or (job.error or "").startswith("chief-0 exited 1\nlast lines of chief-0")  # no start failure
        return
    assert state == "JOB_STATE_FAILED"
    assert re.fullmatch(rf"chief-0 exited 1: its container did not start: runc: [^\n]*{re.escape(said)}[^\n]* "
                        rf"\(full log: {re.escape(str(job.run_dir))}/chief-0.log\)", job.error or ""), job.error
    assert [p["replica"] for p in job.summary["processes"]] == ["chief-0"]  # one start: no restart, no retry
    notices.seek(0)
    lines = notices.read().splitlines()
    assert "[vtrain] chief-0's container did not start (a permanent error); failing the job without a restart" in lines
    assert not any(said in line for line in lines)  # the reason is the error's, said once
    assert _leftovers(tmp_path / "cache") == []


def test_the_runtimes_reason_is_its_last_error_escaped_and_bounded(tmp_path: Path) -> None:
    from vtrain.local.containers import DockerContainer, runtime_error

    log = tmp_path / "runtime.log"
    assert runtime_error("runc", log) is None  # no log: it ran
    log.write_text('{"level":"warning","msg":"a warning"}\nchdir `/x` failed\n[1, 2]\n'
                   '{"level":"error","msg":"runc run failed: unable to start container process: first"}\n'
                   + json.dumps({"level": "error", "msg": "runc run failed: \x1b[2J\u202e" + "x" * 5000}) + "\n")
    said = runtime_error("runc", log)
    assert said is not None and said.startswith("runc: \\x1b[2J\\u202e") and len(said) < 340 and "\x1b" not in said
    log.write_text('{"level":"info","msg":"all fine"}\n')
    assert runtime_error("crun", log) is None
    log.write_text("chdir `/x` failed: No such file or directory")  # crun, before it read --log-format
    assert runtime_error("crun", log) == "crun: chdir `/x` failed: No such file or directory"
    docker = DockerContainer("docker", "vtrain-x")
    assert docker.start_error(125, "docker: Error response from daemon: no such image.") == \
        "docker: Error response from daemon: no such image."
    assert docker.start_error(127, "python3: command not found") is None  # the container's own 127
    assert docker.start_error(1, "docker: whatever") is None
