from decimal import Decimal

import pytest

from moneta import ROUND_HALF_UP, CurrencyMismatchError, Money, UnknownCurrencyError, get_currency


def test_of_converts_to_minor_units():
    assert Money.of("19.99", "USD").minor == 1999
    assert Money.of(5, "usd").minor == 500


def test_of_respects_currency_exponent():
    assert Money.of("1500", "JPY").minor == 1500
    assert Money.of("1.5", "KWD").minor == 1500


def test_of_rejects_floats():
    with pytest.raises(TypeError):
        Money.of(0.1, "USD")


def test_unknown_currency():
    with pytest.raises(UnknownCurrencyError):
        Money.of("1", "XYZ")


@pytest.mark.parametrize(
    "amount, minor", [("0.125", 12), ("0.135", 14), ("2.5", 250), ("-0.125", -12)]
)
def test_of_rounds_half_to_even_by_default(amount, minor):
    assert Money.of(amount, "USD").minor == minor


def test_of_with_explicit_rounding():
    assert Money.of("0.125", "USD", rounding=ROUND_HALF_UP).minor == 13


def test_amount_is_exact():
    assert Money(1999, get_currency("USD")).amount == Decimal("19.99")
    assert Money.of("7", "JPY").amount == Decimal("7")


def test_add_and_subtract():
    a, b = Money.of("10.50", "EUR"), Money.of("0.75", "EUR")
    assert (a + b).minor == 1125
    assert (a - b).minor == 975


def test_combining_different_currencies_raises():
    with pytest.raises(CurrencyMismatchError):
        Money.of("1", "USD") + Money.of("1", "EUR")
    with pytest.raises(CurrencyMismatchError):
        Money.of("1", "USD") - Money.of("1", "GBP")


def test_comparing_different_currencies_raises():
    with pytest.raises(CurrencyMismatchError):
        assert Money.of("1", "USD") < Money.of("2", "EUR")


def test_adding_a_number_raises():
    with pytest.raises(TypeError):
        Money.of("1", "USD") + 1


def test_negation_and_abs():
    money = Money.of("-3.10", "USD")
    assert (-money).minor == 310
    assert abs(money).minor == 310
    assert money.is_negative()


def test_multiply_rounds_half_to_even():
    assert (Money(5, get_currency("USD")) * Decimal("0.5")).minor == 2
    assert (Money(7, get_currency("USD")) * Decimal("0.5")).minor == 4
    assert (3 * Money.of("19.99", "USD")).minor == 5997


def test_multiply_rejects_floats():
    with pytest.raises(TypeError):
        Money.of("1", "USD") * 1.5


def test_percent():
    assert Money.of("200", "USD").percent("7.5").minor == 1500


def test_ordering():
    assert Money.of("1", "USD") < Money.of("1.01", "USD")
    assert Money.of("1", "USD") <= Money.of("1", "USD")


def test_zero():
    assert Money.zero("EUR").is_zero()


def test_str():
    assert str(Money.of("12.5", "EUR")) == "12.50 EUR"
