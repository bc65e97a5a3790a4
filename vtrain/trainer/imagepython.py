"""Will the trainer's files parse and import on the image's Python? Checked offline, at `validate`.

A prebuilt image runs the Python its name says (``tf-cpu.2-17.py310``: 3.10; the catalog's image rows),
often older than this machine's: a trainer that writes ``except*`` or imports ``tomllib`` (both Python 3.11)
runs here and dies at import on every replica on Vertex. :func:`python_problems` parses each Python file
of the trainer with that Python's grammar (``ast.parse(..., feature_version=)``) and holds its imports
against that Python's standard library: the modules each release added or removed, as its "What's New"
page lists them (``sys.stdlib_module_names`` says only this interpreter's; a test holds the table against it).

An import guarded for another Python is the trainer's business and is not reported: one inside ``try:``
with an ``except ImportError`` (or ModuleNotFoundError, Exception, a bare except), or under an
``if`` that tests ``sys.version_info``.
"""

from __future__ import annotations

import ast
import sys
import warnings
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from vtrain.catalog import sources
from vtrain.userpaths import read_bounded

#: Standard-library modules a release added (importing them on an older Python fails).
ADDED: dict[str, tuple[int, int]] = {
    "contextvars": (3, 7), "dataclasses": (3, 7), "importlib.resources": (3, 7), "importlib.metadata": (3, 8),
    "graphlib": (3, 9), "zoneinfo": (3, 9), "tomllib": (3, 11), "wsgiref.types": (3, 11), "dbm.sqlite3": (3, 13),
}  # fmt: skip
#: Standard-library modules a release removed (importing them on that Python or a newer one fails).
REMOVED: dict[str, tuple[int, int]] = {
    "macpath": (3, 8), "_dummy_thread": (3, 9), "dummy_threading": (3, 9), "formatter": (3, 10), "parser": (3, 10),
    "symbol": (3, 10), "binhex": (3, 11), "asynchat": (3, 12), "asyncore": (3, 12), "distutils": (3, 12),
    "imp": (3, 12), "smtpd": (3, 12),
    **dict.fromkeys(("aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "lib2to3", "mailcap", "msilib",
                     "nis", "nntplib", "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu",
                     "xdrlib"), (3, 13)),  # PEP 594's dead batteries, and lib2to3
}  # fmt: skip
#: What to use instead, where a package or a module does the same.
INSTEAD = {"tomllib": "the tomli package (a dependency of the trainer)", "distutils": "setuptools or packaging",
           "imp": "importlib", "asyncore": "asyncio", "asynchat": "asyncio", "smtpd": "aiosmtpd",
           "zoneinfo": "the backports.zoneinfo package", "graphlib": "the graphlib_backport package"}
SOURCE = sources.PYTHON_WHATSNEW
MAX_FILES = 2000  # Python files checked a trainer; past this the rest are the trainer's business
MAX_BYTES = 4 << 20  # a larger .py file is data, not code to check
MAX_PROBLEMS = 20  # reported per Python; the first ones say what to fix


@dataclass(frozen=True)
class PythonProblem:
    file: str  # relative to the trainer package
    line: int
    message: str


def version_of(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def stdlib_problem(module: str, python: tuple[int, int]) -> str | None:
    """Why `import module` fails on `python` for want of a standard-library module; None when it does not."""
    for name in (module, module.split(".")[0]):
        if name in ADDED and python < ADDED[name]:
            return f"{name} is in Python's standard library from {'.'.join(map(str, ADDED[name]))}"
        if name in REMOVED and python >= REMOVED[name]:
            return f"{name} was removed from Python's standard library in {'.'.join(map(str, REMOVED[name]))}"
    return None


def _guard_catches_import_error(node: ast.Try) -> bool:
    names = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
    for handler in node.handlers:
        caught = handler.type
        if caught is None:
            return True
        kinds = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if any(isinstance(k, ast.Name) and k.id in names or isinstance(k, ast.Attribute) and k.attr in names
               for k in kinds):
            return True
    return False


def _imports(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, module, how it is written) of each import not guarded for another Python."""
    def walk(node: ast.AST, guarded: bool) -> Iterator[tuple[int, str, str]]:
        if isinstance(node, ast.Import) and not guarded:
            for alias in node.names:
                yield node.lineno, alias.name, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and not guarded and node.module and not node.level:
            yield node.lineno, node.module, f"from {node.module} import ..."
        for child in ast.iter_child_nodes(node):
            shield = isinstance(node, ast.Try) and child in node.body and _guard_catches_import_error(node)
            shield |= isinstance(node, ast.If) and "version_info" in ast.unparse(node.test)
            yield from walk(child, guarded or shield)
    return walk(tree, False)


#: Syntax a grammar reports past the statement's end: the node that holds it in this Python's own parse.
_LATE = {"Exception groups": "TryStar", "Pattern matching": "Match"}


def _error_line(source: bytes, err: SyntaxError) -> int:
    """The line of a syntax error; for `except*` and `match` (reported where their statement ends) the line of the
    first one, read from this Python's own parse (the `except*` clause, the `match`)."""
    kind = next((getattr(ast, name, None) for text, name in _LATE.items() if text in err.msg), None)
    if kind is not None:
        try:
            nodes = [n for n in ast.walk(ast.parse(source)) if isinstance(n, kind)]
        except SyntaxError:
            nodes = []
        if nodes:
            return int(min(n.handlers[0].lineno if getattr(n, "handlers", None) else n.lineno for n in nodes))
    return err.lineno or 1


def _local_modules(files: Collection[str]) -> set[str]:
    """The top-level names the trainer's own files provide (a trainer's parser.py shadows the stdlib's)."""
    names = set()
    for rel in files:
        parts = rel.removeprefix("src/").split("/")
        names.add(parts[0].removesuffix(".py"))
    return names


def python_problems(root: Path, files: Collection[str], python: str, image: str) -> list[PythonProblem]:
    """What fails on `python` (MAJOR.MINOR, the Python of `image`) in the trainer's Python files: syntax its
    grammar lacks, standard-library modules it lacks. `files` are the packaged paths (relative, POSIX)."""
    target = version_of(python)
    here = sys.version_info[:2]
    on = f"the image {image} runs Python {python}"
    found: list[PythonProblem] = []
    own = _local_modules(files)
    for rel in sorted(f for f in files if f.endswith(".py"))[:MAX_FILES]:
        if len(found) >= MAX_PROBLEMS:
            break
        try:
            source = read_bounded(root / rel, MAX_BYTES)
        except (OSError, ValueError):
            continue  # unreadable or too big: packaging says so where it reads the file
        tree = None
        for grammar in (min(target, here), here):  # the image's, then this Python's for the imports
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # SyntaxWarning (invalid escapes) is the trainer's business
                    tree = ast.parse(source, rel, feature_version=grammar)
                break
            except SyntaxError as err:
                if target > here or grammar == here:  # a grammar this Python cannot judge, or broken for any
                    break
                found.append(PythonProblem(rel, _error_line(source, err), f"{err.msg}; {on}, so the trainer fails "
                                                                           "at import there: write it for that "
                                                                           "Python or use a newer image"))
            except ValueError:  # null bytes: packaging reports the file
                break
        for line, module, written in _imports(tree) if tree is not None else ():
            why = None if module.split(".")[0] in own else stdlib_problem(module, target)
            if why is not None:
                fix = INSTEAD.get(module.split(".")[0])
                found.append(PythonProblem(rel, line, f"`{written}`: {why}, and {on} (ModuleNotFoundError at import "
                                                      f"there); use {fix + ' or ' if fix else ''}an image with "
                                                      "a Python that has it"))
    return found[:MAX_PROBLEMS]


__all__ = ["ADDED", "INSTEAD", "MAX_PROBLEMS", "REMOVED", "SOURCE", "PythonProblem", "python_problems",
           "stdlib_problem", "version_of"]
