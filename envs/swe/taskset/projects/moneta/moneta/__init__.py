"""Exact money arithmetic in integer minor units."""

from moneta.allocate import allocate, split_evenly
from moneta.currency import Currency, UnknownCurrencyError, get_currency
from moneta.format import format_money, parse_money
from moneta.money import ROUND_HALF_EVEN, ROUND_HALF_UP, CurrencyMismatchError, Money

__all__ = [
    "ROUND_HALF_EVEN",
    "ROUND_HALF_UP",
    "Currency",
    "CurrencyMismatchError",
    "Money",
    "UnknownCurrencyError",
    "allocate",
    "format_money",
    "get_currency",
    "parse_money",
    "split_evenly",
]

__version__ = "2.0.3"
