"""The strict docs build (run by `make test`) fails on what would mislead a reader: a link to a page or a
heading that is not there, a page no menu reaches, a generated page the code has moved past."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
pytestmark = pytest.mark.slow  # each build takes ~5 s here


def _checkout(tmp_path: Path) -> Path:
    """The docs, their config and what they read from the repository, in a folder of their own."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    for name in ("vtrain", "examples"):
        (root / name).symlink_to(REPO / name)
    return root


def _build(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / "site")],
                          cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_a_broken_link_a_missing_anchor_and_a_page_outside_the_menu_fail_the_build(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    with (root / "docs" / "index.md").open("a", encoding="utf-8") as home:
        home.write("\nSee [the old page](guides/gone.md) and [a heading](guides/ci.md#no-such-heading).\n")
    (root / "docs" / "guides" / "orphan.md").write_text("# Nobody links here\n", encoding="utf-8")
    done = _build(root)
    assert done.returncode != 0
    assert "contains a link 'guides/gone.md', but the target is not found" in done.stderr
    assert "does not contain an anchor '#no-such-heading'" in done.stderr
    assert "guides/orphan.md" in done.stderr  # not in the nav


def test_a_stale_generated_page_fails_the_build(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    page = root / "docs" / "reference" / "errors.md"
    text = page.read_text(encoding="utf-8")
    assert "| 13 | the job ended `JOB_STATE_EXPIRED` |" in text
    page.write_text(text.replace("| 13 | the job ended `JOB_STATE_EXPIRED` |", "| 13 | the job expired |"),
                    encoding="utf-8")
    done = _build(root)
    assert done.returncode != 0
    assert "docs/reference/errors.md is stale: run `python docs/generate.py`" in done.stderr


#: The tags a page of the site may hold; any other is text a docstring meant (`<trial id>`) that Markdown took
#: for HTML and the browser hides.
HTML_TAGS = {"a", "article", "body", "button", "code", "div", "em", "footer", "form", "h1", "h2", "h3", "h4", "h5",
             "head", "header", "html", "img", "input", "label", "li", "link", "main", "meta", "nav", "ol", "p", "path",
             "pre", "script", "small", "span", "strong", "svg", "table", "tbody", "td", "th", "thead", "title", "tr",
             "ul", "br", "hr", "blockquote", "sup", "sub", "details", "summary", "del", "kbd", "abbr", "dl", "dt", "dd",
             "figure", "figcaption", "style", "i", "b", "aside", "iframe", "template", "noscript", "select", "option",
             "textarea", "g", "rect", "circle", "line", "polyline", "polygon", "text", "defs", "use", "symbol"}


def test_the_built_reference_renders_every_role_and_documents_vtrain_runtime(tmp_path: Path) -> None:
    """The site as it is: no page shows a raw Sphinx role (docs/roles.py renders them), hides a docstring's
    `<placeholder>` as an unknown tag or a cell's `{...}` as its attributes; the runtime page has an entry per
    name of `vtrain.runtime.__all__`; the SDK page's sections come in the order of use."""
    import re

    import vtrain.runtime

    root = _checkout(tmp_path)
    done = _build(root)
    assert done.returncode == 0, done.stderr
    pages = {p.relative_to(root / "site").as_posix(): p.read_text(encoding="utf-8")
             for p in (root / "site").rglob("*.html")}
    raw = {page: re.findall(r":(?:py:)?[a-z]+:(?:<code>|`)", text) for page, text in pages.items()}
    assert {page: found for page, found in raw.items() if found} == {}
    tags = {page: set(re.findall(r"<([A-Za-z][\w-]*)", text)) - HTML_TAGS for page, text in pages.items()}
    assert {page: found for page, found in tags.items() if found} == {}
    # a cell's text ending in `{...}` (a regex's `{0,126}`) is taken by attr_list for the cell's attributes
    cells = {page: re.findall(r"<t[dh] (?!align=)[^>]*>", text) for page, text in pages.items()}
    assert {page: found for page, found in cells.items() if found} == {}
    runtime = pages["reference/runtime/index.html"]
    missing = [name for name in vtrain.runtime.__all__ if not re.search(rf"\n\s+runtime\.{name}\n", runtime)]
    assert missing == []
    sdk = pages["reference/sdk/index.html"]
    sections = [sdk.index(f">{title}<") for title in
                ("Read a job file", "Build the request", "Run it here", "Send it to Vertex AI", "Errors")]
    assert sections == sorted(sections)
