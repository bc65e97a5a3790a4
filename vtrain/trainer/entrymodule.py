"""Will `python -m MODULE` run once the trainer is installed on a replica? One answer, from the
list of files that get packaged, for every command: `validate`, `package`, `local`, `submit` and
`submit --dry-run` all call :func:`entry_module_problem` and :func:`syntax_problem`, so validate
never says valid where submit refuses.

The layout vtrain accepts (Vertex runs ``python -m MODULE`` on the installed sdist):

* ``a/b.py`` (or ``src/a/b.py``): a module;
* ``a/b/__main__.py``: a package run with -m (with or without ``__init__.py``: Python runs a
  namespace package's ``__main__`` too, and setuptools' automatic discovery installs it).

A package with ``__init__.py`` but no ``__main__.py`` is refused: ``python -m`` cannot run it.
Whether the build backend really packages the module (an explicit ``packages = [...]`` can leave
a subpackage out) is checked on the built sdist by the commands that build
(:func:`vtrain.trainer.packaging.check_kept`), with this same function over the backend's sdist members.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection
from pathlib import Path

_ROOTS = ("", "src/")


def _layout(files: Collection[str], parts: list[str]) -> tuple[str, str, str] | None:
    """(root prefix, kind, entry file) of the first layout that has the module, else None."""
    stem = "/".join(parts)
    for pre in _ROOTS:
        if f"{pre}{stem}.py" in files:
            return pre, "module", f"{pre}{stem}.py"
        for name in ("__main__.py", "__init__.py"):
            if f"{pre}{stem}/{name}" in files:
                return pre, "package", f"{pre}{stem}/{name}"
    return None


def entry_module_problem(files: Collection[str], module: str, root: Path | None = None) -> str | None:
    """Why `python -m MODULE` would fail on the installed package, or None when it will run.

    `files` are the packaged paths (POSIX, relative to the package root; sdist members work too).
    With `root`, a module that exists on disk but is excluded by an ignore file is named as such.
    """
    parts = module.split(".")
    if not module or not all(p.isidentifier() for p in parts):
        return f"trainer module {module!r} is not a dotted Python module name like trainer.task"
    found = _layout(files, parts)
    stem = "/".join(parts)
    if found is None:
        where = f" in {root}" if root is not None else ""
        excluded = [f"{pre}{stem}{suf}" for pre in _ROOTS for suf in (".py", "/__main__.py")
                    if root is not None and (root / f"{pre}{stem}{suf}").is_file()]
        why = f" ({excluded[0]} exists but is excluded by an ignore file)" if excluded else ""
        return f"trainer module {module!r} not found{where}: expected {stem}.py or src/{stem}.py{why}"
    pre, kind, _ = found
    if kind == "package" and f"{pre}{stem}/__main__.py" not in files:
        return (f"trainer module {module!r} is a package without __main__.py: `python -m {module}` fails "
                f"('is a package and cannot be directly executed'); add {pre}{stem}/__main__.py or name a "
                f"module such as {module}.task")
    return None


def syntax_problem(root: Path, files: Collection[str], module: str) -> str | None:
    """The first syntax error in the entry module's top-level package (it would fail on import),
    or None. Only that package is compiled: other files are the trainer's own business."""
    top = module.split(".")[0]
    for rel in sorted(files):
        if not rel.endswith(".py") or not any(rel == f"{pre}{top}.py" or rel.startswith(f"{pre}{top}/")
                                              for pre in _ROOTS):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SyntaxWarning (invalid escapes) is the trainer's business
                compile((root / rel).read_bytes(), rel, "exec", dont_inherit=True)
        except SyntaxError as err:
            return (f"{root / rel}:{err.lineno}: {err.msg}: the trainer would fail on import; "
                    "fix it before it is packaged")
        except ValueError as err:  # source code containing null bytes
            return f"{root / rel}: {err}"
    return None  # an unreadable file raises OSError: the machine's state, not the job file's
