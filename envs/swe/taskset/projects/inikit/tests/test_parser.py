import io

import pytest

import inikit
from inikit import ParseError

SAMPLE = """\
# service configuration
[DEFAULT]
timeout = 30
debug = no

[server]
host = example.internal   # primary host
port: 8080
Name = Web Frontend

; a disabled section
[worker]
threads = 4
"""


def test_sections_in_file_order():
    config = inikit.loads(SAMPLE)
    assert config.sections() == ["server", "worker"]


def test_both_separators():
    config = inikit.loads(SAMPLE)
    assert config.get("server", "port") == "8080"
    assert config.get("server", "host") == "example.internal"


def test_keys_are_case_insensitive():
    config = inikit.loads(SAMPLE)
    assert config.get("server", "name") == "Web Frontend"
    assert config.get("server", "NAME") == "Web Frontend"


def test_inline_comment_needs_whitespace_before_hash():
    config = inikit.loads("[a]\ncolor = #ff0000\nurl = http://x/#top # home\n")
    assert config.get("a", "color") == "#ff0000"
    assert config.get("a", "url") == "http://x/#top"


def test_quoted_value_keeps_spaces_and_hash():
    config = inikit.loads("[a]\nprompt = \"  > # \"   # shell prompt\nname = 'x'\n")
    assert config.get("a", "prompt") == "  > # "
    assert config.get("a", "name") == "x"


def test_continuation_lines_join_with_newlines():
    config = inikit.loads("[a]\nhosts = one\n    two\n\tthree\nnext = 1\n")
    assert config.get("a", "hosts") == "one\ntwo\nthree"
    assert config.get("a", "next") == "1"


def test_indented_option_after_header_is_an_option():
    config = inikit.loads("[a]\n    key = value\nother = 2\n")
    assert config.get("a", "key") == "value"
    assert config.get("a", "other") == "2"


def test_empty_value():
    config = inikit.loads("[a]\nkey =\n")
    assert config.get("a", "key") == ""


def test_option_outside_section_is_an_error():
    with pytest.raises(ParseError) as info:
        inikit.loads("key = value\n")
    assert info.value.lineno == 1


def test_garbage_line_reports_its_line_number():
    with pytest.raises(ParseError) as info:
        inikit.loads("[a]\nkey = 1\n\nthis is not an option\n")
    assert info.value.lineno == 4
    assert "line 4" in str(info.value)


def test_duplicate_option_is_an_error():
    with pytest.raises(ParseError) as info:
        inikit.loads("[a]\nkey = 1\nKEY = 2\n")
    assert info.value.lineno == 3


def test_duplicates_allowed_last_one_wins():
    config = inikit.loads("[a]\nkey = 1\nkey = 2\n", allow_duplicates=True)
    assert config.get("a", "key") == "2"


def test_section_may_override_a_default():
    config = inikit.loads("[DEFAULT]\ntimeout = 30\n\n[fast]\ntimeout = 5\n")
    assert config.get("fast", "timeout") == "5"


def test_repeated_section_header_merges():
    config = inikit.loads("[a]\nx = 1\n[b]\ny = 2\n[a]\nz = 3\n")
    assert config.sections() == ["a", "b"]
    assert config.options("a") == {"x": "1", "z": "3"}


def test_load_reads_a_stream():
    config = inikit.load(io.StringIO("[a]\nx = 1\n"))
    assert config.get("a", "x") == "1"
