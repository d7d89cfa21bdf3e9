"""Rules that drop junk releases, as data.

The coordinator hands the rules out with each lease (`Rule.to_wire` /
`rule_from_wire`), so every edge applies the same ones. A rule looks at one
release chunk (the files of a release seen in one batch) and answers None to
keep it or the key it dropped it under; the indexer counts drops by
(rule, key): releases and segments.

The first rule, and the one that matters most: bare executables. Malware
floods named after films and software were 92% of the catalog rows and 21%
of the segments of real groups; a real upload of software comes in an
archive, so a release whose content is only .exe/.scr/... is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from usenet_indexer.errors import RemoteProtocolError

EXECUTABLE_EXTENSIONS = frozenset(
    {
        "exe",
        "scr",
        "com",
        "bat",
        "cmd",
        "msi",
        "pif",
        "vbs",
        "vbe",
        "js",
        "jse",
        "wsf",
        "lnk",
        "ps1",
        "hta",
        "cpl",
        "jar",
    }
)
# Files that come along with any upload and do not make a release legit.
COMPANION_EXTENSIONS = frozenset({"nfo", "sfv", "par2", "nzb", "txt", "jpg", "png", "md5", "url"})


class ReleaseView:
    """What a rule sees of a release chunk: its file names, and its name when asked.

    The name is worked out only for a rule that needs it: most releases of a
    binary group are executable floods, dropped on their file names alone.
    """

    __slots__ = ("_name", "_name_of", "file_names")

    def __init__(self, file_names: Sequence[str], name_of: Callable[[], str]) -> None:
        self.file_names = file_names
        self._name_of = name_of
        self._name: str | None = None

    @property
    def name(self) -> str:
        if self._name is None:
            self._name = self._name_of()
        return self._name


class Rule(Protocol):
    """A rule: a name, a verdict on a release chunk, and a wire form."""

    @property
    def name(self) -> str: ...

    def verdict(self, release: ReleaseView) -> str | None:
        """None to keep the release, else the key the drop is counted under."""
        ...

    def to_wire(self) -> dict[str, Any]: ...


@attrs.frozen
class ExecutableRule:
    """Drops releases made only of bare executables (and their companions).

    The key is the executable's extension, e.g. "exe".
    """

    name: str = "executable"
    extensions: frozenset[str] = EXECUTABLE_EXTENSIONS
    companions: frozenset[str] = COMPANION_EXTENSIONS

    def verdict(self, release: ReleaseView) -> str | None:
        found = ""
        extensions = self.extensions
        companions = self.companions
        for file_name in release.file_names:
            # subject.extension, inline: this runs for every file of a batch.
            dot = file_name.rfind(".")
            size = len(file_name)
            ext = file_name[dot + 1 :].lower() if 0 <= dot < size - 1 and size - dot <= 6 else ""
            if ext in extensions:
                found = found or ext
            elif ext not in companions:
                return None
        return found or None

    def to_wire(self) -> dict[str, Any]:
        return {
            "kind": "executable",
            "name": self.name,
            "extensions": sorted(self.extensions),
            "companions": sorted(self.companions),
        }


@attrs.frozen
class NamePatternRule:
    """Drops releases whose name matches a regular expression (spam, known junk).

    The key is '' (one count per rule): patterns are the operator's, and the
    matched text may be anything.
    """

    name: str
    pattern: str
    _compiled: re.Pattern[str] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_compiled", re.compile(self.pattern, re.IGNORECASE))

    def verdict(self, release: ReleaseView) -> str | None:
        return "" if self._compiled.search(release.name) else None

    def to_wire(self) -> dict[str, Any]:
        return {"kind": "name_pattern", "name": self.name, "pattern": self.pattern}


DEFAULT_RULES: tuple[Rule, ...] = (ExecutableRule(),)


def rule_from_wire(data: Mapping[str, Any]) -> Rule:
    """Build a rule from its wire form (a lease's `rules` entry).

    Raises:
        RemoteProtocolError: the form is not a rule this version knows.
    """
    try:
        kind = data["kind"]
        if kind == "executable":
            return ExecutableRule(
                name=str(data.get("name", "executable")),
                extensions=frozenset(str(e) for e in data.get("extensions", EXECUTABLE_EXTENSIONS)),
                companions=frozenset(str(e) for e in data.get("companions", COMPANION_EXTENSIONS)),
            )
        if kind == "name_pattern":
            return NamePatternRule(name=str(data["name"]), pattern=str(data["pattern"]))
    except (KeyError, TypeError, re.error) as error:
        raise RemoteProtocolError(f"bad rule {data!r}: {error}") from error
    raise RemoteProtocolError(f"unknown rule kind {kind!r}")
