"""Tests of the manual in docs/: the README's links, the generated pages, the strict build, the quickstart."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.conftest import REPO


def generate_module() -> ModuleType:
    """docs/generate.py (the manual's generators and mkdocs hook; no package of its own)."""
    return docs_module("generate")


def docs_module(name: str) -> ModuleType:
    """docs/NAME.py, a file of the manual's build (the hook, the griffe extension) that is no package's."""
    spec = importlib.util.spec_from_file_location(f"vtrain_docs_{name}", REPO / "docs" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
