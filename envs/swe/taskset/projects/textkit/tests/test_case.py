import pytest

from textkit import camel_case, snake_case, title_case


@pytest.mark.parametrize(
    "text, expected",
    [
        ("the lord of the rings", "The Lord of the Rings"),
        ("a tale of two cities", "A Tale of Two Cities"),
        ("something to look forward to", "Something to Look Forward To"),
        ("NASA and the moon", "NASA and the Moon"),
        ("hello", "Hello"),
        ("", ""),
    ],
)
def test_title_case(text, expected):
    assert title_case(text) == expected


def test_title_case_lowercases_shouting_words_of_one_letter():
    assert title_case("I am HERE") == "I Am HERE"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("HTTPServerError", "http_server_error"),
        ("someVariableName", "some_variable_name"),
        ("Some text!", "some_text"),
        ("already_snake", "already_snake"),
        ("  many   spaces ", "many_spaces"),
        ("version2Update", "version2_update"),
    ],
)
def test_snake_case(text, expected):
    assert snake_case(text) == expected


def test_camel_case():
    assert camel_case("http server error") == "httpServerError"
    assert camel_case("http_server_error", upper_first=True) == "HttpServerError"


def test_camel_case_of_nothing():
    assert camel_case(" _ ") == ""
