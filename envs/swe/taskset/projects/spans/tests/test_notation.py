import pytest

from spans import Interval, format_interval, parse_interval, parse_intervals


def test_parse_integers_stay_integers():
    interval = parse_interval("[1, 5)")
    assert interval == Interval(1, 5)
    assert isinstance(interval.start, int)


def test_parse_floats_and_exponents():
    assert parse_interval(" [ -1.5 , 2e3 ) ") == Interval(-1.5, 2000.0)


def test_parse_whole_float_stays_float():
    assert isinstance(parse_interval("[1.0, 2)").start, float)


@pytest.mark.parametrize("text", ["(1, 2)", "[1, 2]", "[a, b)", "1, 2", ""])
def test_parse_rejects_other_notations(text):
    with pytest.raises(ValueError):
        parse_interval(text)


def test_parse_several():
    assert parse_intervals("[0, 1) U [2, 3); [4, 5)") == [
        Interval(0, 1),
        Interval(2, 3),
        Interval(4, 5),
    ]


def test_parse_several_empty_text():
    assert parse_intervals("   ") == []


def test_format_default_is_str():
    assert format_interval(Interval(1, 2.5)) == "[1, 2.5)"


def test_format_with_precision():
    assert format_interval(Interval(1, 2.5), precision=2) == "[1.00, 2.50)"


def test_round_trip():
    interval = Interval(-3, 7.25)
    assert parse_interval(format_interval(interval)) == interval
