import pytest

from textkit import truncate, truncate_middle


def test_text_that_fits_is_unchanged():
    assert truncate("short", 10) == "short"


def test_text_exactly_at_the_limit_is_unchanged():
    assert truncate("exactly ten", 11) == "exactly ten"


def test_truncate_at_word_boundary():
    assert truncate("Hello wonderful world", 15) == "Hello…"


def test_truncate_when_cut_falls_on_a_space():
    assert truncate("Hello wonderful world", 16) == "Hello wonderful…"


def test_truncate_without_word_boundary():
    assert truncate("Hello wonderful world", 10, word_boundary=False) == "Hello won…"


@pytest.mark.parametrize("limit", [3, 8, 12, 17, 24])
def test_result_never_exceeds_limit(limit):
    text = "The quick brown fox jumps over the lazy dog"
    assert len(truncate(text, limit, ellipsis="...")) <= limit


def test_trailing_punctuation_is_dropped_before_ellipsis():
    assert truncate("Wait, what happened here", 10) == "Wait…"


def test_custom_ellipsis():
    assert truncate("abcdefghij", 6, ellipsis="..", word_boundary=False) == "abcd.."


def test_limit_shorter_than_ellipsis():
    with pytest.raises(ValueError):
        truncate("abc", 2, ellipsis="...")


def test_truncate_middle_keeps_both_ends():
    assert truncate_middle("/usr/local/lib/python3/site.py", 16) == "/usr/loc…site.py"


def test_truncate_middle_short_text_unchanged():
    assert truncate_middle("abc", 5) == "abc"


def test_truncate_middle_odd_room_favours_the_start():
    assert truncate_middle("abcdefghij", 6) == "abc…ij"
