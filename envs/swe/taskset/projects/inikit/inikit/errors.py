"""Exceptions raised by inikit."""


class IniError(Exception):
    """Base class for all inikit errors."""


class ParseError(IniError):
    """The text is not valid INI. ``lineno`` is the 1-based line of the problem."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


class MissingOptionError(IniError, KeyError):
    """The requested section or option does not exist."""

    def __str__(self) -> str:
        return str(self.args[0])


class InterpolationError(IniError):
    """A ``${...}`` reference cannot be resolved."""
