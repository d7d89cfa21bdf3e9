"""The newznab API's requests and answers, pure: query parameters in, XML or JSON out.

What the downloaders (SABnzbd, NZBGet) and their automation (Sonarr, Radarr,
Prowlarr, NZBHydra2) send and read:

- `t=caps` (no key): server, limits, the search modes with their
  parameters, the categories;
- `t=search|tvsearch|movie|music|book` with `q`, `cat`, `limit`, `offset`,
  `maxage`, `minsize`, `maxsize`, `group`, `season`, `ep`, `extended`,
  `o=json`: an RSS 2.0 feed with `newznab:attr` elements;
- ids, from the NFOs probes read: Radarr's `t=movie&imdbid=0133093` (its
  digits, `tt` taken off; `tt0133093` is taken too) and `tmdbid`, Sonarr's
  `t=tvsearch` with `tvdbid`, `tvmazeid`, `imdbid` (with `season`/`ep`;
  a daily show's episode as its air date, `season=2023&ep=05/12`, finds
  the names that write the date, `Show.2023.05.12.720p`, and its season, a
  year, `season=2023` without ep, the names that write that year);
  items carry `imdb` (7 digits at least, no `tt`: what Radarr reads),
  `tvdbid` (Sonarr's), `tvmazeid`, `tmdbid`;
- `t=details&id=` (every attr, as `extended=1` gives them), `t=get&id=` (the
  NZB, with the X-DNZB headers SABnzbd and NZBGet read), `t=getnfo&id=`
  (an item without an NFO is an empty feed, total 0: NZBHydra2's "no NFO";
  error 300 is for an id that is no item);
- `t=failed&id=` (the X-DNZB-Failure URL: a downloader reports a failed
  download of the release; NZBGet's FailureLink may add `&corrupt=true`).

Errors are HTTP 200 with `<error code description/>` (Sonarr and Radarr
throw on a status >= 400 before they read the body): 100 wrong or missing
apikey, 200 missing parameter, 201 bad parameter, 202 no such function, 203
function not available, 300 no such item, 500 request limit reached, 501
download limit reached (the *arr programs and Prowlarr know a limit by the
description "Request limit reached"; the adapter adds Retry-After). A bad
value is refused by name; a limit past the maximum is clamped, never refused,
and a maxage past `MAX_AGE_DAYS` is none.

Daily limits count per key and UTC day (`Usage`); a feed reports them as
`<newznab:apilimits>` (what NZBHydra2 reads: apicurrent, apimax, grabcurrent,
grabmax, and when the day's count began), only the limits that are set.

No I/O: the adapter (coordinator/http/newznab.py) reads the store and
calls these.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import quote, quote_plus
from xml.etree import ElementTree as ET

import attrs
import orjson

from usenet_indexer.core.categories import CATEGORIES, parent, subcategories
from usenet_indexer.decode.ids import NO_IDS, MediaIds
from usenet_indexer.errors import UidxError

NEWZNAB_NS = "http://www.newznab.com/DTD/2010/feeds/attributes/"
MAX_LIMIT = 100
DEFAULT_LIMIT = 100
MAX_Q = 256  # characters of q looked at; a longer q is cut, never refused
# Functions and the search parameters each takes (caps says so).
SEARCH_MODES: Mapping[str, tuple[str, ...]] = {
    "search": ("q",),
    "tv-search": ("q", "season", "ep", "tvdbid", "tvmazeid", "imdbid"),
    "movie-search": ("q", "imdbid", "tmdbid"),
    "audio-search": ("q",),
    "book-search": ("q",),
}
_FUNCTIONS = {
    "search": "search",
    "s": "search",
    "tvsearch": "tvsearch",
    "tv": "tvsearch",
    "movie": "movie",
    "m": "movie",
    "music": "music",
    "book": "book",
    "details": "details",
    "d": "details",
    "get": "get",
    "g": "get",
    "getnfo": "getnfo",
    "caps": "caps",
    "c": "caps",
    "failed": "failed",
}
_NOT_AVAILABLE = {"register", "cart-add", "cart-del", "comments", "comments-add", "user"}
_GUID = re.compile(r"^[0-9a-f]{32}$")
_SEASON = re.compile(r"^[sS]?(\d{1,4})$")
_EPISODE = re.compile(r"^[eE]?(\d{1,5})$")
# An episode of a daily show, as Sonarr asks for it (its NewznabRequestGenerator:
# `season={yyyy}&ep={MM}/{dd}`): the air date's year as the season, month and day
# as the episode. Names carry the date as words (`Show.Name.2023.05.12.720p`).
_YEAR = re.compile(r"^(\d{4})$")
_MONTH_DAY = re.compile(r"^(\d{1,2})[/-](\d{1,2})$")
# A season from this number on is a daily show's year (Sonarr's DailySeasonSearchCriteria
# asks `season=2023`): no show has had 1900 seasons, and no daily one aired before.
_FIRST_YEAR = 1900
# A maxage past this many days asks for no bound (a release older than the Unix
# epoch is no release); days beyond a bigint's seconds were a 500.
MAX_AGE_DAYS = 100_000
# An id's digits (IMDb's with or without its `tt`): 8 at most, as NFOs write them.
_IMDB_ID = re.compile(r"^(?:tt)?(\d{1,8})$", re.IGNORECASE)
_ID = re.compile(r"^(\d{1,8})$")
# The id parameters: (parameter, MediaIds field, what a value must be).
_ID_PARAMETERS = (
    ("imdbid", "imdb", _IMDB_ID, "an IMDb id: its digits, with or without tt"),
    ("tvdbid", "tvdb", _ID, "a TheTVDB id: digits"),
    ("tvmazeid", "tvmaze", _ID, "a TVmaze id: digits"),
    ("tmdbid", "tmdb", _ID, "a TMDB id: digits"),
)
# What a category of its function means when no cat is given.
_FUNCTION_PARENT = {"tvsearch": 5000, "movie": 2000, "music": 3000, "book": 7000}


class NewznabError(UidxError):
    """A request the newznab API answers with an error element.

    Attributes:
        code: the newznab error code (100, 200, 201, 202, 203, 300, 500, 501).
        description: what was wrong, naming the parameter.
        retry_after_seconds: when to ask again (a limit reached), else None.
    """

    def __init__(
        self, code: int, description: str, *, retry_after_seconds: int | None = None
    ) -> None:
        super().__init__(f"{code} {description}")
        self.code = code
        self.description = description
        self.retry_after_seconds = retry_after_seconds


# The descriptions clients match on (Sonarr, Radarr, Prowlarr: "Request limit reached").
REQUEST_LIMIT = "Request limit reached"
DOWNLOAD_LIMIT = "Download limit reached"
_DAY_SECONDS = 86_400


def usage_day(now: float) -> date:
    """The UTC day whose counters a request at unix time `now` counts in."""
    return datetime.fromtimestamp(now, UTC).date()


def limit_reached(grab: bool, now: float) -> NewznabError:
    """Error 501 (an NZB download, `grab`) or 500 (any other request) of a key past its
    daily limit, to be asked again when the UTC day ends."""
    retry = max(1, _DAY_SECONDS - int(now) % _DAY_SECONDS)
    if grab:
        return NewznabError(501, DOWNLOAD_LIMIT, retry_after_seconds=retry)
    return NewznabError(500, REQUEST_LIMIT, retry_after_seconds=retry)


@attrs.frozen
class Usage:
    """One key's use of a UTC day, this request counted in.

    Attributes:
        day: the UTC day.
        requests, grabs: requests (searches, feeds, details) and NZB downloads.
        requests_cap, grabs_cap: the limits (0: none).
    """

    day: date
    requests: int
    grabs: int
    requests_cap: int
    grabs_cap: int

    @property
    def limited(self) -> bool:
        """Whether the key has a limit to report."""
        return bool(self.requests_cap or self.grabs_cap)


@attrs.frozen
class Request:
    """A checked newznab request.

    Attributes:
        function: caps, search, tvsearch, movie, music, book, details, get or getnfo.
        apikey: the key given ("" when none).
        json: answer in JSON (o=json).
        extended: every newznab:attr (extended=1).
        guid: the item of details, get and getnfo.
        words: q, cut to MAX_Q characters.
        categories: cat ids that the table has (unknown ones are skipped).
        season, episode: tvsearch's numbers.
        aired: tvsearch's air date of a daily show's episode, as a name's words
            write it ("2023 05 12"; its words are also in `words`).
        max_age_days, min_size, max_size, group: filters.
        limit, offset: the page (limit clamped to 1..MAX_LIMIT).
        corrupt: t=failed's report says the download was corrupt (corrupt=true).
        ids: the media ids asked for (imdbid, tvdbid, tvmazeid, tmdbid).
    """

    function: str
    apikey: str = ""
    json: bool = False
    extended: bool = False
    guid: str = ""
    words: str = ""
    categories: tuple[int, ...] = ()
    season: int | None = None
    episode: int | None = None
    aired: str | None = None
    max_age_days: int | None = None
    min_size: int | None = None
    max_size: int | None = None
    group: str | None = None
    limit: int = DEFAULT_LIMIT
    offset: int = 0
    corrupt: bool = False
    ids: MediaIds = NO_IDS


def parse_request(params: Mapping[str, str]) -> Request:
    """Check a request's query parameters (names lower case, values as given).

    Raises:
        NewznabError: 200 (a parameter missing), 201 (a bad value, named),
            202 (no such function), 203 (not available here).
    """
    function_name = params.get("t", "").strip().lower()
    if not function_name:
        raise NewznabError(200, "missing parameter: t")
    if function_name in _NOT_AVAILABLE:
        raise NewznabError(203, f"function not available: {function_name}")
    function = _FUNCTIONS.get(function_name)
    if function is None:
        raise NewznabError(202, f"no such function: {function_name[:40]}")
    fields: dict[str, Any] = {
        "function": function,
        "apikey": params.get("apikey", "").strip(),
        "json": params.get("o", "").lower() == "json",
        "extended": params.get("extended", "") == "1",
    }
    if function in ("details", "get", "getnfo", "failed"):
        guid = params.get("id", params.get("guid", "")).strip().lower()
        if not guid:
            raise NewznabError(200, "missing parameter: id")
        if not _GUID.match(guid):
            raise NewznabError(300, "no such item")
        fields["guid"] = guid
        # Details give every attr: a client reads a release's files and grabs there.
        fields["extended"] = fields["extended"] or function == "details"
        fields["corrupt"] = params.get("corrupt", "").strip().lower() in ("1", "true", "yes")
        return Request(**fields)
    if function == "caps":
        return Request(**fields)
    fields["words"] = " ".join(params.get("q", "").replace("\x00", " ")[:MAX_Q].split())
    fields["categories"] = _categories(params.get("cat", ""))
    if function == "tvsearch":
        aired = _air_date(params)
        year = _daily_season(params)
        if year is not None:
            # A daily show's season: its episodes' names write the year, no season.
            fields["words"] = " ".join((fields["words"], year)).strip()
        elif aired is None:
            fields["season"] = _matched(params, "season", _SEASON)
            fields["episode"] = _matched(params, "ep", _EPISODE)
        else:
            # The date's words beside q's (what the words' index finds), and the date
            # as a name writes it (those words in a row).
            fields["words"] = " ".join((fields["words"], *aired)).strip()
            fields["aired"] = " ".join(aired)
    fields["ids"] = _ids(params)
    max_age = _number(params, "maxage")
    fields["max_age_days"] = None if max_age is None or max_age > MAX_AGE_DAYS else max_age
    fields["min_size"] = _number(params, "minsize")
    fields["max_size"] = _number(params, "maxsize")
    group = params.get("group", "").strip()
    fields["group"] = group[:200] or None
    limit = _number(params, "limit")
    fields["limit"] = DEFAULT_LIMIT if limit is None else max(1, min(limit, MAX_LIMIT))
    fields["offset"] = _number(params, "offset") or 0
    return Request(**fields)


def default_categories(request: Request) -> tuple[int, ...]:
    """The categories a search looks in: those asked for, else its function's parent."""
    if request.categories:
        return request.categories
    function_parent = _FUNCTION_PARENT.get(request.function)
    return () if function_parent is None else (function_parent,)


def _categories(text: str) -> tuple[int, ...]:
    found = []
    for part in text.split(",")[:50]:
        part = part.strip()
        if part.isdigit() and int(part) in CATEGORIES:
            found.append(int(part))
    return tuple(dict.fromkeys(found))


def _number(params: Mapping[str, str], name: str) -> int | None:
    text = params.get(name, "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 15:
        raise NewznabError(201, f"bad parameter: {name} must be a whole number >= 0")
    return int(text)


def _ids(params: Mapping[str, str]) -> MediaIds:
    """The ids asked for; an empty value or 0 is none asked (a client without one)."""
    asked: dict[str, int] = {}
    for name, field, pattern, what in _ID_PARAMETERS:
        text = params.get(name, "").strip()
        if not text:
            continue
        found = pattern.match(text)
        if found is None:
            raise NewznabError(201, f"bad parameter: {name} must be {what}")
        if int(found.group(1)):
            asked[field] = int(found.group(1))
    return MediaIds(**asked)


def _air_date(params: Mapping[str, str]) -> tuple[str, str, str] | None:
    """A daily show's episode asked by its air date (`season=2023&ep=05/12`): the date's
    year, month and day as a name writes them ("2023", "05", "12"); None when `ep` is
    no month and day.

    Raises:
        NewznabError: 201, a month and day without a year as the season, or no date.
    """
    month_day = _MONTH_DAY.match(params.get("ep", "").strip())
    if month_day is None:
        return None
    year = _YEAR.match(params.get("season", "").strip())
    if year is None:
        raise NewznabError(201, "bad parameter: season must be a year when ep is a month/day")
    try:
        aired = date(int(year.group(1)), int(month_day.group(1)), int(month_day.group(2)))
    except ValueError as error:
        raise NewznabError(201, f"bad parameter: ep: no such date ({error})") from error
    return f"{aired.year:04d}", f"{aired.month:02d}", f"{aired.day:02d}"


def _daily_season(params: Mapping[str, str]) -> str | None:
    """A daily show's season asked (Sonarr's season search of one: `season=2023`, no
    ep): the year, as a name writes it; None when season is no year or ep is given."""
    if params.get("ep", "").strip():
        return None
    year = _YEAR.match(params.get("season", "").strip())
    if year is None or int(year.group(1)) < _FIRST_YEAR:
        return None
    return year.group(1)


def _matched(params: Mapping[str, str], name: str, pattern: re.Pattern[str]) -> int | None:
    text = params.get(name, "").strip()
    if not text:
        return None
    found = pattern.match(text)
    if found is None:
        raise NewznabError(201, f"bad parameter: {name}")
    return int(found.group(1))


@attrs.frozen
class Item:
    """A release as a feed lists it."""

    guid: str
    name: str
    category: int
    size: int
    files: int
    poster: str
    groups: tuple[str, ...]
    posted: int
    grabs: int
    completion: float
    season: int | None = None
    episode: int | None = None
    failures: int = 0  # users who reported a failed download (t=failed)
    state: str = "whole"  # completion.State's value: whole, repairable or broken
    ids: MediaIds = NO_IDS  # what its NFO named


@attrs.frozen
class Site:
    """Where the API is, for the absolute URLs of a feed.

    Attributes:
        base_url: the site root as the client reached it ("http://host:port").
        title: the server's title in caps and feeds.
    """

    base_url: str
    title: str = "uidx"


def error_xml(error: NewznabError) -> bytes:
    """The error element of a refused request; its description without what XML 1.0
    cannot hold (it may quote what was asked: `t=%01`)."""
    element = ET.Element(
        "error", code=str(error.code), description=_NOT_XML.sub("", error.description)
    )
    return _xml(element)


def error_json(error: NewznabError) -> bytes:
    """The error, in the JSON shape of the XML one."""
    return orjson.dumps(
        {"error": {"@attributes": {"code": str(error.code), "description": error.description}}}
    )


def caps_xml(site: Site) -> bytes:
    """The answer to t=caps."""
    caps = ET.Element("caps")
    ET.SubElement(caps, "server", title=site.title, version="1.0")
    ET.SubElement(caps, "limits", max=str(MAX_LIMIT), default=str(DEFAULT_LIMIT))
    searching = ET.SubElement(caps, "searching")
    for mode, supported in SEARCH_MODES.items():
        ET.SubElement(searching, mode, available="yes", supportedParams=",".join(supported))
    categories = ET.SubElement(caps, "categories")
    for parent_id in sorted({parent(c) for c in CATEGORIES}):
        element = ET.SubElement(
            categories, "category", id=str(parent_id), name=CATEGORIES[parent_id]
        )
        for sub in subcategories(parent_id):
            ET.SubElement(element, "subcat", id=str(sub), name=CATEGORIES[sub].split("/", 1)[1])
    return _xml(caps)


def caps_json(site: Site) -> bytes:
    """t=caps in JSON (the XML's elements as objects, attributes under "@attributes")."""
    return orjson.dumps(_as_json(ET.fromstring(caps_xml(site))))


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


# The dates a datetime holds (years 1 to 9999), in Unix seconds.
_FIRST_MOMENT = -62_135_596_800
_LAST_MOMENT = 253_402_300_799
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def moment(unix: int) -> datetime:
    """A release's date (Unix seconds) as a UTC datetime, held within the years 1 to
    9999: a Date header may say year 9999 in a time zone east of UTC (year 10000
    in UTC), and a node may send any bigint; a feed with such a release at its
    top (the newest) was a 500 to every RSS reader."""
    return _EPOCH + timedelta(seconds=min(max(unix, _FIRST_MOMENT), _LAST_MOMENT))


def rfc1123(unix: int) -> str:
    """A date as RSS wants it: `Sun, 06 Jun 2010 17:29:23 +0000` (English names
    whatever the locale; written out, as email.utils.format_datetime took a third of
    a feed's rendering). Dates past what a datetime holds are its ends (`moment`)."""
    t = moment(unix)
    return (
        f"{_DAYS[t.weekday()]}, {t.day:02d} {_MONTHS[t.month - 1]} {t.year:04d} "
        f"{t.hour:02d}:{t.minute:02d}:{t.second:02d} +0000"
    )


def comments_url(site: Site, item: Item) -> str:
    """Where a person reads about an item: the status page's search for its name."""
    return f"{site.base_url}/?q={_query_value(item.name)}"


def _query_value(value: str) -> str:
    """A value in a query string as urlencode writes it (UTF-8, a lone surrogate as
    `?`; space as `+`): only letters, digits and `_.-~%+`, nothing XML escapes."""
    return quote_plus(value.encode("utf-8", "replace"))


def nzb_url(site: Site, guid: str, apikey: str) -> str:
    """The URL of an item's NZB, working as-is (it carries the apikey)."""
    return _api_url(site, "get", guid, apikey)


def details_url(site: Site, guid: str, apikey: str) -> str:
    """The URL of an item's details (t=details: every attr), working as-is."""
    return _api_url(site, "details", guid, apikey)


def failure_url(site: Site, guid: str, apikey: str) -> str:
    """The URL a downloader calls (GET) when the item's download failed: t=failed, with
    the key of whoever fetched the NZB (FailureLink may append `&corrupt=true`)."""
    return _api_url(site, "failed", guid, apikey)


def _api_url(site: Site, function: str, guid: str, apikey: str) -> str:
    return f"{site.base_url}/api?t={function}&id={quote_plus(guid)}&apikey={quote_plus(apikey)}"


# Characters a header value cannot carry (CR and LF would end it; other controls
# and DEL no client expects): dropped from a release's name.
_NOT_IN_HEADER = re.compile("[\x00-\x1f\x7f]")


def dnzb_headers(site: Site, item: Item, apikey: str) -> list[tuple[str, str]]:
    """The X-DNZB headers of an item's NZB, as SABnzbd and NZBGet read them.

    X-DNZB-Name: the release name, which SABnzbd takes as the job's (it adds
    ".nzb"); X-DNZB-Category: "Parent > Sub" as newznab writes it (SABnzbd maps
    it to its categories by prefix, NZBGet by its category mapping);
    X-DNZB-Details: the item's details URL; X-DNZB-Failure: the URL that
    records a failed download. No X-DNZB-Password: probes see that an archive
    is encrypted, nothing tells its password, and a guess is worse than none.
    """
    name = _NOT_IN_HEADER.sub("", item.name).strip() or item.guid
    category = CATEGORIES.get(item.category, "Other").replace("/", " > ")
    return [
        ("X-DNZB-Name", name),
        ("X-DNZB-Category", category),
        ("X-DNZB-Details", details_url(site, item.guid, apikey)),
        ("X-DNZB-Failure", failure_url(site, item.guid, apikey)),
    ]


def header_value(value: str) -> bytes:
    """A header value's bytes as SABnzbd and NZBGet read them: Latin-1 (SABnzbd's
    urllib decodes a header as Latin-1, NZBGet converts X-DNZB values with
    Latin1ToUtf8), so a name with accents comes out as it is listed rather than as
    its UTF-8 bytes read as Latin-1 (`AmÃ©lie`). A name with a character Latin-1
    lacks goes as UTF-8, as newznab indexers send it: no bytes read right there,
    and a Latin-1 reader's text turns back into it."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace")


def feed_xml(
    site: Site,
    items: Sequence[Item],
    *,
    offset: int,
    total: int,
    apikey: str,
    extended: bool,
    usage: Usage | None = None,
) -> bytes:
    """An RSS 2.0 feed of search results (with the key's `usage`, when it has limits).

    Written as text (a feed of 100 items is the API's most common answer, and
    ElementTree took 20 ms for one): every value goes through `_text` or
    `_attr`, which escape it and drop what XML 1.0 cannot hold.
    """
    title = _text(site.title)
    limits = "".join(f' {key}="{_attr(value)}"' for key, value in _api_limits(usage))
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<rss version="2.0" xmlns:newznab="{NEWZNAB_NS}"><channel>'
        f"<title>{title}</title><description>{title} feed</description>"
        f"<link>{_text(site.base_url)}/</link>"
        f'<newznab:response offset="{offset}" total="{total}"/>'
        + (f"<newznab:apilimits{limits}/>" if limits else "")
    ]
    # What every item's URLs share, escaped once: a query value (`_query_value`) needs
    # no escaping, and escaping is character by character, so the parts add up.
    get = _attr(f"{site.base_url}/api?t=get&id=")
    with_key = _attr(f"&apikey={quote_plus(apikey)}")
    comments = _text(f"{site.base_url}/?q=")
    for item in items:
        url = f"{get}{quote_plus(item.guid)}{with_key}"
        name = _text(item.name)
        attributes = "".join(
            f'<newznab:attr name="{key}" value="{_attr(value)}"/>'
            for key, value in _attributes(item, extended)
        )
        parts.append(
            f"<item><title>{name}</title>"
            f'<guid isPermaLink="false">{_text(item.guid)}</guid>'
            f"<link>{url}</link><comments>{comments}{_query_value(item.name)}</comments>"
            f"<pubDate>{rfc1123(item.posted)}</pubDate>"
            f"<category>{_text(CATEGORIES.get(item.category, 'Other'))}</category>"
            f"<description>{name}</description>"
            f'<enclosure url="{url}" length="{item.size}" type="application/x-nzb"/>'
            f"{attributes}</item>"
        )
    parts.append("</channel></rss>")
    return "".join(parts).encode("utf-8")


# What XML 1.0 cannot hold (C0 controls but tab, line feed and carriage return;
# lone surrogates; U+FFFE and U+FFFF): dropped from any text written.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# Printable ASCII but what XML escapes: the most of what a feed writes, as it is.
_PLAIN = re.compile("[ !#-%'-;=?-~]*")


def _text(value: str) -> str:
    if _PLAIN.fullmatch(value):
        return value
    return _NOT_XML.sub("", value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(value: str) -> str:
    if _PLAIN.fullmatch(value):
        return value
    return (
        _text(value)
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
        .replace("\t", "&#9;")
    )


def _attributes(item: Item, extended: bool) -> list[tuple[str, str]]:
    attributes = [("category", str(parent(item.category)))]
    if item.category != parent(item.category):
        attributes.append(("category", str(item.category)))
    attributes.append(("size", str(item.size)))
    # Always, not only extended: the share of the announced articles there (rounded
    # down: 100 only when all are), and whole or repairable (from its par2 set).
    attributes.append(("completion", str(math.floor(item.completion * 100))))
    attributes.append(("uidx_state", item.state))
    # Numbers, as the newznab spec has them ("5", not "S05").
    if item.season is not None:
        attributes.append(("season", str(item.season)))
    if item.episode is not None:
        attributes.append(("episode", str(item.episode)))
    # The ids, always (what the *arr programs map a result by): `imdb` as Radarr
    # reads it, the digits without `tt`.
    for name, value in (
        ("imdb", item.ids.imdb_text),
        ("tvdbid", item.ids.tvdb),
        ("tvmazeid", item.ids.tvmaze),
        ("tmdbid", item.ids.tmdb),
    ):
        if value is not None:
            attributes.append((name, str(value)))
    if extended:
        attributes += [
            ("files", str(item.files)),
            ("poster", item.poster),
            ("group", item.groups[0] if item.groups else ""),
            ("usenetdate", rfc1123(item.posted)),
            ("grabs", str(item.grabs)),
            ("failed", str(item.failures)),
        ]
    return attributes


def _api_limits(usage: Usage | None) -> list[tuple[str, str]]:
    """newznab:apilimits' attributes: the counts, the limits that are set (a limit
    absent is none: NZBHydra2 takes any number for one), when the day began."""
    if usage is None or not usage.limited:
        return []
    began = rfc1123(int(datetime(*usage.day.timetuple()[:3], tzinfo=UTC).timestamp()))
    limits = [("apicurrent", str(usage.requests))]
    if usage.requests_cap:
        limits.append(("apimax", str(usage.requests_cap)))
    limits.append(("grabcurrent", str(usage.grabs)))
    if usage.grabs_cap:
        limits.append(("grabmax", str(usage.grabs_cap)))
    return [*limits, ("apioldesttime", began), ("graboldesttime", began)]


def feed_json(
    site: Site,
    items: Sequence[Item],
    *,
    offset: int,
    total: int,
    apikey: str,
    extended: bool,
    usage: Usage | None = None,
) -> bytes:
    """The feed in the classic newznab JSON shape (the XML one-to-one)."""
    channel: dict[str, Any] = {
        "title": site.title,
        "description": f"{site.title} feed",
        "link": f"{site.base_url}/",
        "response": {"@attributes": {"offset": str(offset), "total": str(total)}},
    }
    limits = _api_limits(usage)
    if limits:
        channel["apilimits"] = {"@attributes": dict(limits)}
    channel["item"] = []
    for item in items:
        url = nzb_url(site, item.guid, apikey)
        name = _NOT_XML.sub("", item.name)
        channel["item"].append(
            {
                "title": name,
                "guid": item.guid,
                "link": url,
                "comments": comments_url(site, item),
                "pubDate": rfc1123(item.posted),
                "category": CATEGORIES.get(item.category, "Other"),
                "description": name,
                "enclosure": {
                    "@attributes": {
                        "url": url,
                        "length": str(item.size),
                        "type": "application/x-nzb",
                    }
                },
                "attr": [
                    {"@attributes": {"name": key, "value": _NOT_XML.sub("", value)}}
                    for key, value in _attributes(item, extended)
                ],
            }
        )
    return orjson.dumps({"@attributes": {"version": "2.0"}, "channel": channel})


def _as_json(element: ET.Element) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if element.attrib:
        result["@attributes"] = dict(element.attrib)
    for child in element:
        value = _as_json(child)
        if child.tag in result:
            if not isinstance(result[child.tag], list):
                result[child.tag] = [result[child.tag]]
            result[child.tag].append(value)
        else:
            result[child.tag] = value
    return result


def _xml(element: ET.Element) -> bytes:
    body: bytes = ET.tostring(element, encoding="utf-8", xml_declaration=False)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + body


def content_disposition(filename: str) -> bytes:
    """The Content-Disposition of an NZB: `attachment` with the name twice.

    First `filename="..."` with the name's UTF-8 bytes as they are: NZBGet names a
    job fetched by URL after the first `filename` it finds, its bytes taken for
    UTF-8 with no charset conversion and no RFC 5987 (a "?" standing in for a letter
    became "_": `Am_lie`), and newznab indexers send the raw name there too. Then,
    for a name beyond ASCII (or one changed here), RFC 5987's
    `filename*=UTF-8''...`, which browsers (RFC 6266) prefer. SABnzbd names the job
    after X-DNZB-Name and reads this header only without one. Quotes, backslashes
    and control characters (nzb_filename leaves none) would break the quoted
    string: they become "_".
    """
    plain = _NOT_IN_HEADER.sub("_", filename).replace('"', "_").replace("\\", "_")
    value = f'attachment; filename="{plain}"'
    if plain != filename or not filename.isascii():
        value += f"; filename*=UTF-8''{quote(filename.encode('utf-8', 'replace'), safe='')}"
    return value.encode("utf-8", "replace")
