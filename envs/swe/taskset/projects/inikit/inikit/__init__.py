"""A small INI-style configuration reader and writer."""

from inikit.config import Config, Section
from inikit.errors import InterpolationError, MissingOptionError, ParseError
from inikit.parser import load, loads
from inikit.writer import dumps

__all__ = [
    "Config",
    "InterpolationError",
    "MissingOptionError",
    "ParseError",
    "Section",
    "dumps",
    "load",
    "loads",
]

__version__ = "0.4.1"
