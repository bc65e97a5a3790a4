"""The trainer sdist's name is a function of the file selection alone (issue 32, "a pure request").

The sdist holds every selected file: the build backend's own sdist plus the selected files it left
out (setuptools drops a root `data.csv` that no package or MANIFEST.in names), so planning its name
builds nothing. Issue 20, class 14 stays fixed: a symlink to a dataset outside the folder is not
selected, so changing the dataset changes neither the name nor what is uploaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vtrain.errors import PackagingError
from vtrain.local.envcache import package_digest
from vtrain.trainer import packaging as P

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "hashed"
version = "0.1.0"

[tool.setuptools]
packages = ["trainer"]
"""


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(trainer root, a dataset folder outside it); a cache of this test's own."""
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "trainer-src"
    outside = tmp_path / "datasets"
    outside.mkdir(parents=True)
    (outside / "big.csv").write_text("a,b\n1,2\n")
    (root / "trainer").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("print('train')\n")
    (root / "trainer" / "helper.py").write_text("X = 1\n")
    (root / "data.csv").write_text("a,b\n1,2\n")  # selected; setuptools leaves it out of its sdist
    (root / "trainer" / "alias.py").symlink_to(root / "trainer" / "helper.py")  # a link inside: selected
    (root / "big.csv").symlink_to(outside / "big.csv")  # a link out of the folder: not selected
    return root, outside


def _name(root: Path) -> str:
    return P.planned_uri(root, "gs://bkt").rsplit("/", 1)[1]


def test_a_plan_builds_nothing_and_writes_nothing(layout: tuple[Path, Path], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = layout

    def no_build(*_: object, **__: object) -> Path:
        raise AssertionError("a plan ran the build backend")

    monkeypatch.setattr(P, "run_backend", no_build)
    assert _name(root) == f"hashed-{P.scan_package(root).digest}.tar.gz"
    assert not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_the_sdist_holds_every_selected_file_and_is_named_by_them(layout: tuple[Path, Path], tmp_path: Path) -> None:
    root, outside = layout
    planned = _name(root)
    sdist = P.build_sdist(root, tmp_path / "a")
    assert sdist.name == planned
    members = P.sdist_members(sdist)
    selected = P.scan_package(root).files
    assert "data.csv" in selected and "big.csv" not in selected
    assert set(selected) <= set(members)  # data.csv too, added under the backend's top folder
    assert "PKG-INFO" in members and not [m for m in members if "big.csv" in m]

    (outside / "big.csv").write_text("a,b\n3,4\n5,6\n")  # a dataset linked from outside changes: nothing does
    again = P.build_sdist(root, tmp_path / "b")
    assert _name(root) == planned and again.name == planned
    assert package_digest(again) == package_digest(sdist)  # built again: `vtrain local` reuses its environment
    (root / "data.csv").write_text("a,b\n7,8\n")  # a file only vtrain adds changes: it is in the sdist, a new name
    changed = _name(root)
    rebuilt = P.build_sdist(root, tmp_path / "c")
    assert changed != planned and rebuilt.name == changed and package_digest(rebuilt) != package_digest(sdist)
    (root / "trainer" / "helper.py").write_text("X = 2\n")  # a packaged file (and the link to it) changes
    assert _name(root) not in (planned, changed)


@pytest.mark.slow
def test_pip_installs_what_the_backend_would(layout: tuple[Path, Path], tmp_path: Path) -> None:
    """Vertex (and `vtrain local`) run `pip install` on the sdist: the wheel the backend builds from it holds the
    package, and the files vtrain added ride along in the sdist only."""
    root, _ = layout
    sdist = P.build_sdist(root, tmp_path / "dist")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(sdist)], check=True, timeout=300)
    assert (target / "trainer" / "task.py").read_text() == "print('train')\n"
    assert not (target / "data.csv").exists()
    run = subprocess.run([sys.executable, "-c", "import trainer.alias as a; print(a.X)"], cwd=tmp_path,
                         env={"PYTHONPATH": str(target)}, capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "1", run.stderr


@pytest.mark.slow
def test_a_module_the_backend_leaves_out_is_refused_though_vtrain_adds_it(layout: tuple[Path, Path],
                                                                         tmp_path: Path) -> None:
    root, _ = layout
    (root / "tools").mkdir()
    (root / "tools" / "__init__.py").write_text("")
    (root / "tools" / "run.py").write_text("")  # selected, but `packages = ["trainer"]` installs no tools/
    with pytest.raises(PackagingError, match="left trainer module 'tools.run' out of the sdist"):
        P.build_sdist(root, tmp_path / "dist", modules=["tools.run"])
    assert not (tmp_path / "dist").exists()


@pytest.mark.slow
def test_staging_again_after_a_linked_dataset_changed_uploads_nothing(layout: tuple[Path, Path],
                                                                      tmp_path: Path) -> None:
    root, outside = layout
    (tmp_path / "staged").mkdir()
    staging = str(tmp_path / "staged")
    first = P.build_and_stage(root, staging, "trainer.task", progress=False)
    (outside / "big.csv").write_text("new rows\n")
    second = P.build_and_stage(root, staging, "trainer.task", progress=False)
    assert first[0].uploaded and not second[0].uploaded and second[0].uri == first[0].uri
    assert first[0].uri.endswith("/" + _name(root))


@pytest.mark.slow
def test_a_trainer_built_once_is_staged_anywhere_without_building_again(layout: tuple[Path, Path], tmp_path: Path,
                                                                        gcs: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`vtrain local` keeps its build in the cache's sdists/; a submit to a bucket stages that very file, and a
    build for one bucket serves the next: one backend run for one selection. A kept copy that does not read as
    an sdist is built again; one that lacks the job's entry module is refused as a new build is."""
    root, _ = layout
    (root / "tools").mkdir()
    (root / "tools" / "__init__.py").write_text("")
    (root / "tools" / "run.py").write_text("")  # selected, but `packages = ["trainer"]` installs no tools/
    real, runs = P.run_backend, []

    def counted(*args: Any, **kwargs: Any) -> Path:
        runs.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(P, "run_backend", counted)
    builds = P.builds_dir()
    assert builds == tmp_path / "cache" / "sdists"
    builds.mkdir(parents=True)  # as `vtrain local` makes it
    [local, _] = P.build_and_stage(root, str(builds), "trainer.task", progress=False, builds=builds)  # `vtrain local`
    kept = builds / "vtrain" / _name(root)
    assert local.uri == kept.as_uri() and len(runs) == 1
    assert "tools/run.py" not in json.loads((builds / "vtrain" / f"{_name(root)}.backend.json").read_text())
    client = gcs.client()
    for bucket in ("bkt-a", "bkt-b"):
        gcs.create_bucket(bucket)
        [sent, _] = P.build_and_stage(root, f"gs://{bucket}", "trainer.task", client=client, progress=False,
                                      builds=builds)
        assert sent.uploaded and sent.uri == f"gs://{bucket}/vtrain/{_name(root)}"
        assert client.bucket(bucket).blob(f"vtrain/{_name(root)}").download_as_bytes() == kept.read_bytes()
    assert len(runs) == 1

    for staging in ("gs://bkt-a/other", "gs://bkt-a"):  # a job with another entry module, to stage or staged
        with pytest.raises(PackagingError, match="left trainer module 'tools.run' out of the sdist"):
            P.build_and_stage(root, staging, "tools.run", client=client, progress=False, builds=builds)
    assert len(runs) == 1  # refused by the kept list, as the build it stands for would be

    kept.write_bytes(kept.read_bytes()[:100])  # cut short (a disk that filled up)
    gcs.create_bucket("bkt-c")
    [sent, _] = P.build_and_stage(root, "gs://bkt-c", "trainer.task", client=client, progress=False, builds=builds)
    assert len(runs) == 2 and sent.uploaded
    assert client.bucket("bkt-c").blob(f"vtrain/{_name(root)}").download_as_bytes() == kept.read_bytes()
    assert P.sdist_members(kept)  # the new build was kept in its place

    (tmp_path / "not-a-dir").write_text("x")  # a cache that cannot be written: built, staged, kept nowhere
    gcs.create_bucket("bkt-d")
    [sent, _] = P.build_and_stage(root, "gs://bkt-d", "trainer.task", client=client, progress=False,
                                  builds=tmp_path / "not-a-dir")
    assert len(runs) == 3 and sent.uploaded and (tmp_path / "not-a-dir").read_text() == "x"
