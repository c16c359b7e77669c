from spans import Interval, IntervalSet, merge


def test_merge_overlapping():
    assert merge([Interval(4, 8), Interval(0, 5)]) == [Interval(0, 8)]


def test_merge_keeps_separate_intervals_apart():
    assert merge([Interval(5, 6), Interval(0, 1)]) == [Interval(0, 1), Interval(5, 6)]


def test_touching_intervals_merge():
    assert merge([Interval(0, 3), Interval(3, 5)]) == [Interval(0, 5)]


def test_merge_nested():
    assert merge([Interval(0, 10), Interval(2, 3)]) == [Interval(0, 10)]


def test_add_fills_a_gap():
    busy = IntervalSet([Interval(9, 12), Interval(13, 17)])
    busy.add(Interval(12, 13))
    assert list(busy) == [Interval(9, 17)]
    assert str(busy) == "{[9, 17)}"


def test_remove_from_middle_splits_a_piece():
    numbers = IntervalSet([Interval(0, 10)])
    numbers.remove(Interval(4, 6))
    assert list(numbers) == [Interval(0, 4), Interval(6, 10)]


def test_remove_everything_empties_the_set():
    numbers = IntervalSet([Interval(0, 1), Interval(2, 3)])
    numbers.remove(Interval(-1, 5))
    assert not numbers
    assert len(numbers) == 0


def test_membership():
    numbers = IntervalSet([Interval(0, 2), Interval(5, 7)])
    assert 0 in numbers
    assert 1.5 in numbers
    assert 6 in numbers
    assert 2 not in numbers
    assert 7 not in numbers
    assert -1 not in numbers


def test_membership_in_empty_set():
    assert 1 not in IntervalSet()


def test_total_length():
    assert IntervalSet([Interval(0, 2), Interval(1, 3), Interval(10, 11)]).total_length() == 4


def test_span():
    assert IntervalSet([Interval(5, 6), Interval(1, 2)]).span() == Interval(1, 6)
    assert IntervalSet().span() is None


def test_gaps_between_pieces():
    busy = IntervalSet([Interval(9, 12), Interval(13, 17)])
    assert busy.gaps() == [Interval(12, 13)]


def test_gaps_within_bounds():
    busy = IntervalSet([Interval(9, 12), Interval(13, 17)])
    assert busy.gaps(Interval(8, 18)) == [Interval(8, 9), Interval(12, 13), Interval(17, 18)]


def test_union_and_intersection():
    first = IntervalSet([Interval(0, 4)])
    second = IntervalSet([Interval(2, 6), Interval(8, 9)])
    assert list(first.union(second)) == [Interval(0, 6), Interval(8, 9)]
    assert list(first.intersection(second)) == [Interval(2, 4)]


def test_equality():
    assert IntervalSet([Interval(0, 1), Interval(1, 2)]) == IntervalSet([Interval(0, 2)])
