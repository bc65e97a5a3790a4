"""`make test` runs the suite in two parts: the parallel one, then the `alone` tests one at a time, collected only
from the files that say `pytest.mark.alone` (Makefile's ALONE_FILES, a grep). tests/conftest.py refuses an
`alone` test that grep would miss, so none is silently left out."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import REPO, _alone_where_make_finds_it


def _item(path: Path, *marks: str) -> Any:
    return SimpleNamespace(path=path, get_closest_marker=lambda name: object() if name in marks else None)


def test_an_alone_test_the_makefile_would_not_find_is_refused(tmp_path: Path) -> None:
    spelled = tmp_path / "test_spelled.py"
    spelled.write_text("import pytest\n\n\n@pytest.mark.alone\ndef test_a() -> None: ...\n")
    hidden = tmp_path / "test_hidden.py"
    hidden.write_text("import pytest\n\nALONE = getattr(pytest.mark, 'al' + 'one')\n")
    _alone_where_make_finds_it([_item(spelled, "alone"), _item(hidden, "slow")])  # hidden's test is not alone
    with pytest.raises(pytest.UsageError, match=r"test_hidden\.py: marked alone but not with `pytest\.mark\.alone`"):
        _alone_where_make_finds_it([_item(spelled, "alone"), _item(hidden, "alone")])


def test_the_makefile_greps_for_what_the_check_reads() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "ALONE_FILES = $(shell grep -rl --include='test_*.py' 'pytest.mark.alone' tests)" in makefile
    assert "-m alone $(ALONE_FILES)" in makefile
