"""uv.lock is what `make install` installs (docs/development/dependencies.md): it matches pyproject.toml, it pins the
docs toolchain and TensorFlow, and the install refuses a lock that no longer matches instead of resolving anew."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the oldest supported Python
    import tomli as tomllib

UV = str(Path(sys.executable).with_name("uv"))


def _check(project: Path) -> subprocess.CompletedProcess[str]:
    # --offline: the check compares the lock with pyproject.toml and needs no index (6 ms here, empty cache too)
    return subprocess.run([UV, "lock", "--check", "--offline"], cwd=project, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def test_the_lock_matches_pyproject() -> None:
    done = _check(REPO)
    assert done.returncode == 0, done.stderr


def test_a_requirement_the_lock_lacks_fails_the_check(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "uv.lock", "README.md"):
        shutil.copy(REPO / name, tmp_path / name)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"rich>=13",', '"rich>=13",\n  "six>=1.16",', 1))
    done = _check(tmp_path)
    assert done.returncode != 0
    assert "needs to be updated" in done.stderr


def test_the_lock_pins_the_docs_toolchain_and_tensorflow() -> None:
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    versions = {package["name"]: package.get("version") for package in lock["package"]}
    for name in ("mkdocs", "mkdocs-material", "mkdocstrings", "mkdocstrings-python", "mkdocs-click", "tensorflow",
                 "google-cloud-aiplatform", "google-cloud-pipeline-components", "pip", "uv"):  # fmt: skip
        assert re.fullmatch(r"\d+(\.\d+)*\S*", versions.get(name) or ""), name
    # every pinned file carries its hash
    for package in lock["package"]:
        for wheel in package.get("wheels", []):
            assert wheel["hash"].startswith("sha256:"), package["name"]


def test_make_install_installs_the_lock_and_refuses_a_stale_one() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^SYNC := .*\buv sync --locked\b", makefile, re.M)
    recipe = makefile.split("$(STAMP): pyproject.toml uv.lock", 1)[1].split("\n\n", 1)[0]
    assert "$(SYNC)" in recipe and "pip install" not in recipe
