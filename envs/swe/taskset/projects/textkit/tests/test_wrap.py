import pytest

from textkit import fill, wrap


def test_wrap_simple():
    assert wrap("the quick brown fox", width=10) == ["the quick", "brown fox"]


def test_wrap_collapses_whitespace():
    assert wrap("  one \n two\tthree  ", width=80) == ["one two three"]


def test_line_that_fills_the_width_exactly_is_kept():
    assert wrap("abcd efghi jk", width=10) == ["abcd efghi", "jk"]


@pytest.mark.parametrize("width", [5, 8, 13, 21])
def test_lines_never_exceed_width(width):
    text = "Lorem ipsum dolor sit amet, consectetur adipiscing elit sed do"
    assert all(len(line) <= width for line in wrap(text, width=width))


def test_long_words_are_broken():
    assert wrap("a abcdefghijkl b", width=5) == ["a", "abcde", "fghij", "kl b"]


def test_long_words_kept_whole_when_asked():
    assert wrap("a abcdefghijkl b", width=5, break_long_words=False) == ["a", "abcdefghijkl", "b"]


def test_indent_counts_towards_width():
    assert wrap("aa bb cc dd", width=7, indent="> ") == ["> aa bb", "> cc dd"]


def test_indent_must_leave_room():
    with pytest.raises(ValueError):
        wrap("text", width=2, indent="  ")


def test_empty_text():
    assert wrap("   ", width=10) == []


def test_fill_keeps_paragraphs():
    text = "one two three\n\nfour five"
    assert fill(text, width=9) == "one two\nthree\n\nfour five"
