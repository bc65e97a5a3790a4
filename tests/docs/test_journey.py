"""The manual as a journey: the nav groups the guides as a user travels, every guide is in it and on the home page
(so a new guide cannot be orphaned), each guide opens with a small example, no paragraph runs on, and the
commands the pages show use options that exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from tests.conftest import REPO
from vtrain.cli import cli

DOCS = REPO / "docs"
GUIDES = sorted((DOCS / "guides").glob("*.md"))
#: The nav's groups, in the order a user meets them (docs/index.md has a section per guide group).
JOURNEY = ["Home", "Getting started", "Running and watching jobs", "Scaling up", "Results", "CI and automation",
           "Reference", "Development"]
#: Longest paragraph or list item, in words, outside tables and code.
MAX_WORDS = 150
#: Pages that still have longer ones, to break up next (a ratchet: the test fails once one no longer does, so
#: that it leaves this list).
LONG_PARAGRAPHS_LEFT = {"rules.md", "secrets.md", "testing.md"}
#: An example at the top: a fenced block before the first `##` heading, after at most this many lines of prose,
#: of at most this many lines ("screenshot-sized").
EXAMPLE_AFTER, EXAMPLE_LINES = 12, 30


class _NavLoader(yaml.SafeLoader):
    """mkdocs.yml as data: its `!!python/...` tags (the toc's slugify) read as nothing."""


_NavLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def _nav() -> list[Any]:
    return yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_NavLoader)["nav"]


def _pages(entry: Any) -> list[str]:
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, list):
        return [page for item in entry for page in _pages(item)]
    return [page for value in entry.values() for page in _pages(value)]


def _prose(page: Path) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code, the generated blocks and HTML comments."""
    lines, fence, generated = [], "", False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if fence:
            fence = "" if stripped.startswith(fence) else fence
            lines.append((number, ""))
        elif m := re.match(r"(`{3,}|~{3,})", stripped):
            fence = m.group(1)
            lines.append((number, ""))
        elif stripped.startswith("<!-- generated") or stripped == "<!-- end generated -->":
            generated = not stripped.startswith("<!-- end")
            lines.append((number, ""))
        else:
            lines.append((number, "" if generated else line))
    return lines


def paragraphs(page: Path) -> list[tuple[int, str]]:
    """(first line, text) of each paragraph and each list item; tables, headings and code left out."""
    found: list[tuple[int, list[str]]] = []
    for number, line in _prose(page):
        stripped = line.strip()
        if not stripped or stripped.startswith(("|", "#", "<!--", "![")) or line.startswith("    ") and not found:
            found.append((number, []))
            continue
        if re.match(r"(?:[-*+]|\d+\.)\s", stripped) or not found or not found[-1][1]:
            found.append((number, [stripped]))
        else:
            found[-1][1].append(stripped)
    return [(number, " ".join(words)) for number, words in found if words]


def test_every_guide_is_in_the_nav_and_on_the_home_page() -> None:
    in_nav = set(_pages(_nav()))
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\((guides/[^)#\s]+)", home))
    guides = {f"guides/{page.name}" for page in GUIDES}
    assert len(guides) >= 27
    assert guides - in_nav == set(), "add each guide to a group of mkdocs.yml's nav"
    assert guides - linked == set(), "link each guide from docs/index.md, in its group's table"


def test_the_nav_is_grouped_as_a_user_travels() -> None:
    nav = _nav()
    assert [next(iter(entry)) for entry in nav] == JOURNEY
    groups = {next(iter(entry)): _pages(entry) for entry in nav}
    assert groups["Getting started"] == ["guides/install.md", "guides/quickstart.md", "guides/submitting.md"]
    assert "reference/runtime.md" in groups["Reference"]
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    sections = [home.index(f"\n## {group}\n") for group in JOURNEY[1:]]
    assert sections == sorted(sections), "docs/index.md's sections in the nav's order"


def test_a_guide_not_in_the_nav_or_not_on_the_home_page_is_caught(tmp_path: Path) -> None:
    """The checks above read the real files; here the same reading of a nav and a home page that leave one out."""
    nav = yaml.load("nav:\n  - Home: index.md\n  - Getting started:\n      - guides/a.md\n", Loader=_NavLoader)["nav"]
    assert {"guides/a.md", "guides/b.md"} - set(_pages(nav)) == {"guides/b.md"}
    page = tmp_path / "p.md"
    page.write_text("# T\n\n" + "word " * 151 + "\n\n- item\n  more\n\n| a | b |\n\n```text\nx\n```\n",
                    encoding="utf-8")
    assert [(n, len(t.split())) for n, t in paragraphs(page)] == [(3, 151), (5, 3)]


@pytest.mark.parametrize("page", [*GUIDES, DOCS / "index.md", *sorted((DOCS / "reference").glob("*.md")),
                                  *sorted((DOCS / "development").glob("*.md"))], ids=lambda p: p.name)
def test_no_paragraph_runs_past_150_words(page: Path) -> None:
    long = [(number, len(text.split())) for number, text in paragraphs(page) if len(text.split()) > MAX_WORDS]
    if page.name in LONG_PARAGRAPHS_LEFT:
        assert long, f"{page.name} has no paragraph over {MAX_WORDS} words now: remove it from LONG_PARAGRAPHS_LEFT"
    else:
        assert long == [], f"{page.name}: paragraphs (line, words) over {MAX_WORDS} words: break them up"


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: p.name)
def test_every_guide_opens_with_a_small_example(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("```")), len(lines))
    heading = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("```")), len(lines))
    prose = [line for line in lines[1:start] if line.strip()]
    assert start < heading, f"{page.name}: show an example (a command and what it prints, or a job file) first"
    assert len(prose) <= EXAMPLE_AFTER, f"{page.name}: {len(prose)} lines of prose before the first example"
    assert end - start - 1 <= EXAMPLE_LINES, f"{page.name}: the first example has {end - start - 1} lines"


def _shown_commands(page: Path) -> list[tuple[int, list[str]]]:
    """(line, argv) of each `vtrain ...` command a page's code blocks show (`$ vtrain ...` or a bare line)."""
    found, fence = [], ""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if m := re.match(r"(`{3,})(\w*)", stripped):
            fence = "" if fence else (m.group(2) or "text")
            continue
        # a console shows commands after `$ ` (its other lines are output); a script's lines are commands
        command = stripped[2:] if stripped.startswith("$ ") else stripped if fence in ("bash", "sh", "shell") else ""
        if fence and command.startswith("vtrain "):
            command = re.split(r"\s(?:#|\||>|2>|&&|;)\s?", command + " ", maxsplit=1)[0]
            try:
                found.append((number, shlex.split(command)[1:]))
            except ValueError:  # an unclosed quote across lines: not one command
                continue
    return found


def test_the_commands_the_pages_show_use_options_that_exist() -> None:
    shown = [(page, number, argv) for page in [*GUIDES, DOCS / "index.md", *(DOCS / "reference").glob("*.md")]
             for number, argv in _shown_commands(page)]
    assert len(shown) >= 30
    wrong = []
    for page, number, argv in shown:
        command: click.Command | None = cli
        words = list(argv)
        while isinstance(command, click.Group) and words and not words[0].startswith("-"):
            command = command.get_command(click.Context(cli), words.pop(0))
        if command is None:
            wrong.append(f"{page.name}:{number}: vtrain {' '.join(argv)}: no such command")
            continue
        options = {name for param in command.params for name in (*param.opts, *param.secondary_opts)}
        options |= {"--help", "-h"}
        wrong += [f"{page.name}:{number}: vtrain {' '.join(argv)}: no option {word.split('=')[0]}"
                  for word in words if word.startswith("-") and len(word) > 1 and word.split("=")[0] not in options]
    assert wrong == []
