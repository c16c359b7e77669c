import pytest

from moneta import Money, format_money, get_currency, parse_money


@pytest.mark.parametrize(
    "minor, code, expected",
    [
        (123456, "USD", "$1,234.56"),
        (100, "USD", "$1.00"),
        (5, "USD", "$0.05"),
        (0, "USD", "$0.00"),
        (12345, "USD", "$123.45"),
        (123456789, "EUR", "€1,234,567.89"),
        (1500, "JPY", "¥1,500"),
        (999, "JPY", "¥999"),
        (1234, "KWD", "KD 1.234"),
    ],
)
def test_format_with_symbol(minor, code, expected):
    assert format_money(Money(minor, get_currency(code))) == expected


def test_format_with_code():
    assert format_money(Money.of("1234.5", "CHF"), symbol=False) == "1,234.50 CHF"


def test_format_negative():
    assert format_money(Money.of("-42", "GBP")) == "-£42.00"


def test_format_custom_separators():
    money = Money.of("1234567.8", "EUR")
    assert format_money(money, thousands=".", decimal_point=",") == "€1.234.567,80"


@pytest.mark.parametrize(
    "text, minor, code",
    [
        ("$1,234.56", 123456, "USD"),
        ("1,234.56 EUR", 123456, "EUR"),
        ("-£0.99", -99, "GBP"),
        ("(12.50) USD", -1250, "USD"),
        ("($3.00)", -300, "USD"),
        ("¥2,000", 2000, "JPY"),
    ],
)
def test_parse(text, minor, code):
    money = parse_money(text)
    assert money.minor == minor
    assert money.currency.code == code


def test_parse_needs_a_currency():
    with pytest.raises(ValueError):
        parse_money("12.00")
    assert parse_money("12.00", "USD").minor == 1200


def test_parse_rejects_garbage():
    with pytest.raises(ValueError):
        parse_money("$12.3.4")


@pytest.mark.parametrize("minor", [0, 7, 123456, -98765])
def test_round_trip(minor):
    money = Money(minor, get_currency("USD"))
    assert parse_money(format_money(money)) == money
