"""Small text helpers: slugs, wrapping, truncation and case conversion."""

from textkit.case import camel_case, snake_case, title_case
from textkit.slug import slugify
from textkit.truncate import truncate, truncate_middle
from textkit.wrap import fill, wrap

__all__ = [
    "camel_case",
    "fill",
    "slugify",
    "snake_case",
    "title_case",
    "truncate",
    "truncate_middle",
    "wrap",
]

__version__ = "0.9.0"
