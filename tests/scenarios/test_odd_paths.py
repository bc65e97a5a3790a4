"""Filesystem oddities in the job file, the trainer package and output paths: one line, never a traceback.

The class, not just the samples: NUL bytes in every string the schema accepts and in any CLI
argument; names and paths past the OS's limits; symlink loops; files and directories that cannot
be read; names that are not UTF-8; a job file that is a FIFO, a device or a directory. Values of
the job file and of the command line exit 2; what the disk says (unreadable, unwalkable) exits 1.
Nothing is left half-written.

Permission cases need a process that permission bits bind. Tests here run as root, which
ignores them, so those run the CLI in a child whose capability bounding set lacks
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: the kernel then checks the bits for root too.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from vtrain.cli import cli
from vtrain.errors import ConfigError, PackagingError
from vtrain.jobfile.load import load_config, parse_config
from vtrain.jobfile.schema import JOB_SCHEMA, EnvValue, ListOf, MapOf, Obj, Str

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "data" / "trainers" / "probe"
CONTAINER = """\
name: odd
trainer: {container: {image_uri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest}}
cluster:
  chief: {machine_type: n1-standard-4}
"""


def LOCAL_PACKAGE(tmp_path: Path) -> list[str]:  # noqa: N802 - reads as the command it is
    """`vtrain package` staging into a local directory: nothing is sent anywhere."""
    return ["package", "--target", "local", "--set", f"staging_bucket={tmp_path / 'staging'}"]


def package_job(tmp_path: Path, package: Path | str = "pkg") -> Path:
    job = tmp_path / "job.yaml"
    job.write_text("name: odd\nstaging_bucket: gs://my-bucket/staging\n"
                   f"trainer: {{package: {package}, module: trainer.task, image: tf-cpu.2-17}}\n"
                   "cluster:\n  chief: {machine_type: n1-standard-4}\n", encoding="utf-8")
    return job


@pytest.fixture
def pkg(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    (root / "trainer").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "odd"\nversion = "0.1"\n', encoding="utf-8")
    (root / "trainer" / "__init__.py").write_text("", encoding="utf-8")
    (root / "trainer" / "task.py").write_text("print('hi')\n", encoding="utf-8")
    return root


# --------------------------------------------------------------------------- values of the job file: exit 2


def string_paths(obj: Obj = JOB_SCHEMA, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every place the schema takes text: (key path, the --set value that puts a NUL there)."""
    for name, field in obj.fields.items():
        here = (*path, name)
        if isinstance(field, Obj):
            yield from string_paths(field, here)
        elif isinstance(field, Str | EnvValue):
            yield here, '"a\\0b"'
        elif isinstance(field, ListOf) and isinstance(field.item, Str):
            yield here, '["ok", "a\\0b"]'
        elif isinstance(field, MapOf) and isinstance(field.value, Str | EnvValue):  # (tuning.parameters: objects)
            yield here, '{A: "a\\0b"}'
            yield here, '{"A\\0B": "x"}'


STRINGS = list(string_paths())


def test_the_walk_reaches_paths_args_env_and_names() -> None:
    found = {".".join(p) for p, _ in STRINGS}
    assert {"name", "trainer.package", "trainer.args", "trainer.env", "trainer.container.command",
            "cluster.workers.args", "cluster.evaluator.env", "base_output_dir", "labels"} <= found


@pytest.mark.parametrize(("path", "value"), STRINGS, ids=[f"{'.'.join(p)}={v}" for p, v in STRINGS])
def test_a_nul_byte_anywhere_in_the_job_file_is_a_value_error(path: tuple[str, ...], value: str) -> None:
    flag = f"{'.'.join(path)}={value}"
    with pytest.raises(ConfigError) as err:
        parse_config(CONTAINER, "job.yaml", overrides=[flag], target="local")
    nul = [p for p in err.value.problems if "NUL byte" in p.message]
    assert len(nul) == 1, err.value.problems
    assert nul[0].file == f"--set {flag}" and nul[0].path.startswith(".".join(path))
    assert "\x00" not in str(err.value)  # shown escaped, never printed raw


def test_nul_written_in_the_file_itself_points_at_its_line(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(CONTAINER + '  workers: {replicas: 1, args: ["--data=/x\\0y"]}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(job)])
    assert result.exit_code == 2
    assert result.output.splitlines()[0] == (f"{job}:5:33: cluster.workers.args[0]: contains a NUL byte (\\0), which "
                                             "no path, argument or environment value can hold; remove it")


@pytest.mark.parametrize(
    ("package", "message"),
    [
        ("x" * 300, "the trainer package path has a 300-byte name (xxxxxxxxxxxxxxxxxxxxxxxx…); a file or directory "
                    "name may have at most 255 bytes"),
        ("/".join(["abcdefghij"] * 500), "the trainer package path is "),
        ("loop", "is a symlink that leads nowhere (a loop, or a missing target)"),
    ],
    ids=["long-name", "long-path", "symlink-loop"],
)
def test_trainer_package_paths_the_os_cannot_take(tmp_path: Path, package: str, message: str) -> None:
    (tmp_path / "loop").symlink_to("loop")
    for command in (["validate"], ["render"], LOCAL_PACKAGE(tmp_path)):
        result = CliRunner().invoke(cli, [*command, str(package_job(tmp_path, package))])
        assert result.exit_code == 2, (command, result.output)
        assert message in result.output, (command, result.output)
    assert not (tmp_path / "staging").exists()


def test_local_output_paths_of_the_job_file_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(CONTAINER + f"base_output_dir: {tmp_path / ('o' * 256)}\n", "job.yaml", target="local")
    assert [p.path for p in err.value.problems] == ["base_output_dir"]
    assert "256-byte name" in err.value.problems[0].message


# --------------------------------------------------------------------------- the job file itself


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.mkdir(), "cannot read the job file: it is a directory, not a regular file"),
        (lambda p: p.symlink_to("/dev/null"),
         "cannot read the job file: it is a character device, not a regular file"),
        (lambda p: p.symlink_to(p.name),
         "cannot read the job file: a symlink loop (a link that points back to itself)"),
        (lambda p: p.write_bytes(b"name: \xff\n"),
         "the job file is not UTF-8 text (byte 7 is b'\\xff'); save it as UTF-8"),
        (lambda p: p.write_bytes(b"#" * (1 << 20) + b"\n"),
         "cannot read the job file: it is larger than 1,048,576 bytes"),
    ],
    ids=["directory", "dev-null", "symlink-loop", "not-utf8", "too-big"],
)
def test_a_job_file_that_is_not_a_small_regular_file(tmp_path: Path, make: Any, message: str) -> None:
    """In-process: cases that fail harmlessly if this regresses (a FIFO and /dev/zero are tested in a child)."""
    path = tmp_path / "job.yaml"
    make(path)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert [p.message for p in err.value.problems] == [message]


@pytest.mark.parametrize(
    ("make", "what"),
    [(os.mkfifo, "a FIFO (named pipe)"), (lambda p: os.symlink("/dev/zero", p), "a character device")],
    ids=["fifo", "dev-zero"],
)
def test_a_job_file_that_would_hang_or_never_end(tmp_path: Path, make: Any, what: str) -> None:
    """A FIFO hung the read; /dev/zero was read until the OOM killer came. In a child with a time and
    memory limit, so that a regression fails this test instead of the machine."""
    import resource

    make(tmp_path / "job.yaml")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run([sys.executable, "-m", "vtrain", "validate", str(tmp_path / "job.yaml")],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"{tmp_path / 'job.yaml'}: cannot read the job file: it is {what}, not a regular file\n" \
                          "error: 1 problem in the job file\n"


def test_the_sdk_refuses_a_nul_in_the_job_file_path() -> None:
    with pytest.raises(ConfigError) as err:
        load_config("job\x00.yaml")
    assert str(err.value) == "job\\x00.yaml: the job file's path contains a NUL byte (\\0), which no path can hold"


# --------------------------------------------------------------------------- command-line arguments: exit 2


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "job\x00.yaml"],
        ["render", "job.yaml", "--set", "name=a\x00b"],
        ["local", "job.yaml", "--output-dir", "out\x00"],
        ["init", "dir\x00"],
        ["init", "dir", "--name", "a\x00b"],
        ["estimate", "job.yaml", "--params", "1\x00B"],
        ["status", "job\x00"],
    ],
)
def test_a_nul_in_any_argument_is_a_usage_error(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "contains a NUL byte (\\0)" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["validate", "j" * 300], "has a 300-byte name"),
        (["render", "/".join(["abcdefghij"] * 500)], "is 5,499 bytes long; a path may have at most 4,095"),
        (["init", "d" * 256], "has a 256-byte name"),
        (["local", "job.yaml", "--output-dir", "out\udcff"], "is not valid UTF-8"),
        (["estimate", "job.yaml", "--params", "1B", "--plot", "p" * 256 + ".png"], "has a 260-byte name"),
    ],
)
def test_path_arguments_the_os_cannot_take_are_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert message in result.output


# --------------------------------------------------------------------------- the trainer package: exit 1


def run_cli(*args: str, cwd: Path, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    """`vtrain ARGS` in a child; `unprivileged`: without the capabilities that let root skip permission bits."""
    preexec = None
    if unprivileged and os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)

        def preexec() -> None:
            for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
                if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                    os._exit(99)
    done = subprocess.run([sys.executable, "-m", "vtrain", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, preexec_fn=preexec)
    if done.returncode == 99:
        pytest.skip("running as root and cannot drop CAP_DAC_OVERRIDE here, so permission bits cannot bind")
    return done


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda p: (p / "trainer" / "task.py").chmod(0),
         "cannot read trainer/task.py in trainer package {p}: Permission denied; make it readable, or list it in "
         ".vtrainignore"),
        (lambda p: ((p / "data").mkdir(), (p / "data" / "x.csv").write_text("1"), (p / "data").chmod(0)),
         "cannot read data in trainer package {p}: Permission denied; make it readable, or list it in .vtrainignore"),
        (lambda p: ((p / ".gitignore").write_text("*.log\n"), (p / ".gitignore").chmod(0)),
         "cannot read .gitignore in trainer package {p}: Permission denied; make it readable, or list it in "
         ".vtrainignore"),
        (lambda p: (p / "pyproject.toml").chmod(0), "cannot read {p}/pyproject.toml: Permission denied"),
    ],
    ids=["file", "directory", "gitignore", "pyproject"],
)
def test_an_unreadable_part_of_the_trainer_is_the_machines_state(tmp_path: Path, pkg: Path, spoil: Any,
                                                                  message: str) -> None:
    """Before: a traceback, or (an unreadable directory) a package silently built without it."""
    spoil(pkg)
    job = package_job(tmp_path)
    for command in (["render"], LOCAL_PACKAGE(tmp_path)):
        done = run_cli(*command, str(job), cwd=tmp_path, unprivileged=True)
        assert done.returncode == 1, done.stderr
        assert done.stderr == f"error: {message.format(p=pkg)}\n"
    assert not (tmp_path / "staging").exists() or not any((tmp_path / "staging").rglob("*.tar.gz"))


def test_an_unwalkable_package_path_and_undecodable_names(tmp_path: Path, pkg: Path) -> None:
    deep = os.open(pkg, os.O_RDONLY)
    try:  # nested names whose full path passes PATH_MAX: only relative mkdirs can make it
        for _ in range(18):
            os.mkdir("d" * 250, dir_fd=deep)
            inner = os.open("d" * 250, os.O_RDONLY, dir_fd=deep)
            os.close(deep)
            deep = inner
        os.close(os.open("x.py", os.O_CREAT | os.O_WRONLY, dir_fd=deep))
    finally:
        os.close(deep)
    job = package_job(tmp_path)
    done = run_cli("render", str(job), cwd=tmp_path)
    assert done.returncode == 1 and "File name too long; move or rename it, or list it in .vtrainignore" in done.stderr
    (pkg / ".vtrainignore").write_text("/dddd*\n")
    assert run_cli("render", str(job), cwd=tmp_path).returncode == 0
    undecodable = os.fsencode(pkg / "trainer") + b"/caf\xe9.py"
    with open(undecodable, "wb") as f:
        f.write(b"")
    done = run_cli("render", str(job), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == (f"error: file names in trainer package {pkg} are not valid UTF-8, which a package cannot "
                           "carry: trainer/caf\\xe9.py; rename them, or list them in .vtrainignore\n")
    (pkg / ".vtrainignore").write_text("/dddd*\n*.py[!c]\ncaf*\n")
    assert run_cli("render", str(job), cwd=tmp_path).returncode == 0


def test_symlink_loops_inside_the_package_are_not_files(tmp_path: Path, pkg: Path) -> None:
    (pkg / "a").symlink_to("b")
    (pkg / "b").symlink_to("a")
    (pkg / "trainer" / "self").symlink_to("self")
    with pytest.raises(PackagingError, match="symlink that leads nowhere"):
        from vtrain.trainer.packaging import planned_uri

        planned_uri(pkg / "a", str(tmp_path / "staging"))
    assert run_cli("render", str(package_job(tmp_path)), cwd=tmp_path).returncode == 0


# --------------------------------------------------------------------------- vtrain init: exit 1, nothing written


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("prepare", "target", "message"),
    [
        (lambda d: (d / "L").symlink_to("L"), "L", "cannot write the trainer there: {d}/L is a symlink that leads "
                                                   "nowhere (a loop?); nothing was written"),
        (lambda d: ((d / "t").mkdir(), (d / "t" / "trainer").symlink_to("trainer")), "t",
         "cannot write the trainer there: {d}/t/trainer is a symlink that leads nowhere (a loop?); nothing was "
         "written"),
        (lambda d: ((d / "t").mkdir(), (d / "t" / "vtrain.yaml").symlink_to("/nonexistent")), "t",
         "refusing to overwrite existing file(s): {d}/t/vtrain.yaml; nothing was written"),
        (lambda d: ((d / "t" / "trainer").mkdir(parents=True), (d / "t" / "trainer").chmod(0o555)), "t",
         "cannot write {d}/t/trainer/__init__.py: Permission denied; nothing was written"),
    ],
    ids=["dir-is-a-loop", "trainer-is-a-loop", "dangling-job-file", "unwritable-subdir"],
)
def test_init_refuses_odd_destinations_and_writes_nothing(tmp_path: Path, prepare: Any, target: str,
                                                          message: str) -> None:
    prepare(tmp_path)
    before = tree(tmp_path)
    done = run_cli("init", str(tmp_path / target), cwd=tmp_path, unprivileged=True)
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"error: {message.format(d=tmp_path)}\n"
    assert tree(tmp_path) == before


# --------------------------------------------------------------------------- vtrain local: the job name in a path


@pytest.mark.slow
def test_a_job_name_with_a_slash_names_a_temporary_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The display name is free text; it used to be pasted into mkdtemp's prefix (FileNotFoundError)."""
    from vtrain.local.runner import run_local

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    job = tmp_path / "job.yaml"
    job.write_text(f"name: 'team/exp 1: ../x'\ntrainer: {{package: {PROBE}, module: trainer.task}}\n"
                   "cluster:\n  chief: {machine_type: n1-standard-4}\n", encoding="utf-8")
    handle = run_local(job, cache_dir=tmp_path / "cache", keep=True)
    assert handle.wait() == "JOB_STATE_SUCCEEDED"
    (made,) = (tmp_path / "tmp").iterdir()
    assert made.name.startswith("vtrain-local-team-exp-1-..-x-")
