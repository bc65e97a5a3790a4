"""The public SDK face (issue 32, "Types checked"): `vtrain.__all__` is every public name, each importable and
documented; a type checker reads each name's real type (explicit imports under TYPE_CHECKING), while at run
time `import vtrain` still imports nothing but itself."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import vtrain

REPO = Path(__file__).resolve().parents[2]
INIT = REPO / "vtrain" / "__init__.py"


def _checker_imports() -> dict[str, str]:
    """name → module of each `from MODULE import NAME as NAME` under `if TYPE_CHECKING:` in vtrain/__init__.py."""
    found: dict[str, str] = {}
    for node in ast.parse(INIT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                for alias in stmt.names:
                    assert alias.asname == alias.name, f"{alias.name}: re-export it as itself (`as {alias.name}`)"
                    found[alias.name] = stmt.module
    return found


def test_all_is_every_lazy_name_and_the_version() -> None:
    assert vtrain.__all__ == sorted(vtrain._LAZY) + ["__version__"]


def test_a_checker_imports_each_public_name_from_where_it_is_resolved_at_run_time() -> None:
    assert _checker_imports() == vtrain._LAZY


@pytest.mark.parametrize("name", sorted(vtrain._LAZY))
def test_each_public_name_is_importable_and_documented(name: str) -> None:
    value = getattr(vtrain, name)
    assert value.__module__ == vtrain._LAZY[name] and value.__name__ == name
    assert (inspect.getdoc(value) or "").strip(), f"vtrain.{name} has no docstring (the SDK reference shows it)"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'run_locally'"):
        vtrain.run_locally  # type: ignore[attr-defined]  # noqa: B018 - the access is the test


def test_importing_vtrain_imports_nothing_else_of_vtrain() -> None:
    """Only the constants (standard library's dataclasses alone), where the version is written once."""
    code = "import sys, vtrain; print(sorted(m for m in sys.modules if m.startswith('vtrain')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout.strip() == "['vtrain', 'vtrain.constants']"


def test_the_version_is_pyproject_toml_s() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert f'\nversion = "{vtrain.__version__}"\n' in text


SNIPPET = """\
import vtrain

reveal_type(vtrain.run_local)
reveal_type(vtrain.load_config)
job = vtrain.run_local(vtrain.load_config("vtrain.yaml"))
reveal_type(job.result())
reveal_type(job.summary)
vtrain.run_locally
vtrain.run_local("vtrain.yaml", timeout=60.0, keep=False, runtime="host")
vtrain.run_local("vtrain.yaml", timeot=60.0)
vtrain.run_local_tuning("vtrain.yaml", keep="no")
"""


@pytest.mark.slow
def test_a_type_checker_sees_the_sdk_s_types_not_any(tmp_path: Path) -> None:
    """mypy on a user's snippet (the project's settings and cache, which `make test`'s own mypy run warms beside
    the suite)."""
    snippet = tmp_path / "notebook.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                           "--no-error-summary", str(snippet)],
                          capture_output=True, text=True, cwd=REPO, timeout=900, check=False)
    revealed = re.findall(r":(\d+): note: Revealed type is \"(.*)\"", done.stdout)
    assert [line for line, _ in revealed] == ["3", "4", "6", "7"], done.stdout + done.stderr
    types = {int(line): text.replace("builtins.", "") for line, text in revealed}  # mypy 2 drops the prefix
    assert types[3] != "Any" and "LocalJob" in types[3] and "JobConfig" in types[3]
    assert "typing.Mapping[str, Any]" in types[4] and types[4].endswith("-> vtrain.jobfile.config.JobConfig")
    assert types[6] == "str"  # issue 30, class 7: result() is the handle's method
    assert types[7] == "dict[str, Any]"
    assert re.search(r':8: error: Module has no attribute "run_locally"', done.stdout), done.stdout
    # the run options as keywords are typed by name (issue 47): a misspelt or mistyped one is the checker's error
    assert ":9:" not in done.stdout, done.stdout
    assert re.search(r':10: error: Unexpected keyword argument "timeot"', done.stdout), done.stdout
    assert re.search(r':11: error: Argument "keep" to "run_local_tuning" has incompatible type "str"', done.stdout), \
        done.stdout
