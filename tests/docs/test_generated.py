"""The manual's generated pages match the code: errors and exit codes, environment variables, the job file.
Regenerate them after an intended change with `UPDATE_GOLDEN=1` on this test (or `python docs/generate.py`)."""

from __future__ import annotations

import html
import inspect
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.docs import generate_module
from vtrain import errors, handle
from vtrain.jobfile.reference import markdown_text

gen = generate_module()


@pytest.mark.parametrize("page", sorted(gen.PAGES))
def test_the_generated_page_is_fresh(page: str) -> None:
    old, new = gen.refreshed(page)
    if os.environ.get("UPDATE_GOLDEN") == "1" and old != new:
        (gen.REPO / page).write_text(new, encoding="utf-8")
        old = new
    assert old == new, f"{page} is stale: run `UPDATE_GOLDEN=1` on this test or `python docs/generate.py`"


def test_the_errors_page_has_every_error_class_and_every_exit_code() -> None:
    block = gen.errors_block()
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, errors.VtrainError) and c.__module__ == errors.__name__]
    assert len(classes) >= 15
    for cls in classes:
        assert f"`{cls.__name__}` |" in block, cls
    for code in {*handle.EXIT_CODES.values(), errors.WAIT_TIMEOUT_EXIT_CODE, 0, 1, 2, 130, 143}:
        assert f"\n| {code} | " in "\n" + block, code
    assert "| 13 | the job ended `JOB_STATE_EXPIRED` |" in block
    assert "| &nbsp;&nbsp;&nbsp;&nbsp;└ `WaitTimeout` | 12 |" in block


def test_every_environment_variable_vtrain_uses_is_described() -> None:
    assert gen.environment_problems() == []
    described = gen.environment_block()
    for name in ("VTRAIN_PROJECT", "VTRAIN_CACHE_DIR", "VTRAIN_STEP_LOG_EVERY", "TF_CONFIG", "AIP_MODEL_DIR",
                 "CLOUD_ML_JOB_ID", "STORAGE_EMULATOR_HOST"):
        assert f"| `{name}` |" in described, name


def test_a_variable_the_code_starts_using_is_found() -> None:
    source = 'os.environ.get("VTRAIN_NEW_KNOB")\nenv["AIP_SOMETHING"] = x\nVTRAIN_LABELS = ("a",)\nlabel = "VTRAIN_"'
    assert gen.environment_in_code(source) == {"VTRAIN_NEW_KNOB", "AIP_SOMETHING"}


def test_the_sdk_page_lists_every_public_name() -> None:
    import vtrain

    directives = gen.sdk_directives()
    for name in vtrain.__all__:
        if not name.startswith("_"):
            assert f"heading: vtrain.{name}\n" in directives, name
    assert directives.count(":::") == len([n for n in vtrain.__all__ if not n.startswith("_")])


def _cell_html(cell: str) -> str:
    """`cell` in a Markdown table as the site renders it (tables, attr_list, mkdocs-autorefs' `[a][b]`)."""
    markdown = pytest.importorskip("markdown", reason="the docs extra is not installed: pip install -e '.[docs]'")
    autorefs = pytest.importorskip("mkdocs_autorefs")
    page = markdown.markdown(f"| a |\n|---|\n| {cell} |", extensions=["tables", "attr_list",
                                                                       autorefs.AutorefsExtension()])
    return page.split("<td>", 1)[1].split("</td>", 1)[0]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab1 _*[]()<>&!#\\{}:.-~", min_size=1, max_size=30).map(str.strip).filter(bool))
def test_generated_text_reads_as_the_text_it_was(text: str) -> None:
    """What a generated page copies from the code (a field's doc, an error's docstring) is text: no `[a][b]`
    in it becomes a link or a cross-reference (a regex `[a-z][a-zA-Z0-9-]` aborted the strict build), no
    `*`/`_` emphasis, no `<tag>`, no entity."""
    assert _cell_html(markdown_text(text)) == html.escape(text, quote=False)


def test_code_spans_stay_code_and_the_regex_of_a_field_doc_stays_text() -> None:
    assert markdown_text("each [a-z][a-z0-9] and `x[a][b]*` or __init__ {a}") == (
        "each \\[a-z\\]\\[a-z0-9\\] and `x[a][b]*` or \\_\\_init\\_\\_ \\{a}")
    table = gen._job_file_block()
    assert "\\[a-z\\]\\[a-zA-Z0-9-\\]\\{0,126}\\[a-z0-9\\]" in table
    rows = "\n".join(_cell_html(line.strip("|").replace(" | ", " ; ")) for line in table.splitlines()[2:])
    assert "<autoref" not in rows and "<em>" not in rows and "[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]" in rows
