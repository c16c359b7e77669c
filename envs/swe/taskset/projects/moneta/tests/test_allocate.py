import pytest

from moneta import Money, allocate, get_currency, split_evenly

USD = get_currency("USD")


def cents(*values):
    return [Money(value, USD) for value in values]


def test_allocate_even_ratios_gives_leftover_to_first_parts():
    assert allocate(Money(100, USD), [1, 1, 1]) == cents(34, 33, 33)


def test_allocate_exact_split():
    assert allocate(Money(1000, USD), [7, 3]) == cents(700, 300)


def test_allocate_leftover_goes_to_largest_rounding_loss():
    # exact shares are 2.8 and 1.2 cents: the first part lost more when rounded down
    assert allocate(Money(4, USD), [7, 3]) == cents(3, 1)


def test_allocate_small_share_with_large_loss_gets_the_cent():
    # exact shares are 9.1667 and 1.8333 cents
    assert allocate(Money(11, USD), [5, 1]) == cents(9, 2)


def test_allocate_never_loses_a_cent():
    for total in range(0, 50):
        parts = allocate(Money(total, USD), [3, 5, 2, 7])
        assert sum(part.minor for part in parts) == total


def test_allocate_negative_amount():
    assert allocate(Money(-100, USD), [1, 1, 1]) == cents(-34, -33, -33)


def test_allocate_with_zero_ratio():
    assert allocate(Money(10, USD), [0, 1]) == cents(0, 10)


@pytest.mark.parametrize("ratios", [[], [0, 0], [1, -1]])
def test_allocate_rejects_bad_ratios(ratios):
    with pytest.raises(ValueError):
        allocate(Money(10, USD), ratios)


def test_split_evenly():
    assert split_evenly(Money.of("10", "USD"), 3) == cents(334, 333, 333)


def test_split_evenly_needs_a_positive_count():
    with pytest.raises(ValueError):
        split_evenly(Money(10, USD), 0)
