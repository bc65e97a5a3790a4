"""The architecture page's feature map names modules that exist: a rename or a move that forgets the page fails
here, not in a reader's search."""

from __future__ import annotations

import re

from tests.conftest import REPO

PAGE = REPO / "docs" / "development" / "architecture.md"


def _feature_map() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text.split("## Where each feature lives", 1)[1].split("\n\n", 2)[1]


def test_every_path_the_feature_map_names_exists() -> None:
    rows = _feature_map()
    named = set(re.findall(r"`([a-z_]+/(?:[a-z_]+/?)?)`", rows))
    assert len(named) > 20
    missing = sorted(n for n in named
                     if not (REPO / "vtrain" / n).is_dir() and not (REPO / "vtrain" / f"{n}.py").is_file())
    assert missing == []


def test_the_modules_listed_under_a_folder_exist() -> None:
    missing, checked = [], 0
    for folder, inside in re.findall(r"`([a-z_]+(?:/[a-z_]+)?)/` \(([^|]*?)\)(?= *[,|]| *$)", _feature_map(), re.M):
        for name in re.findall(r"`([a-z_]+)`", inside):
            checked += 1
            if not any((REPO / "vtrain" / folder / n).exists() for n in (f"{name}.py", name)):
                missing.append(f"{folder}/{name}")
    assert checked > 60 and missing == []
