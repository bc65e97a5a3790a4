"""Issue 29, item 1: what goes in the trainer layer is what the sdist of the same folder holds (one
selection), never a byte from outside the folder, never a credential; the job file and its schema are
not trainer files; `.vtrainignore` rules both. Issue 30, class 5: hashing streams, large files get one notice."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import planned, write_job
from tests.trainer.image_helpers import (
    Registry,
    make_trainer,
    needs_registry,
    push_base,
)
from vtrain import network
from vtrain.cli import cli
from vtrain.constants import MODELINE, SCHEMA_FILE
from vtrain.errors import PackagingError
from vtrain.trainer import credentials as C
from vtrain.trainer import packaging as P
from vtrain.trainer import select as S
from vtrain.trainer.image.layers import TRAINER_DIR, scan_trainer

#: The issue's sample: every one of these must be refused by name (the symlink is left out instead).
SECRETS = {".env~": "A=1\n", ".npmrc": "//registry.npmjs.org/:_authToken=npm_x\n",
           "credentials": "[default]\naws_secret_access_key=x\n", ".ssh/token": "t0k3n\n", "x.pem~": "-----\n"}
MORE_SECRETS = {".pypirc": "[pypi]\npassword=x\n", ".netrc": "machine h login u password p\n",
                ".docker/config.json": '{"auths": {}}\n', ".aws/config": "[default]\n",
                ".config/gcloud/credentials.db": "x", ".gnupg/pubring.kbx": "x", "deploy.key": "x",
                ".credentials.json.swp": "x", "credentials.bak": "x", ".env.production": "X=1\n",
                "#.env#": "A=1\n", "tls.pem.orig": "x"}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    S._noticed.clear()


def _with(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _notes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(network, "_sink", lines.append)
    return lines


@pytest.mark.parametrize("rel", [*SECRETS, *MORE_SECRETS])
def test_each_class_of_credential_is_named(rel: str) -> None:
    assert C.credential_name_reason(rel) is not None


@pytest.mark.parametrize("rel", ["credentials.py", "trainer/keys.py", "environment.yaml", ".env.example",
                                 ".env.example~", "README.md~", "notes.bak", "docker/config.json", "ssh.py",
                                 "trainer/token.py", "monkey.txt"])
def test_ordinary_files_are_not_credentials(rel: str) -> None:
    assert C.credential_name_reason(rel) is None


def test_content_signatures_are_found_across_chunk_borders_and_not_in_large_files(tmp_path: Path) -> None:
    root = make_trainer(tmp_path / "t")
    marker = b"-----BEGIN RSA PRIVATE" + b" KEY-----\n"
    (root / "trainer" / "blob.txt").write_bytes(b"x" * ((1 << 20) - 10) + marker)  # split by the 1 MiB chunk
    with open(root / "big.txt", "wb") as fh:  # past the scan limit: judged by its name only
        fh.write(marker)
        fh.truncate(C.CONTENT_SCAN_LIMIT + 1)
    scan = C.check_contents(S.select_files(root))
    assert scan.credentials == [("trainer/blob.txt", "private key")]


def test_package_refuses_naming_every_secret_and_leaves_the_link_out(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = _with(make_trainer(tmp_path / "t"), {**SECRETS, **MORE_SECRETS, "trainer/\x1b[2Jevil.pem": "x"})
    (root / "passwd_link").symlink_to("/etc/passwd")
    staged = tmp_path / "staged"
    staged.mkdir()
    job = write_job(tmp_path, f"""
        name: secrets
        staging_bucket: {staged}
        trainer: {{package: t, module: trainer.task}}
        cluster: {{chief: {{machine_type: n1-standard-4}}}}
        """)
    done = CliRunner().invoke(cli, ["package", str(job), "--target", "local"])
    assert done.exit_code == 1, done.output
    for rel in [*SECRETS, *MORE_SECRETS]:
        assert f"  {rel}: " in done.stderr, rel
    assert "trainer/\\x1b[2Jevil.pem" in done.stderr and "\x1b" not in done.stderr  # named, escaped
    assert "passwd_link" in done.stderr and "outside the folder" in done.stderr  # the notice: left out
    assert "passwd_link:" not in done.stderr  # ... not a refusal: no byte of it is read
    assert list(staged.iterdir()) == []  # nothing staged
    scan = S.select_files(root)
    assert "passwd_link" not in scan.files and scan.left_out == [("passwd_link", "-> /etc/passwd, outside the folder")]


def test_links_inside_the_folder_count_only_when_what_they_name_is_packaged(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_trainer(tmp_path / "t")
    (root / ".gitignore").write_text("private.txt\n")
    (root / "private.txt").write_text("not for the package\n")
    (root / "git").mkdir()
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[remote]\n")
    (root / "trainer" / "alias.py").symlink_to("task.py")  # names a packaged file: kept
    (root / "shown.txt").symlink_to("private.txt")  # names an ignored file: left out
    (root / "git" / "cfg").symlink_to("../.git/config")  # names VCS data: left out
    (root / "nowhere").symlink_to("missing")  # dangling: not a file
    lines = _notes(monkeypatch)
    scan = S.select_files(root)
    assert "trainer/alias.py" in scan.files and scan.links == {"trainer/alias.py": "trainer/task.py"}
    assert {rel for rel, _ in scan.left_out} == {"shown.txt", "git/cfg"}
    assert len(lines) == 1 and "left out 2 symlink(s)" in lines[0]
    S.select_files(root)
    assert len(lines) == 1  # one notice per folder, however many plans read it


@pytest.mark.slow
def test_the_job_file_and_the_schema_are_not_trainer_files(tmp_path: Path) -> None:
    """`vtrain init`'s layout: the job file and vtrain.schema.json in the trainer folder. Changing only
    `args` (or any key) changes neither the sdist's name nor the image's tag."""
    from vtrain.jobfile.artifacts import planned_images
    from vtrain.jobfile.load import load_config
    from vtrain.request.build import build_request

    root = make_trainer(tmp_path / "t")
    (root / SCHEMA_FILE).write_text("{}\n")
    text = f"""{MODELINE}
name: inside
staging_bucket: gs://bkt/staging
trainer:
  package: .
  module: trainer.task
  args: [--epochs=1]
cluster: {{chief: {{machine_type: n1-standard-4}}}}
"""
    job = root / "vtrain.yaml"
    job.write_text(text)
    other = root / "job.yml"  # a job file without the modeline: left out only when it is the one loaded
    other.write_text(text.replace(MODELINE + "\n", ""))

    def plan(path: Path) -> tuple[str, dict[str, str]]:
        config = load_config(path, [])
        body = build_request(*planned(config)).body
        uri = body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"][0]
        built = load_config(path, ["trainer.build.repository=127.0.0.1:5000/team/trainer",
                                   "trainer.image=127.0.0.1:5000/base/py:base",
                                   "trainer.build.python_version='3.11'"])
        return uri, planned_images(built)

    first = plan(job)
    files = S.select_files(root, skip=[job]).files
    assert SCHEMA_FILE not in files and "vtrain.yaml" not in files and "job.yml" in files
    job.write_text(text.replace("--epochs=1", "--epochs=7"))
    assert plan(job) == first
    (root / SCHEMA_FILE).write_text('{"regenerated": true}\n')
    assert plan(job) == first
    loaded_other = plan(other)
    other.write_text(other.read_text().replace("--epochs=1", "--epochs=9"))
    assert plan(other) == loaded_other
    (root / "trainer" / "task.py").write_text("print('changed')\n")  # a trainer file does change both
    changed = plan(job)
    assert changed[0] != first[0] and changed[1] != first[1]


@pytest.mark.slow
def test_vtrainignore_rules_the_package_and_the_image_alike(tmp_path: Path) -> None:
    root = _with(make_trainer(tmp_path / "t"), {"trainer/notes.py": "X = 1\n", "trainer/scratch/a.py": "Y = 2\n"})
    (root / ".vtrainignore").write_text("trainer/notes.py\ntrainer/scratch/\n")
    sdist = P.build_sdist(root, tmp_path / "dist")
    members = P.sdist_members(sdist)
    assert "trainer/task.py" in members and not [m for m in members if "notes" in m or "scratch" in m]
    image = scan_trainer(root)
    assert image.files == sorted(f for f in members if (root / f).exists() and f in image.files)
    assert "trainer/notes.py" not in image.files and "trainer/scratch/a.py" not in image.files
    assert sdist.name == P.sdist_name(image)  # one selection: the image's files hash to the sdist's name


def test_hashing_streams_the_same_digest_as_the_bytes(tmp_path: Path) -> None:
    data = os.urandom(3 * (1 << 20) + 17)  # more than one chunk
    (tmp_path / "blob").write_bytes(data)
    assert S.hash_entries([("a/blob", tmp_path / "blob")]) == S.hash_entries([("a/blob", data)])
    (tmp_path / "fifo").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        S.hash_entries([("fifo", tmp_path / "fifo")])


def test_a_large_file_gets_one_notice_however_many_plans_read_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A selected file is in the sdist and the image (the selection is what ships): a large one is read to hash
    it by every plan, and the notice says so once, with the way out (.vtrainignore)."""
    root = make_trainer(tmp_path / "t")
    monkeypatch.setattr(S, "LARGE_FILE", 1 << 20)
    with open(root / "data.bin", "wb") as fh:  # sparse: a dataset beside the trainer
        fh.truncate(C.CONTENT_SCAN_LIMIT + (4 << 20))
    lines = _notes(monkeypatch)
    first = P.planned_uri(root, "gs://bkt/s")
    assert len(lines) == 1 and "1 large file(s)" in lines[0] and "data.bin (20 MiB)" in lines[0]
    assert "shipped in the package and read to hash it whenever a plan" in lines[0] and ".vtrainignore" in lines[0]
    assert P.planned_uri(root, "gs://bkt/s") == first
    assert len(lines) == 1
    (root / ".vtrainignore").write_text("data.bin\n")
    assert P.planned_uri(root, "gs://bkt/s") != first


def _layer_files(registry_host: str, repository: str, tag: str, digest: str) -> list[str]:
    import requests

    blob = requests.get(f"http://{registry_host}/v2/{repository}/blobs/{digest}", timeout=10).content
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        return sorted(m.name[len(TRAINER_DIR) + 1:] for m in tar.getmembers() if m.isfile())


@needs_registry
@pytest.mark.slow
def test_the_pushed_trainer_layer_lists_exactly_the_sdists_files(registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    from vtrain.trainer.image.build import build_and_push
    from vtrain.trainer.image.config import ImageSpec

    push_base(registry.client(), "base/py", [("etc/base-release", b"base\n", False)], tmp_path)
    root = _with(make_trainer(tmp_path / "t"), {"README.md": "# demo\n", "data.csv": "a,b\n", "docs/todo.txt": "x\n",
                                                "trainer/util.py": "Z = 3\n", ".vtrainignore": "trainer/util.py\n",
                                                SCHEMA_FILE: "{}\n"})
    (root / "vtrain.yaml").write_text(MODELINE + "\nname: x\n")
    (root / "passwd_link").symlink_to("/etc/passwd")
    spec = ImageSpec(base=f"{registry.host}/base/py:base", repository=f"{registry.host}/team/trainer",
                     module="trainer.task")
    pushed = build_and_push(spec, root, cache=tmp_path / "cache")
    trainer = next(b for b in pushed.blobs if b["role"] == "trainer")
    layer = _layer_files(registry.host, "team/trainer", "", str(trainer["digest"]))
    members = P.sdist_members(P.build_sdist(root, tmp_path / "dist"))
    generated = {m for m in members if m == "PKG-INFO" or ".egg-info/" in m or m == "setup.cfg"}
    assert layer == sorted(set(members) - generated)
    # the selection, whatever the backend keeps of it (setuptools leaves data.csv and docs/ out of its own sdist)
    assert layer == [".vtrainignore", "README.md", "data.csv", "docs/todo.txt", "pyproject.toml", "trainer/__init__.py",
                     "trainer/task.py"]


@needs_registry
@pytest.mark.slow
def test_a_refused_trainer_pushes_nothing(registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    from vtrain.trainer.image.build import build_and_push
    from vtrain.trainer.image.config import ImageSpec

    push_base(registry.client(), "base/py", [("etc/base-release", b"base\n", False)], tmp_path)
    root = _with(make_trainer(tmp_path / "t"), SECRETS)
    spec = ImageSpec(base=f"{registry.host}/base/py:base", repository=f"{registry.host}/team/trainer",
                     module="trainer.task")
    with pytest.raises(PackagingError) as err:
        build_and_push(spec, root, cache=tmp_path / "cache")
    assert all(f"  {rel}: " in str(err.value) for rel in SECRETS)
    import requests

    assert requests.get(f"http://{registry.host}/v2/_catalog", timeout=5).json()["repositories"] == ["base/py"]
