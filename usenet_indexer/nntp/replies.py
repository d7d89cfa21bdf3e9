"""What the texts of some replies say: CAPABILITIES, GROUP, DATE (pure code)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import attrs

from usenet_indexer.nntp.errors import MalformedResponse


@attrs.frozen
class ServerCapabilities:
    """The CAPABILITIES list: each label (upper case) with its arguments."""

    items: dict[str, tuple[str, ...]]

    @classmethod
    def from_lines(cls, lines: Iterable[bytes]) -> ServerCapabilities:
        """Parses the data lines of a 101 reply (RFC 3977 5.2)."""
        items: dict[str, tuple[str, ...]] = {}
        for raw in lines:
            words = raw.decode("utf-8", "replace").split()
            if words:
                items[words[0].upper()] = tuple(words[1:])
        return cls(items)

    def has(self, label: str, argument: str | None = None) -> bool:
        """Whether the server lists `label` (with `argument` among its arguments)."""
        found = self.items.get(label.upper())
        if found is None:
            return False
        return argument is None or argument.upper() in (a.upper() for a in found)

    def xfeature_gzip(self) -> bool:
        """Whether XFEATURE COMPRESS GZIP is offered ("XFEATURE-COMPRESS GZIP" as Highwinds lists it)."""
        return self.has("XFEATURE-COMPRESS", "GZIP") or self.has("XFEATURE", "GZIP")

    def xfeature_terminator(self) -> bool:
        """Whether XFEATURE COMPRESS GZIP takes TERMINATOR (the "." inside the compressed data)."""
        return self.has("XFEATURE-COMPRESS", "TERMINATOR") or self.has("XFEATURE", "TERMINATOR")

    def with_extensions(self, other: ServerCapabilities) -> ServerCapabilities:
        """These capabilities plus the labels only `other` (LIST EXTENSIONS) has."""
        return ServerCapabilities({**other.items, **self.items})

    @property
    def version(self) -> int | None:
        versions = [int(v) for v in self.items.get("VERSION", ()) if v.isdigit()]
        return max(versions) if versions else None


# The largest article number (RFC 3977 says 2^31 - 1; servers went to 2^63 - 1, and
# the catalog's and spool's numbers are PostgreSQL bigints, which stop there).
MAX_ARTICLE: Final = 2**63 - 1


@attrs.frozen
class GroupStatus:
    """A 211 reply to GROUP: the estimated count and the low and high water marks."""

    count: int
    low: int
    high: int
    name: str

    @classmethod
    def from_text(cls, text: str) -> GroupStatus:
        """Parses "count low high name" (numbers may exceed 2^32, not MAX_ARTICLE).

        Raises:
            MalformedResponse: the text is not that, or a number is past MAX_ARTICLE
                (stored, it would stop whoever stores it: a reply error is handled).
        """
        words = text.split()
        if len(words) < 4 or not all(w.isascii() and w.isdigit() for w in words[:3]):
            raise MalformedResponse(f"not a 211 GROUP reply: {text[:100]!r}")
        count, low, high = (int(w) for w in words[:3])
        if max(count, low, high) > MAX_ARTICLE:
            raise MalformedResponse(f"a 211 GROUP reply past 2^63 - 1: {text[:100]!r}")
        return cls(count, low, high, words[3])


def parse_date(text: str) -> str:
    """The yyyymmddhhmmss of a 111 reply to DATE.

    Raises:
        MalformedResponse: the text does not start with 14 digits.
    """
    word = text.split(" ", 1)[0]
    if len(word) != 14 or not (word.isascii() and word.isdigit()):
        raise MalformedResponse(f"not a 111 DATE reply: {text[:100]!r}")
    return word
