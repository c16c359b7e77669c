import pytest

from semverlite import InvalidVersionError, Version, compare


def test_parse_release():
    version = Version.parse("1.2.3")
    assert (version.major, version.minor, version.patch) == (1, 2, 3)
    assert not version.is_prerelease


def test_parse_prerelease_and_build():
    version = Version.parse("v2.0.0-rc.1+build.7")
    assert version.prerelease == ("rc", "1")
    assert version.build == ("build", "7")


@pytest.mark.parametrize(
    "text", ["1.2", "1.2.3.4", "01.2.3", "1.2.3-", "1.2.3-rc..1", "1.2.3-01", "a.b.c", ""]
)
def test_parse_rejects_invalid_versions(text):
    with pytest.raises(InvalidVersionError):
        Version.parse(text)


def test_zero_is_a_valid_prerelease_identifier():
    assert Version.parse("1.0.0-0").prerelease == ("0",)


@pytest.mark.parametrize("text", ["1.2.3", "1.0.0-alpha.1", "1.0.0+sha.5114f85", "1.0.0-x-y.2+b"])
def test_str_round_trips(text):
    assert str(Version.parse(text)) == text


def test_repr():
    assert repr(Version.parse("1.2.3-rc.1")) == "Version('1.2.3-rc.1')"


# The precedence example from the semver 2.0.0 specification, lowest first.
SPEC_ORDER = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "1.0.1",
    "1.1.0",
    "2.0.0",
]


def test_sorting_follows_the_specification():
    shuffled = [SPEC_ORDER[index] for index in (5, 0, 9, 3, 7, 1, 10, 6, 2, 8, 4)]
    assert [str(v) for v in sorted(Version.parse(text) for text in shuffled)] == SPEC_ORDER


def test_release_is_newer_than_its_prereleases():
    assert Version.parse("1.0.0-rc.9") < Version.parse("1.0.0")
    assert Version.parse("1.0.0") > Version.parse("1.0.0-rc.9")


def test_numeric_identifiers_compare_as_numbers():
    assert Version.parse("1.0.0-rc.2") < Version.parse("1.0.0-rc.10")


def test_numeric_identifier_is_lower_than_alphanumeric():
    assert Version.parse("1.0.0-1") < Version.parse("1.0.0-alpha")


def test_longer_prerelease_is_higher_when_prefix_is_equal():
    assert Version.parse("1.0.0-alpha") < Version.parse("1.0.0-alpha.1")


def test_build_metadata_is_ignored_for_equality():
    assert Version.parse("1.0.0+a") == Version.parse("1.0.0+b")
    assert hash(Version.parse("1.0.0+a")) == hash(Version.parse("1.0.0"))


def test_compare_returns_sign():
    assert compare(Version.parse("1.0.0"), Version.parse("2.0.0")) == -1
    assert compare(Version.parse("2.0.0"), Version.parse("2.0.0")) == 0
    assert compare(Version.parse("2.0.1"), Version.parse("2.0.0")) == 1


def test_max_of_versions():
    versions = [Version.parse(text) for text in ("0.9.0", "1.0.0-rc.1", "1.0.0", "0.10.0")]
    assert str(max(versions)) == "1.0.0"
