"""Issue 42 part 3: the trainer's files against the image's Python, offline at `validate`: its grammar
(`except*` on 3.10) and its standard library (tomllib on 3.10, distutils on 3.12), with file:line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from vtrain import catalog
from vtrain.cli import cli
from vtrain.trainer.imagepython import ADDED, REMOVED, python_problems, stdlib_problem

TOMLLIB = "import os\nimport tomllib\n\nprint(tomllib.loads('a = 1'))\n"
EXCEPT_STAR = "def main():\n    try:\n        pass\n    except* ValueError:\n        pass\n\n\nmain()\n"


def trainer(root: Path, task: str, **more: str) -> Path:
    (root / "trainer").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0.1"\n')
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text(task)
    for name, text in more.items():
        (root / "trainer" / f"{name}.py").write_text(text)
    return root


def job_file(root: Path, image: str = "tf-cpu.2-17", build: str = "") -> Path:
    path = root / "job.yaml"
    path.write_text(f"name: j\nregion: us-central1\nstaging_bucket: gs://bkt/staging\ntrainer:\n  package: .\n"
                    f"  module: trainer.task\n  image: {image}\n{build}"
                    "cluster:\n  chief: {machine_type: n1-standard-4}\n")
    return path


def validate(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["validate", str(path)])
    return result.exit_code, result.output


PY311 = "  build: {repository: us-central1-docker.pkg.dev/p/r/t, python_version: '3.11'}\n"


@pytest.mark.parametrize(("task", "line", "fragment"), [
    (TOMLLIB, 2, "`import tomllib`: tomllib is in Python's standard library from 3.11"),
    (EXCEPT_STAR, 4, "Exception groups are only supported in Python 3.11 and greater"),
])  # fmt: skip
def test_a_py311_trainer_is_refused_on_a_py310_image_and_passes_on_311(tmp_path: Path, task: str, line: int,
                                                                        fragment: str) -> None:
    """Acceptance: validate refuses a trainer with `import tomllib`, and one with `except*`, on a py310 image
    (exit 2, file:line each); the same trainer on an image with Python 3.11 passes."""
    root = trainer(tmp_path, task)
    code, out = validate(job_file(root))
    assert code == 2, out
    assert f"trainer.package: {root / 'trainer' / 'task.py'}:{line}: {fragment}" in out
    assert "the image tf-cpu.2-17 runs Python 3.10" in out and "1 problem" in out
    code, out = validate(job_file(root, image="python:3.11-slim", build=PY311))
    assert code == 0, out


def test_every_file_of_the_trainer_is_read_and_each_problem_has_its_line(tmp_path: Path) -> None:
    root = trainer(tmp_path, "from trainer import util\n", util="x = 1\nfrom zoneinfo import ZoneInfo\n",
                   old="match x:\n    case 1:\n        pass\n")
    problems = python_problems(root, ["trainer/__init__.py", "trainer/task.py", "trainer/util.py", "trainer/old.py",
                                      "pyproject.toml"], "3.8", "tf-tpu.2-12")
    assert [(p.file, p.line) for p in problems] == [("trainer/old.py", 1), ("trainer/util.py", 2)]
    assert "Pattern matching is only supported in Python 3.10" in problems[0].message
    assert "zoneinfo is in Python's standard library from 3.9" in problems[1].message
    assert python_problems(root, ["trainer/util.py", "trainer/old.py"], "3.10", "tf-cpu.2-17") == []


def test_imports_guarded_for_another_python_are_the_trainers_business(tmp_path: Path) -> None:
    guarded = ("import sys\ntry:\n    import tomllib\nexcept ModuleNotFoundError:\n    import tomli as tomllib\n"
               "if sys.version_info >= (3, 11):\n    from tomllib import loads\n"
               "try:\n    import tomllib as t2\nexcept (KeyError, ImportError):\n    t2 = None\n")
    root = trainer(tmp_path, guarded, use="import parser\n")
    (root / "parser.py").write_text("x = 1\n")  # its own top-level parser.py shadows the stdlib's (gone in 3.10)
    assert python_problems(root, ["trainer/task.py", "parser.py", "trainer/use.py"], "3.10", "i") == []
    assert [p.file for p in python_problems(root, ["trainer/task.py", "trainer/use.py"], "3.10", "i")] == [
        "trainer/use.py"]
    bare = trainer(tmp_path / "b", "try:\n    import tomllib\nexcept KeyError:\n    pass\n")
    assert [p.line for p in python_problems(bare, ["trainer/task.py"], "3.10", "i")] == [2]


def test_a_module_python_removed_is_refused_on_that_python(tmp_path: Path) -> None:
    root = trainer(tmp_path, "import distutils.core\nfrom imp import reload\n")
    problems = python_problems(root, ["trainer/task.py"], "3.12", "python:3.12")
    assert [p.line for p in problems] == [1, 2]
    assert "distutils was removed from Python's standard library in 3.12" in problems[0].message
    assert "use setuptools or packaging or an image" in problems[0].message
    assert python_problems(root, ["trainer/task.py"], "3.10", "tf-cpu.2-17") == []


def test_syntax_newer_than_this_python_is_not_judged(tmp_path: Path) -> None:
    newer = (sys.version_info.major, sys.version_info.minor + 1)
    root = trainer(tmp_path, "type Alias = int\n" if sys.version_info < (3, 12) else "x = 1\n")
    assert python_problems(root, ["trainer/task.py"], f"{newer[0]}.{newer[1]}", "next") == []


def test_the_table_agrees_with_this_pythons_own_list_of_its_standard_library() -> None:
    """sys.stdlib_module_names is this interpreter's only: each ADDED/REMOVED entry must agree with it."""
    here = sys.version_info[:2]
    names = sys.stdlib_module_names
    for module, since in ADDED.items():
        assert (module.split(".")[0] in names) is True, module  # its package is there either way
        assert (stdlib_problem(module, here) is None) is (here >= since), module
    for module, gone in REMOVED.items():
        assert (module in names) is (here < gone), module
    assert stdlib_problem("os", (3, 8)) is None and stdlib_problem("json.decoder", (3, 13)) is None


def test_every_prebuilt_alias_knows_its_python_and_tensorflow() -> None:
    for image in catalog.images.TRAINING_IMAGES:
        assert image.python in ("3.8", "3.10") and image.tensorflow == image.version.replace("-", ".")
        row = catalog.prebuilt_image(image.alias)
        assert row is not None and (row.python, row.tensorflow) == (image.python, image.tensorflow)
        assert catalog.prebuilt_image(image.uri("europe-west4")) == image
    assert catalog.prebuilt_image("tf.2-17", "gpu") == catalog.images.training_image("gpu", "2-17")
    assert catalog.prebuilt_image(None, "tpu") == catalog.images.training_image("tpu", "2-15")


def test_what_ships_to_replicas_runs_on_every_prebuilt_images_python() -> None:
    """vtrain's runtime goes into every replica beside the trainer: it must parse and import on 3.8 and 3.10."""
    from vtrain.trainer.runtime_sdist import RUNTIME_FILES, RUNTIME_PACKAGES

    root = Path(catalog.__file__).parents[1]
    files = [f for f in RUNTIME_FILES if f.endswith(".py")]
    files += [str(p.relative_to(root)) for package in RUNTIME_PACKAGES for p in (root / package).rglob("*.py")]
    for python in sorted({i.python for i in catalog.images.TRAINING_IMAGES if i.python}):
        assert python_problems(root, files, python, "prebuilt") == [], python
