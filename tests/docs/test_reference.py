"""The SDK and `vtrain.runtime` reference pages: every public name placed in the order of use, and the docstrings'
Sphinx roles (`:func:`...) rendered as cross-references by docs/roles.py, never shown raw."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.conftest import REPO
from tests.docs import docs_module, generate_module

griffe = pytest.importorskip("griffe", reason="the docs extra is not installed: pip install -e '.[docs]'")
gen = generate_module()

#: Any inline Sphinx role, also one docs/roles.py would not know.
RAW_ROLE = re.compile(r":(?:py:)?[a-z]+:`")


roles = docs_module("roles")


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    """vtrain as mkdocstrings loads it, with the roles extension (~0.7 s)."""
    return griffe.load("vtrain", search_paths=[str(REPO)], extensions=griffe.load_extensions(roles.SphinxRoles))


def _documented(package: griffe.Module) -> list[griffe.Object]:
    """The objects the two pages render: each placed name and its public members."""
    found = []
    for name, sections in gen.API_PAGES.values():
        module = package if name == "vtrain" else package[name.removeprefix("vtrain.")]
        for placed in (n for names in sections.values() for n in names):
            obj = module[placed].final_target if module[placed].is_alias else module[placed]
            found += [obj, *(m for k, m in obj.members.items() if not k.startswith("_") and not m.is_alias)]
    return found


def test_no_documented_docstring_keeps_a_raw_role(package: griffe.Module) -> None:
    objects = _documented(package)
    assert len(objects) > 80
    raw = {obj.path: RAW_ROLE.findall(obj.docstring.value) for obj in objects if obj.docstring}
    assert {path: found for path, found in raw.items() if found} == {}


def test_a_role_becomes_a_cross_reference_to_what_it_names(package: griffe.Module) -> None:
    run_local = package["local.runner.run_local"].docstring.value
    assert '<autoref identifier="vtrain.local.runner.run_job" optional><code>run_job</code></autoref>' in run_local
    # `~pkg.Name` shows the last part; an import is followed to what it imports
    assert ('<autoref identifier="vtrain.local.options.RunOptions" optional><code>RunOptions</code></autoref>'
            in run_local)
    runtime = package["runtime"].docstring.value
    # a relative `.module`, and a name read from the module's own scope
    assert '<autoref identifier="vtrain.runtime.diloco" optional><code>diloco</code></autoref>' in runtime
    assert ('<autoref identifier="vtrain.runtime.decision.choose_strategy" optional><code>choose_strategy</code>'
            in runtime)


def test_every_role_form_is_rewritten(package: griffe.Module) -> None:
    where = package["runtime.tfsetup.strategy"]
    text = roles.rendered(":func:`keras` :py:class:`~vtrain.errors.RuntimeMismatch` :meth:`the wait "
                          "<vtrain.handle.JobHandle.wait>` :data:`vtrain.constants` :mod:`nowhere.known`", where)
    assert RAW_ROLE.search(text) is None
    assert text == (
        '<autoref identifier="vtrain.runtime.tfsetup.keras" optional><code>keras</code></autoref> '
        '<autoref identifier="vtrain.errors.RuntimeMismatch" optional><code>RuntimeMismatch</code></autoref> '
        '<autoref identifier="vtrain.handle.JobHandle.wait" optional><code>the wait</code></autoref> '
        '<autoref identifier="vtrain.constants" optional><code>vtrain.constants</code></autoref> '
        '<autoref identifier="nowhere.known" optional><code>nowhere.known</code></autoref>')


def test_every_public_name_is_placed_once_in_the_order_of_use() -> None:
    assert gen.api_problems() == []
    sdk = gen.api_directives(gen.SDK_MARKER)
    order = [sdk.index(f"heading: vtrain.{name}\n") for name in ("load_config", "build_job", "run_local", "submit")]
    assert order == sorted(order)
    runtime = gen.api_directives(gen.RUNTIME_MARKER)
    assert runtime.index("heading: runtime.strategy\n") < runtime.index("heading: runtime.save_model\n")
    assert runtime.count(":::") == len(set(importlib.import_module("vtrain.runtime").__all__))


def test_a_public_name_left_out_of_the_sections_is_reported() -> None:
    sections = {title: [n for n in names if n != "submit"] for title, names in gen.SDK_SECTIONS.items()}
    sections["Errors"] = [*sections["Errors"], "JobFailed", "no_such_name"]
    problems = gen.api_problems({gen.SDK_MARKER: ("vtrain", sections)})
    assert problems == [
        "vtrain.__all__ has submit: place it in docs/generate.py's SDK_SECTIONS",
        "docs/generate.py's SDK_SECTIONS places no_such_name, which vtrain.__all__ does not have: remove it",
        "docs/generate.py's SDK_SECTIONS places JobFailed twice",
    ]
