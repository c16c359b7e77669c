import pytest

from semverlite import Version, bump


@pytest.mark.parametrize(
    "before, part, after",
    [
        ("1.2.3", "major", "2.0.0"),
        ("1.2.3", "minor", "1.3.0"),
        ("1.2.3", "patch", "1.2.4"),
        ("1.2.3+build.1", "patch", "1.2.4"),
        ("0.9.9", "minor", "0.10.0"),
    ],
)
def test_bump_release(before, part, after):
    assert str(bump(Version.parse(before), part)) == after


def test_patch_bump_releases_a_prerelease():
    assert str(bump(Version.parse("1.2.3-rc.1"), "patch")) == "1.2.3"


def test_prerelease_bump_of_a_release_starts_next_patch():
    assert str(bump(Version.parse("1.2.3"), "prerelease")) == "1.2.4-rc.0"
    assert str(bump(Version.parse("1.2.3"), "prerelease", tag="beta")) == "1.2.4-beta.0"


def test_prerelease_bump_increments_the_number():
    assert str(bump(Version.parse("1.2.4-rc.9"), "prerelease")) == "1.2.4-rc.10"


def test_prerelease_bump_without_number_appends_zero():
    assert str(bump(Version.parse("1.2.4-alpha"), "prerelease")) == "1.2.4-alpha.0"


def test_unknown_part():
    with pytest.raises(ValueError):
        bump(Version.parse("1.0.0"), "micro")
