"""Display amounts (``$1,234.56``) and read them back."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from moneta.currency import all_currencies, get_currency
from moneta.money import Money


def format_money(
    money: Money, *, symbol: bool = True, thousands: str = ",", decimal_point: str = "."
) -> str:
    """Format with grouped thousands and the currency's number of decimals.

    With ``symbol=True`` the symbol comes first (``$1,234.56``), otherwise the
    ISO code follows the number (``1,234.56 USD``). Negative amounts start with
    a minus sign.
    """
    exponent = money.currency.exponent
    digits = str(abs(money.minor)).rjust(exponent + 1, "0")
    whole = digits[: len(digits) - exponent]
    fraction = digits[len(digits) - exponent :]
    groups: list[str] = []
    while len(whole) > 3:
        groups.insert(0, whole[-3:])
        whole = whole[:-3]
    groups.insert(0, whole)
    number = thousands.join(groups)
    if fraction:
        number += decimal_point + fraction
    text = f"{money.currency.symbol}{number}" if symbol else f"{number} {money.currency.code}"
    return f"-{text}" if money.is_negative() else text


_CODE_SUFFIX = re.compile(r"\s+(?P<code>[A-Za-z]{3})$")


def parse_money(text: str, code: str | None = None, *, thousands: str = ",") -> Money:
    """Read an amount written by `format_money`, or an ISO code after the number.

    Accounting style ``(12.50)`` means a negative amount. ``code`` is needed
    only when the text names no currency.
    """
    text = text.strip()
    suffix = _CODE_SUFFIX.search(text)
    if suffix is not None:
        code = suffix.group("code")
        text = text[: suffix.start()].strip()
    negative = text.startswith("-") or (text.startswith("(") and text.endswith(")"))
    text = text.strip("-()").strip()
    for currency in all_currencies():
        if currency.symbol.strip() and text.startswith(currency.symbol.strip()):
            code = code or currency.code
            text = text[len(currency.symbol.strip()) :].strip()
            break
    if code is None:
        raise ValueError(f"no currency in {text!r}; pass code=")
    try:
        amount = Decimal(text.replace(thousands, ""))
    except InvalidOperation:
        raise ValueError(f"not an amount: {text!r}") from None
    money = Money.of(amount, get_currency(code).code)
    return -money if negative else money
