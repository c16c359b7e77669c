import pytest

import inikit
from inikit import InterpolationError, MissingOptionError

TEXT = """\
[DEFAULT]
timeout = 30
retries = 3
verbose = on

[server]
host = example.internal
ports = 80, 443,
    8080
url = http://${host}:${server:ratio}
ratio = 0.75
retries = 5

[client]
server = ${server:host}
"""


@pytest.fixture
def config():
    return inikit.loads(TEXT)


def test_defaults_are_inherited(config):
    assert config.getint("client", "timeout") == 30


def test_section_value_wins_over_default(config):
    assert config.getint("server", "retries") == 5
    assert config.getint("client", "retries") == 3


def test_options_include_defaults(config):
    assert config.options("client") == {
        "server": "${server:host}",
        "timeout": "30",
        "retries": "3",
        "verbose": "on",
    }


def test_has_option(config):
    assert config.has_option("client", "timeout")
    assert not config.has_option("client", "timeout", inherit=False)
    assert not config.has_option("nowhere", "timeout")


def test_missing_option_raises(config):
    with pytest.raises(MissingOptionError):
        config.get("server", "user")


def test_missing_section_raises(config):
    with pytest.raises(MissingOptionError):
        config.get("database", "host")


def test_default_for_missing_option(config):
    assert config.get("server", "user", "nobody") == "nobody"
    assert config.getint("server", "workers", 2) == 2


def test_getfloat(config):
    assert config.getfloat("server", "ratio") == 0.75


@pytest.mark.parametrize(
    "text, expected", [("on", True), ("Yes", True), ("0", False), ("off", False)]
)
def test_getbool(text, expected):
    config = inikit.loads(f"[a]\nflag = {text}\n")
    assert config.getbool("a", "flag") is expected


def test_getbool_rejects_other_words():
    config = inikit.loads("[a]\nflag = maybe\n")
    with pytest.raises(ValueError):
        config.getbool("a", "flag")


def test_getlist_splits_on_commas_and_lines(config):
    assert config.getlist("server", "ports") == ["80", "443", "8080"]


def test_reference_in_same_and_other_section(config):
    assert config.get("server", "url") == "http://example.internal:0.75"
    assert config.get("client", "server") == "example.internal"


def test_raw_get_keeps_references(config):
    assert config.get("client", "server", raw=True) == "${server:host}"


def test_unknown_reference_raises():
    config = inikit.loads("[a]\nx = ${nope}\n")
    with pytest.raises(InterpolationError):
        config.get("a", "x")


def _chain(levels):
    lines = ["[chain]"]
    lines += [f"v{index} = ${{v{index + 1}}}" for index in range(1, levels)]
    lines.append(f"v{levels} = end")
    return inikit.loads("\n".join(lines) + "\n")


def test_ten_levels_of_references_resolve():
    assert _chain(11).get("chain", "v1") == "end"


def test_too_deep_references_raise():
    with pytest.raises(InterpolationError):
        _chain(12).get("chain", "v1")


def test_reference_cycle_raises():
    config = inikit.loads("[a]\nx = ${y}\ny = ${x}\n")
    with pytest.raises(InterpolationError):
        config.get("a", "x")
