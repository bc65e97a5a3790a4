"""Issue 46, class 5: the launcher image holds the job file and what it names, nothing else of its folder.

It packed the job file's whole folder, so a job file in a home directory shipped shell and Python histories,
Documents/ and caches. Now the image's job layer is the job file, its trainer folder (selected as the trainer's
sdist is: the same ignores and exclusions, histories and caches among them) and the requirements files of
`trainer.build` (with those they include), each judged for credentials. Offline: the files are chosen and
hashed as the push would, nothing is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import write_job
from tests.trainer.image_helpers import make_trainer
from vtrain.errors import PackagingError
from vtrain.jobfile.artifacts import launcher_job
from vtrain.trainer.image.launcher import launcher_files
from vtrain.trainer.select import select_files

pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is not installed")

REPOSITORY = "127.0.0.1:9/team/launcher"
#: What a home directory holds besides a job: histories, documents, caches, installed packages, logins.
HOME = {
    ".bash_history": "export HF_TOKEN=hf_secret\n",
    ".zsh_history": ": 1700000000:0;gcloud auth print-access-token\n",
    ".python_history": "import os\n",
    ".psql_history": "\\password\n",
    ".lesshst": ".less-history-file:\n",
    ".viminfo": "# viminfo\n",
    "Documents/taxes-2024.pdf": "%PDF-1.7\n",
    "Downloads/dataset.csv": "a,b\n1,2\n",
    ".cache/pip/http/blob": "cached\n",
    ".local/lib/python3.11/site-packages/x.py": "x = 1\n",
    ".ipython/profile_default/history.sqlite": "SQLite format 3\n",
    "notes.txt": "remember the milk\n",
}


def _home(root: Path) -> Path:
    for rel, text in HOME.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".ssh").mkdir()
    (root / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n")
    return root


def _job(folder: Path, trainer: str, name: str = "job.yaml") -> Path:
    return write_job(folder, f"""
        name: launched
        region: us-central1
        staging_bucket: gs://launcher-test/staging
        trainer:
          {trainer}
          module: trainer.task
        cluster:
          chief: {{machine_type: n1-standard-4}}
        """, name)


def _names(job: Path) -> set[str]:
    """The job layer's files, relative to the job file's folder where they lie in it."""
    from vtrain.jobfile.load import load_config

    named = launcher_job(load_config(job))
    files = launcher_files(job, named.package, files=named.files)
    folder = job.parent.as_posix().lstrip("/") + "/"
    return {name.removeprefix(folder) for name, _, _ in files.job}


def test_a_job_file_in_a_home_directory_ships_alone(tmp_path: Path) -> None:
    home = _home(tmp_path / "home" / "ada")
    job = _job(home, "package_uris: [gs://launcher-test/trainer-0.1.tar.gz]\n          image: tf-cpu.2-17")
    assert _names(job) == {"job.yaml"}  # no history, document, cache or key; the key is not even read
    before = _planned(job)
    (home / "Documents" / "taxes-2024.pdf").write_text("%PDF-1.7 changed\n")
    (home / ".bash_history").write_text("ls\n")
    assert _planned(job) == before  # nothing the image does not hold moves its tag


def test_a_trainer_beside_the_job_file_goes_in_and_the_rest_of_the_home_does_not(tmp_path: Path) -> None:
    home = _home(tmp_path / "home" / "ada")
    make_trainer(home / "project")
    (home / "project" / ".bash_history").write_text("history in the trainer folder\n")
    (home / "project" / ".cache").mkdir()
    (home / "project" / ".cache" / "x").write_text("cached\n")
    job = _job(home, "package: project")
    assert _names(job) == {"job.yaml", "project/pyproject.toml", "project/trainer/__init__.py",
                           "project/trainer/task.py"}


def test_a_home_directory_that_is_the_trainer_is_selected_as_its_sdist_is(tmp_path: Path) -> None:
    """`package: .` in a home: the trainer's own exclusions drop histories and caches from the sdist and the
    image alike, and a login under .ssh/ stops both."""
    home = _home(tmp_path / "home" / "ada")
    make_trainer(home)
    job = _job(home, "package: .")
    with pytest.raises(PackagingError, match=r"\.ssh/id_ed25519: SSH directory"):
        _names(job)
    (home / ".ssh" / "id_ed25519").unlink()
    (home / ".ssh").rmdir()
    sdist = set(select_files(home, skip=[job]).files)
    assert _names(job) == {"job.yaml", *sdist}
    assert sdist == {"pyproject.toml", "trainer/__init__.py", "trainer/task.py", "notes.txt",
                     "Documents/taxes-2024.pdf", "Downloads/dataset.csv"}  # what a trainer folder may hold


def test_the_requirements_files_a_build_names_go_in_with_those_they_include(tmp_path: Path) -> None:
    folder = tmp_path / "jobs"
    make_trainer(tmp_path / "trainer")
    (folder / "deps").mkdir(parents=True)
    (folder / "deps" / "reqs.txt").write_text("-r base.txt\n-c pins.txt\nnumpy\n")
    (folder / "deps" / "base.txt").write_text("requests\n")
    (folder / "deps" / "pins.txt").write_text("numpy==1.26.4\n")
    (folder / "deps" / "unrelated.txt").write_text("scipy\n")
    (folder / ".python_history").write_text("x\n")
    job = _job(folder, "package: ../trainer\n          build: {repository: europe-docker.pkg.dev/p/r/t, "
                       "requirements: [deps/reqs.txt, pandas]}")
    names = _names(job)
    assert {"job.yaml", "deps/reqs.txt", "deps/base.txt", "deps/pins.txt"} <= names
    assert not {"deps/unrelated.txt", ".python_history"} & names
    assert str(tmp_path / "trainer" / "trainer" / "task.py").lstrip("/") in names


def test_a_named_file_that_looks_like_a_credential_is_refused(tmp_path: Path) -> None:
    make_trainer(tmp_path / "trainer")
    (tmp_path / ".env.txt").write_text("numpy\n")
    job = _job(tmp_path, "package: trainer\n          build: {repository: europe-docker.pkg.dev/p/r/t, "
                         "requirements: [.env.txt]}")
    with pytest.raises(PackagingError, match=r"(?s)refusing to package 1 file .*the job file names it: name "
                                             r"another file.*\.env\.txt: dotenv file"):
        _names(job)


def _planned(job: Path) -> str:
    from vtrain.pipelines import planned_launcher_image

    return planned_launcher_image(job, REPOSITORY)
