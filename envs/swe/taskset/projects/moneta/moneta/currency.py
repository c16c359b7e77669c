"""Currencies: ISO code, number of minor-unit digits and display symbol."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Currency:
    code: str
    exponent: int
    symbol: str

    @property
    def minor_per_major(self) -> int:
        """How many minor units make one major unit (100 cents per dollar)."""
        return 10**self.exponent


class UnknownCurrencyError(KeyError):
    """The currency code is not known."""

    def __str__(self) -> str:
        return str(self.args[0])


_CURRENCIES = MappingProxyType(
    {
        currency.code: currency
        for currency in (
            Currency("USD", 2, "$"),
            Currency("EUR", 2, "€"),
            Currency("GBP", 2, "£"),
            Currency("CHF", 2, "CHF "),
            Currency("JPY", 0, "¥"),
            Currency("KWD", 3, "KD "),
        )
    }
)


def get_currency(code: str) -> Currency:
    """Look up a currency by its ISO code (case-insensitive)."""
    try:
        return _CURRENCIES[code.strip().upper()]
    except KeyError:
        raise UnknownCurrencyError(f"unknown currency code {code!r}") from None


def all_currencies() -> list[Currency]:
    return list(_CURRENCIES.values())
