"""vtrain.foreign.data, the one reader of what others wrote: regular files, a size cap, a depth cap
(100,000-deep JSON is no RecursionError), numbers finite and of their type, one line naming the source."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from vtrain.foreign.data import Doc, Unreadable, parse_json, read_json

DEEP = "[" * 100_000 + "]" * 100_000
SECRET = "s3cr3t-line-from-the-file"


# ---- the reader --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("data", "said"), [
    (DEEP, "JSON nested deeper than 100 levels"),
    ("[" * 101 + "]" * 101, "JSON nested deeper than 100 levels"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8 text (a binary file?): byte 0 cannot be decoded"),
    ('{"a": ' + SECRET, "not JSON at line 1 column 7"),
    ("   ", "empty"),
])  # fmt: skip
def test_the_reader_says_what_is_wrong_in_one_line(data: str | bytes, said: str) -> None:
    with pytest.raises(Unreadable) as caught:
        parse_json(data, "x.json")
    assert str(caught.value) == f"x.json: unreadable: {said}"


def test_the_reader_reads_regular_files_only_within_the_cap(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(Unreadable, match=r"fifo.json: unreadable: it is a FIFO \(named pipe\), not a regular file"):
        read_json(fifo)
    with pytest.raises(Unreadable, match="it is a character device"):
        read_json("/dev/zero")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2049)
    with pytest.raises(Unreadable, match="it is larger than 2,048 bytes"):
        read_json(big, max_bytes=2048)
    with pytest.raises(Unreadable, match="missing.json: unreadable: No such file or directory"):
        read_json(tmp_path / "missing.json")


@pytest.mark.parametrize(("value", "said"), [
    (math.inf, "n is inf"), (math.nan, "n is NaN"), (True, "n is a boolean (true)"), (-1, "n is -1"),
    ("7", "n is a string"), (10**400, "n is a 401-digit number"),
])  # fmt: skip
def test_a_number_is_finite_of_its_type_and_in_range(value: Any, said: str) -> None:
    with pytest.raises(Unreadable) as caught:
        Doc({"n": value}, "f").integer("n")
    assert str(caught.value).startswith(f"f: unreadable: {said}; allowed: a whole number ≥ 0")
    with pytest.raises(Unreadable):
        Doc({"n": value}, "f").number("n")


