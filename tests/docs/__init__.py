"""Tests of the manual in docs/: the README's links, the generated pages, the strict build, the quickstart."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.conftest import REPO


def generate_module() -> ModuleType:
    """docs/generate.py (the manual's generators and mkdocs hook; no package of its own)."""
    spec = importlib.util.spec_from_file_location("vtrain_docs_generate", REPO / "docs" / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
