"""Packaging: file selection, content hashes, credential refusal, real sdist builds, staging."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from vtrain import __version__
from vtrain.errors import PackagingError
from vtrain.trainer import packaging as P
from vtrain.trainer import runtime_sdist as R
from vtrain.trainer.select import IgnoreRules, translate
from vtrain.trainer.staging import uri_to_path

DATA = Path(__file__).resolve().parents[1] / "data" / "trainers"


@pytest.fixture
def trainer(tmp_path: Path) -> Path:
    """A copy of the sample trainer, with the junk a real working tree collects."""
    root = tmp_path / "trainer_pkg"
    shutil.copytree(DATA / "basic", root)
    junk = {
        ".git/config": "[core]",
        ".venv/lib/x.py": "",
        "myenv/pyvenv.cfg": "home = /usr",  # a virtualenv under any name
        "myenv/lib/site.py": "",
        "trainer/__pycache__/task.cpython-311.pyc": "",
        "trainer/stale.pyc": "",
        "data/train.csv": "1,2",  # .gitignore: data/
        "run.log": "log",  # .gitignore: *.log
        "keep.log": "kept",  # .gitignore: !keep.log
        "outputs/model.bin": "w",  # .gitignore: /outputs
        "trainer/outputs/notes.txt": "kept: /outputs is anchored to the root",
        "notes/todo.md": "x",  # .vtrainignore: notes/
        "trainer/.gitignore": "scratch.py\n",
        "trainer/scratch.py": "",  # nested .gitignore
        "dist/old-0.1.tar.gz": "",
        "My.Trainer.egg-info/PKG-INFO": "",
        "trainer/config.yaml": "lr: 0.1",
    }
    for rel, text in junk.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


EXPECTED_FILES = [
    ".gitignore",
    ".vtrainignore",
    "README.md",
    "keep.log",
    "pyproject.toml",
    "trainer/.gitignore",
    "trainer/__init__.py",
    "trainer/config.yaml",
    "trainer/outputs/notes.txt",
    "trainer/task.py",
]


@pytest.mark.parametrize(
    ("pattern", "path", "is_dir", "ignored"),
    [
        ("*.log", "a/b/x.log", False, True),
        ("*.log", "x.logs", False, False),
        ("data/", "data", True, True),
        ("data/", "data", False, False),
        ("/out", "out", True, True),
        ("/out", "a/out", True, False),
        ("a/*.py", "a/x.py", False, True),
        ("a/*.py", "a/b/x.py", False, False),
        ("**/cache", "x/y/cache", True, True),
        ("a/**/z", "a/z", False, True),
        ("a/**/z", "a/b/c/z", False, True),
        ("logs/**", "logs/a/b", False, True),
        ("file[0-9].txt", "file7.txt", False, True),
        ("file[!0-9].txt", "file7.txt", False, False),
        ("?.md", "a.md", False, True),
        ("\\#hash", "#hash", False, True),
    ],
)
def test_ignore_patterns(pattern: str, path: str, is_dir: bool, ignored: bool) -> None:
    rules = IgnoreRules()
    rules.add_lines([pattern])
    assert rules.ignored(path, is_dir=is_dir) is ignored


def test_ignore_comments_negation_and_nesting() -> None:
    assert translate("# comment") is None and translate("   ") is None
    rules = IgnoreRules()
    rules.add_lines(["*.log", "!keep.log"])
    rules.add_lines(["keep.log"], base="sub")  # a deeper .gitignore wins below its directory
    assert rules.ignored("a.log", is_dir=False)
    assert not rules.ignored("keep.log", is_dir=False)
    assert rules.ignored("sub/keep.log", is_dir=False)
    rules.add_lines(["!sub/keep.log"], last=True)  # .vtrainignore beats every .gitignore
    assert not rules.ignored("sub/keep.log", is_dir=False)


def test_scan_selects_exactly_the_packaged_files(trainer: Path) -> None:
    assert P.scan_package(trainer).files == EXPECTED_FILES


def test_hash_tracks_packaged_content_only(trainer: Path) -> None:
    before = P.planned_uri(trainer, "gs://bkt")
    (trainer / "data" / "train.csv").write_text("changed, but ignored")
    (trainer / "trainer" / "__pycache__" / "new.pyc").write_text("")
    assert P.planned_uri(trainer, "gs://bkt") == before
    (trainer / "trainer" / "task.py").write_text("print('changed')\n")
    changed = P.planned_uri(trainer, "gs://bkt")
    assert changed != before
    (trainer / "trainer" / "task.py").unlink()
    (trainer / "trainer" / "task2.py").write_text("print('changed')\n")  # same bytes, new path
    assert P.planned_uri(trainer, "gs://bkt") not in (before, changed)


def test_local_run_outputs_inside_the_package_are_not_packaged(trainer: Path) -> None:
    """`base_output_dir: ./out` next to `package: .` must not put the last run's outputs in the next sdist."""
    before = P.scan_package(trainer)
    for rel in ("out/vtrain-local/job.json", "out/vtrain-local/chief-0.log", "out/model/saved_model.pb"):
        (trainer / rel).parent.mkdir(parents=True, exist_ok=True)
        (trainer / rel).write_text("x")
    after = P.scan_package(trainer)
    assert (after.files, after.digest) == (before.files, before.digest)


def test_planned_uri_shape(trainer: Path) -> None:
    digest = P.scan_package(trainer).digest
    assert len(digest) == 12 and int(digest, 16) >= 0
    assert P.dist_name(trainer) == "my_trainer"  # "My.Trainer", normalized
    planned = P.planned_uri(trainer, "gs://bkt/some/prefix/")
    assert re.fullmatch(r"gs://bkt/some/prefix/vtrain/my_trainer-[0-9a-f]{12}\.tar\.gz", planned), planned
    assert P.dist_name(DATA / "setup_py_only") == "setup_py_only"  # no pyproject: directory name
    runtime = R.planned_runtime_uri("gs://bkt")
    assert runtime.startswith(f"gs://bkt/vtrain/vtrain-{__version__}-") and runtime.endswith(".tar.gz")


def test_build_sdist_contains_only_selected_files(trainer: Path, tmp_path: Path) -> None:
    sdist = P.build_sdist(trainer, tmp_path / "out")
    assert sdist.name == P.planned_uri(trainer, "gs://bkt").rsplit("/", 1)[1]
    members = P.sdist_members(sdist)
    # What setuptools adds itself: metadata. Everything else comes from the selected files.
    generated = {m for m in members if m in ("PKG-INFO", "setup.cfg") or ".egg-info/" in m}
    assert set(members) - generated <= set(EXPECTED_FILES)
    assert {"trainer/task.py", "trainer/__init__.py", "pyproject.toml"} <= set(members)
    for junk in (
        "data/",
        "outputs/",
        "notes/",
        ".git/",
        ".venv/",
        "myenv/",
        "__pycache__",
        ".pyc",
        "run.log",
        "scratch.py",
        "dist/",
    ):
        assert not [m for m in members if junk in m and not m.startswith("trainer/outputs/")], junk


def test_build_setup_py_only(tmp_path: Path) -> None:
    sdist = P.build_sdist(DATA / "setup_py_only", tmp_path)
    assert sdist.name.startswith("setup_py_only-")
    assert "trainer/task.py" in P.sdist_members(sdist)


SERVICE_ACCOUNT = json.dumps(
    {"type": "service_account", "project_id": "p", "private_key_id": "0", "private_key": "..."}, indent=2
)


@pytest.mark.parametrize(
    ("rel", "content", "why"),
    [
        ("keys/sa.json", SERVICE_ACCOUNT, "service-account key"),
        ("trainer/config.json", SERVICE_ACCOUNT, "service-account key"),
        (".env", "TOKEN=x", "dotenv file"),
        (".env.production", "TOKEN=x", "dotenv file"),
        ("certs/server.pem", "cert", "PEM key or certificate"),
        ("id_rsa", "key", "SSH key"),
        ("store.p12", "bin", "PKCS#12 key store"),
        ("credentials.json", "{}", "credentials file"),
        ("adc.json", '{"type": "authorized_user", "refresh_token": "r"}', "Google user credentials"),
        ("trainer/key.txt", "-----BEGIN RSA PRIVATE" + " KEY-----\nabc\n", "private key"),
    ],
)
def test_credentials_refused(trainer: Path, tmp_path: Path, rel: str, content: str, why: str) -> None:
    (trainer / rel).parent.mkdir(parents=True, exist_ok=True)
    (trainer / rel).write_text(content)
    with pytest.raises(PackagingError) as info:
        P.build_sdist(trainer, tmp_path / "out")
    assert f"  {rel}: {why}" in str(info.value)
    assert "--allow-credentials" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_credentials_allowed_or_ignored(trainer: Path, tmp_path: Path) -> None:
    (trainer / ".env.example").write_text("TOKEN=")  # a template is not a secret
    (trainer / "trainer" / "sa.json").write_text(SERVICE_ACCOUNT)
    (trainer / "pyproject.toml").write_text(
        (trainer / "pyproject.toml").read_text() + '\n[tool.setuptools.package-data]\ntrainer = ["*.json"]\n'
    )
    sdist = P.build_sdist(trainer, tmp_path / "a", allow_credentials=True)
    assert "trainer/sa.json" in P.sdist_members(sdist)
    (trainer / ".vtrainignore").write_text("notes/\ntrainer/sa.json\n")
    assert "trainer/sa.json" not in P.sdist_members(P.build_sdist(trainer, tmp_path / "b"))


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda root: shutil.rmtree(root), "does not exist"),
        (lambda root: (root / "pyproject.toml").unlink(), "has no pyproject.toml or setup.py"),
        (lambda root: (root / "pyproject.toml").write_text("[project\n"), "not valid TOML"),
    ],
)
def test_bad_package_dir(trainer: Path, tmp_path: Path, setup, message: str) -> None:  # type: ignore[no-untyped-def]
    setup(trainer)
    with pytest.raises(PackagingError, match=message):
        P.build_and_stage(trainer, str(tmp_path), "trainer.task")


def test_module_checks(trainer: Path) -> None:
    scan = P.scan_package(trainer)
    P.check_module(scan, "trainer.task")
    with pytest.raises(PackagingError, match=r"'trainer' is a package without __main__.py: `python -m trainer` fails"):
        P.check_module(scan, "trainer")
    with pytest.raises(PackagingError, match=r"'trainer.train' not found .*expected trainer/train.py"):
        P.check_module(scan, "trainer.train")
    with pytest.raises(PackagingError, match="not a dotted Python module name"):
        P.check_module(scan, "trainer/task.py")
    with pytest.raises(PackagingError, match=r"trainer/scratch.py exists but is excluded"):
        P.check_module(scan, "trainer.scratch")


def test_build_failure_shows_backend_output(tmp_path: Path) -> None:
    root = tmp_path / "broken"
    shutil.copytree(DATA / "setup_py_only", root)
    (root / "setup.py").write_text("raise SystemExit('setup.py says boom')\n")
    with pytest.raises(PackagingError, match=r"(?s)building the sdist failed.*setup.py says boom"):
        P.build_sdist(root, tmp_path / "out")


def test_runtime_sdist_installs_and_imports(tmp_path: Path) -> None:
    sdist = R.build_runtime_sdist(tmp_path)
    assert sdist.name == R.planned_runtime_uri(str(tmp_path)).rsplit("/", 1)[1]
    members = P.sdist_members(sdist)
    # Only what replicas import: a change to the CLI, the rules or the emulator leaves this hash alone.
    runtime = sorted(p.relative_to(REPO).as_posix() for sub in ("runtime", "diloco", "horovod")
                     for p in (REPO / "vtrain" / sub).rglob("*.py"))
    assert members == sorted([
        "PKG-INFO", "pyproject.toml", "vtrain/__init__.py", "vtrain/constants.py", "vtrain/errors.py",
        "vtrain/strategies.py", "vtrain/foreign/__init__.py", "vtrain/py.typed", *runtime])
    # Written by vtrain, not a backend: the same sources are the same bytes, and nothing is left beside it.
    assert R.build_runtime_sdist(tmp_path / "again").read_bytes() == sdist.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again", sdist.name]
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(sdist),
        ],
        check=True,
    )
    out = subprocess.run(
        [sys.executable, "-c", "import sys, vtrain, vtrain.runtime; print(vtrain.__version__, vtrain.__file__, "
         "all(m in ('vtrain', 'vtrain.constants', 'vtrain.errors', 'vtrain.foreign', 'vtrain.strategies', "
         "'vtrain.runtime') or "
         "m.startswith('vtrain.runtime.') for m in sys.modules if m.startswith('vtrain')))"],
        env={"PYTHONPATH": str(target), "PATH": os.environ.get("PATH", "")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0] == __version__ and out[1].startswith(str(target)) and out[2] == "True"


@pytest.mark.slow
def test_build_and_stage_gcs(gcs, trainer: Path) -> None:  # type: ignore[no-untyped-def]
    gcs.create_bucket("stage-bkt")
    client = gcs.client()
    staging = "gs://stage-bkt/team"
    planned = [P.planned_uri(trainer, staging), R.planned_runtime_uri(staging)]
    first = P.build_and_stage(trainer, staging, "trainer.task", client=client, progress=False)
    assert [o.uri for o in first] == planned
    assert [o.uploaded for o in first] == [True, True]
    assert gcs.object_names("stage-bkt") == sorted(u.removeprefix("gs://stage-bkt/") for u in planned)
    # Unchanged: nothing built, nothing sent.
    second = P.build_and_stage(trainer, staging, "trainer.task", client=client, progress=False)
    assert [(o.uri, o.uploaded) for o in second] == [(u, False) for u in planned]
    assert [o.size for o in second] == [o.size for o in first]
    # A changed trainer: a new trainer object, the runtime is reused.
    (trainer / "trainer" / "task.py").write_text("print('v2')\n")
    third = P.build_and_stage(trainer, staging, "trainer.task", client=client, progress=False)
    assert third[0].uri != planned[0] and third[0].uploaded
    assert (third[1].uri, third[1].uploaded) == (planned[1], False)
    assert len(gcs.object_names("stage-bkt")) == 3
    assert P.describe(third)[0]["role"] == "trainer"


def test_missing_bucket_fails_before_building(gcs, trainer: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    def no_build(*args: object, **kwargs: object) -> Path:
        raise AssertionError("built before the bucket was checked")

    monkeypatch.setattr(P, "run_backend", no_build)
    with pytest.raises(PackagingError, match="staging bucket gs://missing-bkt does not exist"):
        P.build_and_stage(trainer, "gs://missing-bkt/x", "trainer.task", client=gcs.client())


def test_local_problems_come_before_any_network(trainer: Path) -> None:
    """Credentials and a wrong module are reported without touching the (unreachable) bucket."""
    (trainer / ".env").write_text("A=1")
    with pytest.raises(PackagingError, match=r"\.env: dotenv file"):
        P.build_and_stage(trainer, "gs://unreachable-bkt", "trainer.task")
    with pytest.raises(PackagingError, match="'trainer.nope' not found"):
        P.build_and_stage(trainer, "gs://unreachable-bkt", "trainer.nope")


def test_failed_build_uploads_nothing(gcs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gcs.create_bucket("clean-bkt")
    root = tmp_path / "broken"
    shutil.copytree(DATA / "setup_py_only", root)
    (root / "setup.py").write_text("raise SystemExit('boom')\n")
    with pytest.raises(PackagingError, match="boom"):
        P.build_and_stage(root, "gs://clean-bkt", "trainer.task", client=gcs.client(), progress=False)
    assert gcs.object_names("clean-bkt") == []


def test_module_left_out_by_backend(gcs, trainer: Path) -> None:  # type: ignore[no-untyped-def]
    gcs.create_bucket("mod-bkt")
    (trainer / "tools").mkdir()
    (trainer / "tools" / "run.py").write_text("")  # a module setuptools is told not to package
    with pytest.raises(PackagingError, match="left trainer module 'tools.run' out of the sdist"):
        P.build_and_stage(trainer, "gs://mod-bkt", "tools.run", client=gcs.client(), progress=False)
    assert gcs.object_names("mod-bkt") == []


@pytest.mark.slow
def test_a_syntax_error_in_the_trainer_is_refused_before_upload(gcs, trainer: Path) -> None:  # type: ignore[no-untyped-def]
    gcs.create_bucket("syn-bkt")
    (trainer / "tools").mkdir()
    (trainer / "tools" / "py2.py").write_text("print 'not imported by the trainer'\n")  # outside trainer/: ignored
    (trainer / "trainer" / "task.py").write_text("import os\n\ndef main(:\n    pass\n")
    with pytest.raises(PackagingError) as info:
        P.build_and_stage(trainer, "gs://syn-bkt", "trainer.task", client=gcs.client(), progress=False)
    assert str(info.value).startswith(f"{trainer / 'trainer' / 'task.py'}:3: ")
    assert "the trainer would fail on import" in str(info.value)
    assert gcs.object_names("syn-bkt") == []
    (trainer / "trainer" / "task.py").write_text("import os\n")
    P.build_and_stage(trainer, "gs://syn-bkt", "trainer.task", client=gcs.client(), progress=False)


@pytest.mark.slow
def test_build_and_stage_local_directory(trainer: Path) -> None:
    stage_dir = trainer / "staging"  # inside the package: it must not feed the next hash
    stage_dir.mkdir()
    for staging in (str(stage_dir), stage_dir.as_uri()):
        planned = [P.planned_uri(trainer, staging), R.planned_runtime_uri(staging)]
        objects = P.build_and_stage(trainer, staging, "trainer.task", progress=False)
        assert [o.uri for o in objects] == planned
        for o in objects:
            assert uri_to_path(o.uri).is_file()  # type: ignore[union-attr]
    assert [o.uploaded for o in objects] == [False, False]  # the second spelling found them staged
    assert len(list((stage_dir / "vtrain").iterdir())) == 2


@pytest.mark.slow
def test_isolated_and_plain_builds_agree(trainer: Path, tmp_path: Path) -> None:
    """Both build modes give the same name and files; the timing is printed for the record."""
    results = {}
    for isolation in (False, True):
        start = time.perf_counter()
        sdist = P.build_sdist(trainer, tmp_path / str(isolation), isolation=isolation)
        results[isolation] = (sdist.name, P.sdist_members(sdist), time.perf_counter() - start)
    assert results[False][:2] == results[True][:2]
    print(f"\nsdist build: in-process env {results[False][2]:.2f}s, isolated {results[True][2]:.2f}s")


@pytest.mark.slow
def test_setuptools_without_setup_files_builds_in_one_backend_process(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """setuptools' get_requires_for_build_sdist adds only setup_requires, which only setup.py and setup.cfg declare:
    without them the static `requires` decide, and the hook's process is not run. With either, it is, as when a
    static requirement is missing (the build then goes to an isolated environment)."""
    from vtrain.trainer import backend

    hooks: list[str] = []
    real = backend._captured_runner

    def counted(cmd: Any, cwd: str | None = None, extra_environ: Any = None) -> None:
        hooks.append(cmd[2])  # [python, _in_process.py, hook name, control dir]
        real(cmd, cwd, extra_environ)

    monkeypatch.setattr(backend, "_captured_runner", counted)
    plain = tmp_path / "plain"
    shutil.copytree(DATA / "basic", plain)
    first = backend.run_backend(plain, tmp_path / "dist-plain")
    assert hooks == ["build_sdist"]
    hooks.clear()
    cfg = tmp_path / "cfg"
    shutil.copytree(DATA / "basic", cfg)
    (cfg / "setup.cfg").write_text("[metadata]\n")
    second = backend.run_backend(cfg, tmp_path / "dist-cfg")
    assert hooks == ["get_requires_for_build_sdist", "build_sdist"]
    files = [set(P.sdist_members(sdist)) - {"setup.cfg"} for sdist in (first, second)]  # setuptools writes one
    assert files[0] == files[1] and "trainer/task.py" in files[0]
    hooks.clear()
    pyproject = plain / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('requires = ["', 'requires = ["vtrain-no-such-backend", "'))
    from build import ProjectBuilder

    assert backend._lacks_requirements(ProjectBuilder(plain, runner=counted), plain) and hooks == []


# --- `vtrain package` ---------------------------------------------------------------------------

JOB = """\
name: package-test
region: us-central1
staging_bucket: {staging}
trainer:
  package: {package}
  module: trainer.task
  image: tf-cpu.2-17
cluster:
  chief: {{machine_type: n1-standard-4}}
"""


def _job(tmp_path: Path, package: Path, staging: str) -> Path:
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(staging=staging, package=package))
    return job


@pytest.mark.slow
def test_cli_package_text_then_json(gcs, trainer: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from vtrain.cli import cli

    gcs.create_bucket("cli-bkt")
    job = _job(tmp_path, trainer, "gs://cli-bkt/s")
    planned = [P.planned_uri(trainer, "gs://cli-bkt/s"), R.planned_runtime_uri("gs://cli-bkt/s")]
    first = CliRunner().invoke(cli, ["package", str(job)])
    assert first.exit_code == 0, first.output
    lines = first.output.splitlines()
    assert [line.split()[:2] for line in lines] == [["trainer", "uploaded"], ["runtime", "uploaded"]]
    assert [line.split()[2] for line in lines] == planned
    second = CliRunner().invoke(cli, ["package", str(job), "-o", "json"])
    assert second.exit_code == 0, second.output
    rows = json.loads(second.output)
    assert [(r["role"], r["uri"], r["uploaded"]) for r in rows] == [
        ("trainer", planned[0], False),
        ("runtime", planned[1], False),
    ]


@pytest.mark.slow
def test_cli_package_refuses_credentials(trainer: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from vtrain.cli import cli

    (trainer / "trainer" / "sa.json").write_text(SERVICE_ACCOUNT)
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir()
    job = _job(tmp_path, trainer, str(stage_dir))
    result = CliRunner().invoke(cli, ["package", str(job), "--target", "local"])
    assert result.exit_code == 1
    assert "error: refusing to package 1 file in" in result.output
    assert "error:   trainer/sa.json: service-account key" in result.output
    assert not (stage_dir / "vtrain").exists()
    allowed = CliRunner().invoke(cli, ["package", str(job), "--target", "local", "--allow-credentials"])
    assert allowed.exit_code == 0, allowed.output
    assert len(list((stage_dir / "vtrain").iterdir())) == 2


def test_cli_package_missing_bucket_subprocess(gcs, trainer: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    job = _job(tmp_path, trainer, "gs://absent-bkt/s")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    result = subprocess.run(
        [sys.executable, "-m", "vtrain", "package", str(job)], env=env, capture_output=True, text=True
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: staging bucket gs://absent-bkt does not exist;")
