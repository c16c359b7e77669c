import pytest

from harness.spaces import UnicodeText


def test_unicode_text_accepts_any_unicode_within_length() -> None:
    assert UnicodeText(max_length=20).contains("naïve ✓ — 漢字 🙂")


def test_unicode_text_rejects_too_long_and_non_strings() -> None:
    space = UnicodeText(max_length=3)
    assert not space.contains("abcd")
    assert not space.contains(b"abc")


def test_unicode_text_samples_are_members() -> None:
    space = UnicodeText(max_length=5, seed=0)
    assert all(space.contains(space.sample()) for _ in range(50))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_unicode_text_rejects_bad_max_length(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="max_length"):
        UnicodeText(max_length=bad)  # type: ignore[arg-type]
