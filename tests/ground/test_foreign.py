"""vtrain.foreign.printable: foreign text cannot drive the terminal or erase vtrain's prefixes."""

from __future__ import annotations

import pytest

from vtrain.foreign import printable, printable_lines

HOSTILE = [
    "\x1b]0;pwned\x07",  # OSC: retitle the window
    "\x1b[2J\x1b[H",  # CSI: clear the screen
    "abc\rdef",  # carriage return over a prefix
    "\x9b31m",  # C1 CSI
    "a\u202eb",  # bidi override
    "x\x00y\x7fz",
    "tab\there",
    "\u2028sep",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_no_control_character_survives(text: str) -> None:
    out = printable(text)
    assert out.isprintable(), repr(out)
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out


def test_plain_text_is_unchanged_and_non_ascii_letters_stay() -> None:
    assert printable("epoch 1/3 - loss: 0.25") == "epoch 1/3 - loss: 0.25"
    assert printable("Größe µs 日本") == "Größe µs 日本"


def test_the_escapes_are_readable() -> None:
    assert printable("\x1b[2J") == "\\x1b[2J"
    assert printable("a\rb") == "a\\rb"
    assert printable("a\u202eb") == "a\\u202eb"
    assert printable(b"\xff\xfeok") == "\\xff\\xfeok"
    assert printable("bad\udcffname") == "bad\\xffname"  # a surrogate-escaped byte of a file name


def test_a_forged_prefix_cannot_erase_the_real_one() -> None:
    line = "[chief-0] " + printable("junk\r[vtrain] progress 100%")
    assert line.startswith("[chief-0] junk\\r[vtrain]")


def test_long_lines_are_cut_with_a_count() -> None:
    out = printable("x" * 50, limit=10)
    assert out == "xxxxxxxxxx… (40 more characters)"


def test_lines_split_at_newlines_only() -> None:
    assert printable_lines("a\r\nb\nc\rd\n") == ["a", "b", "c\\rd"]
    assert printable_lines(b"one\n\x1b[1mtwo") == ["one", "\\x1b[1mtwo"]


def test_any_lone_surrogate_is_shown_not_raised() -> None:
    assert printable("a\ud800b") == "a\\ud800b"  # not an escaped byte: shown as the code point
    assert printable("a\udc80b\udcff") == "a\\x80b\\xff"  # escaped bytes of a file name


def test_a_huge_hostile_line_is_cut_before_it_is_escaped() -> None:
    out = printable("\x1b" * 10_000_000, limit=12)  # escaping 10 M characters would take seconds
    assert out == "\\x1b\\x1b\\x1b… (9,999,997 more characters)"
    assert printable("ab\x1b", limit=3) == "ab… (1 more characters)"  # the escape would pass the limit
