import pytest

from semverlite import InvalidVersionError, Range, Version


def matches(range_text, version_text, **options):
    return Range.parse(range_text).contains(Version.parse(version_text), **options)


@pytest.mark.parametrize(
    "range_text, inside, outside",
    [
        ("1.2.3", ["1.2.3"], ["1.2.4", "1.2.2"]),
        ("=1.2.3", ["1.2.3"], ["1.2.4"]),
        (">1.2.3", ["1.2.4", "2.0.0"], ["1.2.3"]),
        (">=1.2.3", ["1.2.3", "1.3.0"], ["1.2.2"]),
        ("<1.2.3", ["1.2.2", "0.1.0"], ["1.2.3"]),
        ("<=1.2.3", ["1.2.3", "1.0.0"], ["1.2.4"]),
        (">=1.0.0 <2.0.0", ["1.0.0", "1.9.9"], ["2.0.0", "0.9.9"]),
        (">= 1.0.0", ["1.0.0"], ["0.1.0"]),
        ("*", ["0.0.1", "9.9.9"], []),
        ("", ["1.2.3"], []),
    ],
)
def test_comparators(range_text, inside, outside):
    for version in inside:
        assert matches(range_text, version), version
    for version in outside:
        assert not matches(range_text, version), version


@pytest.mark.parametrize(
    "range_text, inside, outside",
    [
        ("^1.2.3", ["1.2.3", "1.9.0"], ["2.0.0", "1.2.2"]),
        ("^0.2.3", ["0.2.3", "0.2.9"], ["0.3.0", "1.0.0"]),
        ("^0.0.3", ["0.0.3"], ["0.0.4", "0.1.0"]),
        ("^1.2", ["1.2.0", "1.8.1"], ["2.0.0"]),
        ("^0.x", ["0.0.1", "0.9.9"], ["1.0.0"]),
    ],
)
def test_caret(range_text, inside, outside):
    for version in inside:
        assert matches(range_text, version), version
    for version in outside:
        assert not matches(range_text, version), version


@pytest.mark.parametrize(
    "range_text, inside, outside",
    [
        ("~1.2.3", ["1.2.3", "1.2.9"], ["1.3.0", "1.2.2"]),
        ("~1.2", ["1.2.0", "1.2.5"], ["1.3.0"]),
        ("~1", ["1.0.0", "1.9.0"], ["2.0.0"]),
    ],
)
def test_tilde(range_text, inside, outside):
    for version in inside:
        assert matches(range_text, version), version
    for version in outside:
        assert not matches(range_text, version), version


@pytest.mark.parametrize(
    "range_text, inside, outside",
    [
        ("1.2.x", ["1.2.0", "1.2.7"], ["1.3.0"]),
        ("1.x", ["1.0.0", "1.5.2"], ["2.0.0", "0.9.0"]),
        ("1.2", ["1.2.4"], ["1.3.0"]),
        (">1.2", ["1.3.0"], ["1.2.9"]),
        ("<=1.2", ["1.2.9"], ["1.3.0"]),
    ],
)
def test_partial_versions(range_text, inside, outside):
    for version in inside:
        assert matches(range_text, version), version
    for version in outside:
        assert not matches(range_text, version), version


def test_alternatives():
    assert matches("~1.2 || >=3", "3.1.0")
    assert matches("~1.2 || >=3", "1.2.8")
    assert not matches("~1.2 || >=3", "2.0.0")


def test_prerelease_needs_a_prerelease_in_the_range():
    assert not matches(">=1.0.0", "1.1.0-beta.1")
    assert matches(">=1.1.0-alpha", "1.1.0-beta.1")
    assert not matches(">=1.1.0-alpha", "1.2.0-beta.1")


def test_include_prerelease_option():
    assert matches(">=1.0.0", "1.1.0-beta.1", include_prerelease=True)


def test_contains_accepts_strings():
    assert "1.4.0" in Range.parse("^1.0.0")


def test_max_satisfying():
    versions = ["1.0.0", "1.4.2", "1.10.0", "2.0.0", "1.11.0-rc.1"]
    assert str(Range.parse("^1.0.0").max_satisfying(versions)) == "1.10.0"
    assert Range.parse(">=3").max_satisfying(versions) is None


def test_str():
    assert str(Range.parse("^1.2.3 || 2.x")) == ">=1.2.3 <2.0.0 || >=2.0.0 <3.0.0"


def test_invalid_range():
    with pytest.raises(InvalidVersionError):
        Range.parse(">=banana")
