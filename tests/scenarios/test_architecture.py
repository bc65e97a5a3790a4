"""The shape of the package: no import circle, every module importable on its own, modules small,
the job config below everything that uses it. Read from the source, so a new module is covered
without touching this file."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "vtrain"
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _statements(body: list[ast.stmt], typing: bool) -> Iterator[ast.stmt]:
    """The statements of `body` and of every block inside them; those under `if TYPE_CHECKING:` too when `typing`
    (an import is a statement: expressions are not walked, which keeps reading ~220 modules quick)."""
    for node in body:
        if not typing and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _statements(inner, typing)
        for block in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
            yield from _statements(block.body, typing)


def _imports(path: Path, typing: bool) -> set[str]:
    """vtrain modules `path` imports anywhere (function-level lazy imports too; TYPE_CHECKING ones when `typing`)."""
    out: set[str] = set()
    for node in _statements(ast.parse(path.read_text(encoding="utf-8")).body, typing):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in MODULES else node.module)
    return {name for name in out if name in MODULES}


@functools.cache
def _graph(typing: bool = False) -> dict[str, set[str]]:
    """Who imports whom, read when a test asks (not at collection, which every pytest process pays): at run time,
    or, with `typing`, for the type checker too (`if TYPE_CHECKING:` imports: a dependency of the design even where
    the running program does not load it, and the picture of the package draws them)."""
    return {name: _imports(path, typing) - {name} for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle() -> None:
    """TYPE_CHECKING imports count: a module that names another's type for the checker depends on it."""
    assert _cycles(_graph(typing=True)) == []


def _reaches(start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in _graph()[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


#: The stages, lowest first. A module may import from a stage below its own, or from its own unit;
#: units side by side in one stage (request | estimate, cloud | local) do not import each other.
STAGES: list[dict[str, tuple[str, ...]]] = [
    {"ground": ("vtrain.errors", "vtrain.constants", "vtrain.strategies", "vtrain.catalog",
                "vtrain.userpaths", "vtrain.foreign", "vtrain.foreign.data", "vtrain.proctree", "vtrain.network",
                "vtrain.handle", "vtrain.durations", "vtrain.tuning")},
    {"replica": ("vtrain.runtime", "vtrain.diloco", "vtrain.horovod")},  # inside replicas; they ship together
    {"trainer": ("vtrain.trainer",)},
    {"jobfile": ("vtrain.jobfile",)},
    {"request": ("vtrain.request",), "estimate": ("vtrain.estimate",)},
    # a job file as a Vertex AI Pipelines step: the request with its planned artifacts, as a KFP component
    {"pipelines": ("vtrain.pipelines",)},
    {"cloud": ("vtrain.cloud",), "local": ("vtrain.local",)},
    # what a person watching a run sees: reads local and cloud rows · a job brought home: read from the cloud, run here
    {"view": ("vtrain.view",), "home": ("vtrain.home",)},
    {"emulator": ("vtrain.emulator",)},
    {"commands": ("vtrain.commands",)},
    {"faces": ("vtrain", "vtrain.cli", "vtrain.__main__")},  # the SDK's face: nothing below reads it
]


def _place(module: str) -> tuple[int, str]:
    """(stage, unit) of a module: the unit with the longest prefix of its name."""
    best: tuple[int, int, str] | None = None
    for rank, units in enumerate(STAGES):
        for unit, prefixes in units.items():
            for prefix in prefixes:
                if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                    best = (len(prefix), rank, unit)
    assert best is not None, f"{module} is in no stage: add it to STAGES"
    return best[1], best[2]


def _against_the_order(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for importer, imported in sorted(graph.items()):
        rank, unit = _place(importer)
        for name in sorted(imported):
            other_rank, other_unit = _place(name)
            if not (other_rank < rank or other_unit == unit):
                bad.append(f"{importer} ({unit}) imports {name} ({other_unit})")
    return bad


def test_the_layer_check_finds_an_import_up_the_order() -> None:
    graph = {"vtrain.errors": {"vtrain.cli"}, "vtrain.request.render": {"vtrain.estimate.text"},
             "vtrain.cloud.submit": {"vtrain.request.render", "vtrain.cloud.target"}}
    assert _against_the_order(graph) == [
        "vtrain.errors (ground) imports vtrain.cli (faces)",
        "vtrain.request.render (request) imports vtrain.estimate.text (estimate)",
    ]


def test_a_type_checking_import_counts_for_the_layers(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vtrain.cli import main\n"
                      "def f():\n    from vtrain.errors import VtrainError\n")  # fmt: skip
    assert _imports(module, typing=True) == {"vtrain.cli", "vtrain.errors"}
    assert _imports(module, typing=False) == {"vtrain.errors"}
    assert _against_the_order({"vtrain.request.render": {"vtrain.cli"}}) == [
        "vtrain.request.render (request) imports vtrain.cli (faces)"]


def test_every_import_follows_the_stage_order() -> None:
    """Lazy imports count: a function-level import up the order is still a dependency up it; and TYPE_CHECKING
    ones (a type named from a stage above is a dependency on it). The package face is the top: nothing imports it."""
    assert _against_the_order(_graph(typing=True)) == []


def test_the_top_level_stays_small() -> None:
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    # the 11 of the last round + strategies (the strategies table) + foreign/ (what others wrote: printing its
    # text, reading its data bounded) is a package
    assert len(top) <= 13, top


def test_the_job_model_imports_nothing_that_uses_it() -> None:
    model = _reaches("vtrain.jobfile.config")
    # userpaths (path checks, symlink-loop-safe resolve) and tuning.config (the `tuning:` part of the job
    # model) import nothing of vtrain either
    allowed = {"vtrain.catalog", "vtrain.constants", "vtrain.errors", "vtrain.foreign", "vtrain.jobfile.yamlpos",
               "vtrain.userpaths", "vtrain.tuning.config", "vtrain.strategies"}
    assert {m for m in model if not m.startswith("vtrain.catalog.")} <= allowed, model  # the catalog's own parts
    assert _reaches("vtrain.userpaths") == set()
    assert _reaches("vtrain.tuning.config") == set()


def test_the_request_reads_no_file() -> None:
    """Issue 32, "a pure request": what the trainer's files name reaches build_request planned (the artifacts
    planner's :class:`~vtrain.jobfile.artifacts.Artifacts`); the request imports nothing of vtrain.trainer, at run
    time or for the type checker, and does not run the planner."""
    request = {name for name in MODULES if name.startswith("vtrain.request")}
    trainer = {name for name in MODULES if name.startswith("vtrain.trainer")}
    at_run_time = {f"{name} imports {dep}" for name in request for dep in _reaches(name) & trainer}
    assert at_run_time == set()
    typing_only = {f"{name} imports {dep}" for name in request for dep in _graph(typing=True)[name]
                   if dep.startswith("vtrain.trainer")}  # fmt: skip
    assert typing_only == set()
    assert not any("vtrain.jobfile.artifacts" in _reaches(name) for name in request)


def test_the_runtime_needs_only_what_ships_with_it() -> None:
    from vtrain.trainer.runtime_sdist import RUNTIME_FILES, RUNTIME_PACKAGES

    shipped = {f"vtrain.{name.removesuffix('.py').removesuffix('/__init__').replace('/', '.')}"
               for name in RUNTIME_FILES if name.endswith(".py")}  # fmt: skip
    for package in RUNTIME_PACKAGES:
        shipped |= {m for m in MODULES if m == f"vtrain.{package}" or m.startswith(f"vtrain.{package}.")}
    assert _reaches("vtrain.runtime") - {"vtrain"} <= shipped
    assert _reaches("vtrain.horovod") - {"vtrain"} <= shipped


@pytest.mark.slow
def test_every_module_imports_on_its_own() -> None:
    """Each module first in a fresh set of vtrain modules: an order-dependent circle fails here."""
    code = (
        "import importlib, sys\n"
        f"names = {sorted(m for m in MODULES if not m.endswith('__main__'))!r}\n"
        "for name in names:\n"
        "    for loaded in [m for m in sys.modules if m == 'vtrain' or m.startswith('vtrain.')]:\n"
        "        del sys.modules[loaded]\n"
        "    importlib.import_module(name)\n"
        "print('ok', len(names))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    runnable = [m for m in MODULES if m.endswith("__main__")]  # vtrain.__main__, vtrain.diloco.__main__
    assert done.stdout.split() == ["ok", str(len(MODULES) - len(runnable))]


def test_the_benchmarks_import_names_vtrain_has() -> None:
    """benchmarks/ are run by hand, not by the suite: a name they import that moved (a module split, a rename)
    would only show when someone next runs one. Every `from vtrain... import name` there must resolve."""
    import importlib

    missing = []
    for script in sorted((REPO / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in MODULES:
                module = importlib.import_module(node.module)
                missing += [f"{script.name}: {node.module}.{alias.name}" for alias in node.names
                            if not hasattr(module, alias.name) and f"{node.module}.{alias.name}" not in MODULES]
    assert missing == []


#: Modules past MAX_LINES that a review kept whole, each with its reason. MAX_LINES is a prompt to look for a
#: concept inside a module, never a reason to split one by size: a module over it is either split along a
#: concept or named here with why it is one concept.
REVIEWED_LONG: dict[str, str] = {
    "vtrain.jobfile.schema": "the job file's shape is one declaration (pools and blocks, then the top level built "
                             "from them), read top to bottom as the generated reference reads it; it was split in "
                             "two once only to stay under the threshold",
    "vtrain.trainer.image.registry": "one registry client: the /v2/ check, the auth dance, the retry loop and every "
                                     "operation share one session's state (tokens, verified, sent); how a blob is "
                                     "read is already apart (answers.BlobReader)",
}


def test_long_modules_were_reviewed() -> None:
    big = {name for name, path in MODULES.items() if len(path.read_text().splitlines()) > MAX_LINES}
    assert big - set(REVIEWED_LONG) == set(), f"past {MAX_LINES} lines: find a concept inside, or list the module " \
                                             "in REVIEWED_LONG with the reason it is one"
    assert set(REVIEWED_LONG) - big == set(), "no longer long: drop it from REVIEWED_LONG"


def test_every_module_says_what_it_owns() -> None:
    missing = [name for name, path in MODULES.items()
               if path.stat().st_size > 200 and ast.get_docstring(ast.parse(path.read_text())) is None]
    assert missing == []


def test_user_facing_errors_live_in_one_tree() -> None:
    """Every VtrainError subclass is defined in vtrain.errors, and each prints itself."""
    import vtrain.errors as errors

    tree = {name for name, obj in vars(errors).items() if isinstance(obj, type) and issubclass(obj, errors.VtrainError)}
    elsewhere = [
        f"{name}.{node.name}"
        for name, path in MODULES.items()
        if name != "vtrain.errors"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b).split(".")[-1] in tree for b in node.bases)
    ]
    assert elsewhere == []
    for name in tree:
        assert callable(getattr(vars(errors)[name], "show", None)), name


def test_errors_show_themselves(capsys: object) -> None:
    import io

    from vtrain.errors import BackendError, ConfigError, Problem

    out = io.StringIO()
    BackendError("first\nsecond").show(out)
    ConfigError([Problem("a.b", "bad", "job.yaml", 3, 4), Problem("c", "hmm", "job.yaml", 1, 1, "warning")]).show(out)
    assert out.getvalue().splitlines() == [
        "error: first",
        "error: second",
        "job.yaml:3:4: a.b: bad",
        "job.yaml:1:1: warning: c: hmm",
        "error: 1 problem in the job file",
    ]


def test_no_strategy_name_is_compared_outside_the_strategies_table() -> None:
    """A strategy is a row of vtrain.strategies: modules read its fields, never compare its name."""
    import re

    compared = re.compile(r"""strategy\w* *(==|!=|in) *[("']""")
    found = [f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py")) if path.name != "strategies.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if compared.search(line)]
    assert found == []


def test_the_strategies_table_names_every_strategy_the_job_file_accepts() -> None:
    from vtrain import strategies
    from vtrain.constants import STRATEGIES

    assert tuple(strategies.BY_NAME) == STRATEGIES
    assert [r.name for r in strategies.TABLE if r.auto] == ["auto"]
    for row in strategies.TABLE:  # every row the runtime can build has a builder
        assert row.auto or row.builds in _builders(), row


def _builders() -> set[str]:
    from vtrain.runtime import tfsetup

    return set(tfsetup._BUILDERS)
