import pytest

from textkit import slugify


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello, World!", "hello-world"),
        ("  spaces   everywhere  ", "spaces-everywhere"),
        ("Crème Brûlée: A Recipe", "creme-brulee-a-recipe"),
        ("already-a-slug", "already-a-slug"),
        ("--dashes--", "dashes"),
        ("日本語", ""),
    ],
)
def test_slugify(text, expected):
    assert slugify(text) == expected


def test_custom_separator():
    assert slugify("Hello World", separator="_") == "hello_world"


def test_keep_case():
    assert slugify("Hello World", lowercase=False) == "Hello-World"


def test_max_length_cuts_at_a_separator():
    assert slugify("hello wonderful world", max_length=16) == "hello-wonderful"


@pytest.mark.parametrize("max_length", [2, 4, 7, 10])
def test_max_length_is_never_exceeded(max_length):
    slug = slugify("ab cd ef gh ij", max_length=max_length)
    assert len(slug) <= max_length
    assert not slug.endswith("-")


def test_max_length_exactly_at_word_end():
    assert slugify("ab cd ef", max_length=5) == "ab-cd"


def test_long_single_word_is_cut_hard():
    assert slugify("supercalifragilistic", max_length=5) == "super"


def test_short_slug_is_not_cut():
    assert slugify("ab cd", max_length=50) == "ab-cd"
