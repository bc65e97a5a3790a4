"""The bad-input corpus: every file in tests/data/bad is broken in one way and says how.

Each file starts with a one-line description, then one `# expect:` line per
problem the loader must report, in line order:

    # expect: LINE: KEY.PATH: MESSAGE FRAGMENT

KEY.PATH is `-` for problems about the whole file (syntax, empty, wrong top
level). The loader must report exactly those problems: the same count, each at
that line, under that key path, with the fragment in its message (fragments
are chosen to pin the allowed values, the fix or the did-you-mean). The
`several_*` files carry more than one problem, to prove they come out together
and sorted by line. Files that name a trainer package find `pkg/` (a valid
package) and `pkg_nopyproject/` beside them in a temporary copy of the corpus.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.load import load_config

CORPUS = Path(__file__).resolve().parents[1] / "data" / "bad"
FILES = sorted(CORPUS.glob("*.yaml"))
_EXPECT = re.compile(r"^# expect: (?P<line>\d+): (?P<path>\S+): (?P<fragment>.+)$")
#: Every message must tell the user what to do or what is allowed, not only that something is wrong.
_GUIDANCE = re.compile(
    r"allowed|did you mean|\buse\b|\bset\b|\btry\b|remove|\badd\b|expected|quote|keep|give|omit|e\.g\.|like "
    r"|available|supports|\bput\b|at most|at least|\bneeds?\b|must|only"
)


@dataclass(frozen=True)
class Expected:
    line: int
    path: str
    fragment: str


def expectations(file: Path) -> list[Expected]:
    found = []
    for text in file.read_text(encoding="utf-8").splitlines():
        match = _EXPECT.match(text)
        if match:
            path = "" if match["path"] == "-" else match["path"]
            found.append(Expected(int(match["line"]), path, match["fragment"]))
    return found


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the corpus with the package directories some files point at."""
    root = tmp_path_factory.mktemp("bad")
    for file in FILES:
        shutil.copy(file, root / file.name)
    for pkg in ("pkg", "pkg_nopyproject"):
        (root / pkg / "trainer").mkdir(parents=True)
        (root / pkg / "trainer" / "__init__.py").write_text("")
        (root / pkg / "trainer" / "task.py").write_text("print('training')\n")
    (root / "pkg" / "pyproject.toml").write_text('[project]\nname = "trainer"\nversion = "0.1"\n')
    return root


def problems_of(file: Path) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        load_config(file)
    return info.value.problems


def test_corpus_is_big_and_every_file_says_what_it_expects() -> None:
    assert len(FILES) >= 30
    for file in FILES:
        first = file.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# ") and not first.startswith("# expect:"), file.name
        assert expectations(file), f"{file.name} has no '# expect:' line"


@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_bad_file_reports_exactly_the_expected_problems(corpus: Path, name: str) -> None:
    expected = expectations(corpus / name)
    got = problems_of(corpus / name)
    summary = "\n".join(str(p) for p in got)
    assert len(got) == len(expected), f"expected {len(expected)} problem(s), got:\n{summary}"
    for want, problem in zip(expected, got, strict=True):
        assert (problem.line, problem.path) == (want.line, want.path), summary
        assert want.fragment in problem.message, summary
        assert problem.file == str(corpus / name)
        assert problem.column is not None or problem.path == ""
        assert _GUIDANCE.search(problem.message), f"message gives no guidance: {problem}"
    assert [p.line for p in got] == sorted(p.line for p in got)


@pytest.mark.parametrize("name", ["several_schema.yaml", "several_rules.yaml"])
def test_several_problems_come_out_together_sorted_by_line(corpus: Path, name: str) -> None:
    got = problems_of(corpus / name)
    assert len(got) >= 4
    assert [p.line for p in got] == sorted(p.line for p in got)
    assert len({p.path for p in got}) == len(got)


def test_problem_text_reads_file_line_column_path_message(corpus: Path) -> None:
    (problem,) = problems_of(corpus / "unknown_machine.yaml")
    assert str(problem) == (
        f"{corpus / 'unknown_machine.yaml'}:9:19: cluster.chief.machine_type: unknown machine type "
        "'n1-standrad-8' for Vertex AI training; allowed families: n1-*, n2-*, n4-*, e2-*, c2-*, m1-*, a2-*, a3-*, "
        "a4-*, a4x-*, g2-*, g4-*, ct4p-*, ct5p-*, ct5lp-*, ct6e-*, cloud-tpu; did you mean 'n1-standard-8'?"
    )


def test_local_target_accepts_local_paths_that_vertex_rejects(corpus: Path) -> None:
    config = load_config(corpus / "local_base_output_dir.yaml", target="local")
    assert config.base_output_dir == str((corpus / "out").resolve())  # relative to the job file, not the cwd


# --------------------------------------------------------------------------- through the CLI


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtrain", "validate", *args],
        capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


@pytest.mark.parametrize("name", ["yaml_syntax.yaml", "vcpu_limit.yaml", "several_rules.yaml"])
def test_cli_exit_2_no_traceback_and_json_problems(corpus: Path, name: str) -> None:
    file = corpus / name
    expected = expectations(file)
    text = _cli(str(file))
    assert text.returncode == 2
    assert "Traceback" not in text.stderr and text.stdout == ""
    lines = text.stderr.splitlines()
    assert lines[-1] == f"error: {len(expected)} problem{'s' if len(expected) > 1 else ''} in the job file"
    assert [int(line.split(":")[1]) for line in lines[:-1]] == [e.line for e in expected]

    out = _cli(str(file), "-o", "json")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    problems = json.loads(out.stdout)
    assert isinstance(problems, list)
    assert [(p["line"], p["path"], p["severity"]) for p in problems] == [
        (e.line, e.path, "error") for e in expected
    ]
    for want, got in zip(expected, problems, strict=True):
        assert want.fragment in got["message"]
        assert got["file"] == str(file) and isinstance(got["column"], int)
