import pytest

from spans import EmptyIntervalError, Interval


def test_length_and_midpoint():
    interval = Interval(2, 10)
    assert interval.length == 8
    assert interval.midpoint == 6


def test_from_length():
    assert Interval.from_length(3, 4) == Interval(3, 7)


@pytest.mark.parametrize("start, end", [(5, 5), (5, 3), (0.5, -0.5)])
def test_empty_or_reversed_interval_is_rejected(start, end):
    with pytest.raises(EmptyIntervalError):
        Interval(start, end)


def test_start_is_included_and_end_is_excluded():
    interval = Interval(1, 4)
    assert interval.contains(1)
    assert interval.contains(3.999)
    assert not interval.contains(4)
    assert not interval.contains(0.5)


def test_in_operator_ignores_non_numbers():
    assert 2 in Interval(1, 4)
    assert "2" not in Interval(1, 4)


def test_covers():
    assert Interval(0, 10).covers(Interval(2, 10))
    assert not Interval(0, 10).covers(Interval(5, 11))


@pytest.mark.parametrize(
    "first, second, expected",
    [
        (Interval(0, 5), Interval(3, 8), True),
        (Interval(3, 8), Interval(0, 5), True),
        (Interval(0, 10), Interval(2, 3), True),
        (Interval(0, 5), Interval(6, 8), False),
    ],
)
def test_overlaps(first, second, expected):
    assert first.overlaps(second) is expected


@pytest.mark.parametrize(
    "first, second",
    [(Interval(0, 5), Interval(5, 10)), (Interval(5, 10), Interval(0, 5))],
)
def test_touching_intervals_do_not_overlap(first, second):
    assert not first.overlaps(second)
    assert first.touches(second)


def test_intersection():
    assert Interval(0, 5).intersection(Interval(3, 8)) == Interval(3, 5)
    assert Interval(0, 5).intersection(Interval(5, 8)) is None


def test_hull_covers_both():
    assert Interval(0, 2).hull(Interval(5, 6)) == Interval(0, 6)


def test_shift():
    assert Interval(1, 3).shift(-1) == Interval(0, 2)


def test_scale_around_midpoint_keeps_the_midpoint():
    scaled = Interval(2, 6).scale(2)
    assert scaled == Interval(0, 8)
    assert scaled.midpoint == Interval(2, 6).midpoint


def test_scale_around_anchor():
    assert Interval(2, 6).scale(0.5, anchor=2) == Interval(2, 4)


def test_scale_rejects_non_positive_factor():
    with pytest.raises(ValueError):
        Interval(0, 1).scale(0)


def test_split_inside():
    assert Interval(0, 10).split(4) == (Interval(0, 4), Interval(4, 10))


@pytest.mark.parametrize("point", [0, 10, 12])
def test_split_point_must_be_strictly_inside(point):
    with pytest.raises(ValueError):
        Interval(0, 10).split(point)


def test_subtract_disjoint_keeps_interval():
    assert Interval(0, 5).subtract(Interval(7, 9)) == [Interval(0, 5)]


def test_subtract_middle_leaves_two_pieces():
    assert Interval(0, 10).subtract(Interval(3, 4)) == [Interval(0, 3), Interval(4, 10)]


def test_subtract_left_part():
    assert Interval(0, 10).subtract(Interval(-5, 4)) == [Interval(4, 10)]


def test_subtract_everything():
    assert Interval(2, 3).subtract(Interval(0, 10)) == []


def test_str_uses_half_open_notation():
    assert str(Interval(1.0, 2.5)) == "[1, 2.5)"


def test_intervals_sort_by_start_then_end():
    assert sorted([Interval(2, 3), Interval(1, 5), Interval(1, 2)]) == [
        Interval(1, 2),
        Interval(1, 5),
        Interval(2, 3),
    ]
