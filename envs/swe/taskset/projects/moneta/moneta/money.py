"""The `Money` value type."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

from moneta.currency import Currency, get_currency

__all__ = ["ROUND_HALF_EVEN", "ROUND_HALF_UP", "CurrencyMismatchError", "Money"]


class CurrencyMismatchError(ValueError):
    """Two amounts in different currencies were combined."""


@dataclass(frozen=True)
class Money:
    """An exact amount: an integer number of minor units of one currency.

    Arithmetic between amounts requires the same currency. Multiplying by a
    factor rounds to whole minor units, half to even by default ("banker's
    rounding"), so repeated operations do not drift upwards.
    """

    minor: int
    currency: Currency

    @classmethod
    def of(cls, amount: str | int | Decimal, code: str, rounding: str = ROUND_HALF_EVEN) -> Money:
        """Build an amount from a number of major units: ``Money.of("9.99", "USD")``."""
        if isinstance(amount, float):
            raise TypeError("pass amounts as str, int or Decimal; floats are not exact")
        currency = get_currency(code)
        value = Decimal(amount)
        quantum = Decimal(1).scaleb(-currency.exponent)
        minor = int(value.quantize(quantum, rounding=rounding) * currency.minor_per_major)
        return cls(minor, currency)

    @classmethod
    def zero(cls, code: str) -> Money:
        return cls(0, get_currency(code))

    @property
    def amount(self) -> Decimal:
        """The amount in major units, exact."""
        return Decimal(self.minor).scaleb(-self.currency.exponent)

    def _check_compatible(self, other: object) -> Money:
        if not isinstance(other, Money):
            raise TypeError(f"cannot combine Money with {type(other).__name__}")
        if other.currency != self.currency:
            raise CurrencyMismatchError(
                f"cannot combine {self.currency.code} with {other.currency.code}"
            )
        return other

    def __add__(self, other: object) -> Money:
        other = self._check_compatible(other)
        return Money(self.minor + other.minor, self.currency)

    def __sub__(self, other: object) -> Money:
        other = self._check_compatible(other)
        return Money(self.minor - other.minor, self.currency)

    def __neg__(self) -> Money:
        return Money(-self.minor, self.currency)

    def __abs__(self) -> Money:
        return Money(abs(self.minor), self.currency)

    def multiply(self, factor: int | Decimal, rounding: str = ROUND_HALF_EVEN) -> Money:
        """Multiply by an exact factor and round to whole minor units."""
        if isinstance(factor, float):
            raise TypeError("pass factors as int or Decimal; floats are not exact")
        product = Decimal(self.minor) * Decimal(factor)
        return Money(int(product.quantize(Decimal(1), rounding=rounding)), self.currency)

    def __mul__(self, factor: int | Decimal) -> Money:
        return self.multiply(factor)

    __rmul__ = __mul__

    def percent(self, rate: int | str | Decimal) -> Money:
        """``rate`` percent of this amount, e.g. ``price.percent("7.5")``."""
        return self.multiply(Decimal(rate) / 100)

    def __lt__(self, other: object) -> bool:
        return self.minor < self._check_compatible(other).minor

    def __le__(self, other: object) -> bool:
        return self.minor <= self._check_compatible(other).minor

    def is_zero(self) -> bool:
        return self.minor == 0

    def is_negative(self) -> bool:
        return self.minor < 0

    def __str__(self) -> str:
        return f"{self.amount} {self.currency.code}"
