"""URL slugs from arbitrary text."""

from __future__ import annotations

import re
import unicodedata

_UNSAFE = re.compile(r"[^A-Za-z0-9]+")


def slugify(
    text: str, separator: str = "-", max_length: int | None = None, lowercase: bool = True
) -> str:
    """Turn ``text`` into an ASCII slug.

    Accents are dropped (``é`` becomes ``e``), every run of other characters
    becomes one ``separator``, and the slug never starts or ends with a
    separator. With ``max_length`` the slug is cut at the last separator that
    keeps it within the limit; a single long word is cut hard.
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    if lowercase:
        ascii_text = ascii_text.lower()
    slug = _UNSAFE.sub(separator, ascii_text).strip(separator)
    if max_length is not None and len(slug) > max_length:
        cut = slug.rfind(separator, 0, max_length + 1)
        slug = slug[:cut] if cut > 0 else slug[:max_length]
    return slug
