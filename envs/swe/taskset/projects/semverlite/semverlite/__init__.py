"""Semantic versions: parsing, ordering, bumping and ranges."""

from semverlite.bump import bump
from semverlite.ranges import Comparator, Range
from semverlite.version import InvalidVersionError, Version, compare

__all__ = ["Comparator", "InvalidVersionError", "Range", "Version", "bump", "compare"]

__version__ = "1.1.0"
