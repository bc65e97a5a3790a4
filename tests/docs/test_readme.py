"""README.md is the front door of the manual in docs/: short, the two commands exact, every link resolving."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

README = REPO / "README.md"
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slugs(page: Path) -> set[str]:
    """GitHub's heading ids of a Markdown page (what mkdocs.yml's pymdownx slugify makes too)."""
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    heads, fence = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"#{1,6} (.+)", line)):
            heads.add(slug(re.sub(r"`([^`]*)`", r"\1", m.group(1)), "-"))
    return heads


def test_the_readme_is_short_and_keeps_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "make demo    # " in text and "make test    # " in text


def test_every_readme_link_resolves() -> None:
    links = _LINK.findall(README.read_text(encoding="utf-8"))
    assert len(links) >= 20, links  # the guides, the references, the development pages
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        path, _, anchor = link.partition("#")
        target = (README.parent / path).resolve()
        assert target.is_file() and target.is_relative_to(REPO), f"README.md links to {link}: no such file"
        if anchor:
            assert anchor in _slugs(target), f"README.md links to {link}: {path} has no heading #{anchor}"

