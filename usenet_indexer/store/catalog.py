"""The catalog's rows: stored release chunks read back, and the searchable `catalog`
table (what the newznab API serves) read and written.

The merge itself is pure (core/catalog.py, core/merge.py) and driven by the
coordinator (coordinator/catalog_build.py): this module reads what it needs
(chunks, pending keys, spans, the keys of rows, windows) and writes what it
made (rows by guid, so that grabs survive; an unchanged row is not
written again).

How q matches
-------------
A name and a q are split the same way (`search_name`, `query_words`): lower
case, anything but letters and digits a word break, so `Show.Name`,
`show name` and `SHOW_NAME` ask the same, and `WEB-DL` is the two words of
`...WEB-DL-Kitsune`. Every word of q must be in the name, as newznab
indexers and the programs that ask them (Sonarr, Radarr, NZBHydra2) expect;
a repeated word counts once. First each word must be a whole word of the
name: the lexemes of full text search over `words`, asked as keys of GIN
catalog_search_keys (migration 0026): a word's key per period of ~24 days,
walked newest first until the page and the count are found (`_WALK`), and
per season for tvsearch; with an id, `words @@` (GIN catalog_words_episode)
beside the id's index. Only when no
release has them all are words of 3 characters or more taken as parts of
words too, `search_name LIKE '%word%'` (pg_trgm, GIN catalog_trigrams):
`s01e0` finds `S01E05`, `1080` finds `1080p`, `kitsu` finds `Kitsune`; the
shorter words stay whole (pg_trgm takes no trigram from them). That retry has
its own statement timeout, so a q that is neither (a typo) finds nothing in
a few milliseconds and never takes a second. Typos are not corrected:
similarity over a million names is what costs the second.

By id
-----
A search by id (imdbid, tvdbid, tvmazeid, tmdbid: the ids a release's NFO
named) is an equality on its column, served by that column's partial index
(only rows with an id have an entry). Several ids asked together are one
title's (Radarr, Sonarr and Prowlarr send every id they know of it): a
release matches by any of them, the indexes' bitmaps OR-ed. With q, q and
the ids must both match, and the ids' few rows are sorted rather than the
newest rows walked for them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from operator import attrgetter
from typing import Any

import attrs
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from usenet_indexer.core.batch import FileChunk, ReleaseChunk, Said, stored_chunk
from usenet_indexer.core.catalog import (
    NO_SPAN,
    CatalogEntry,
    Scope,
    Span,
    Window,
    query_words,
    search_name,
)
from usenet_indexer.core.categories import subcategories
from usenet_indexer.core.merge import APART_SECONDS, Pins
from usenet_indexer.core.newznab import Item
from usenet_indexer.decode.ids import NO_IDS, MediaIds
from usenet_indexer.store import arrays
from usenet_indexer.store.build_jobs import BuildJobs
from usenet_indexer.wire import fragments
from usenet_indexer.wire.packed import PackedRelease

__all__ = [
    "CatalogRow",
    "CatalogStore",
    "CatalogTable",
    "ReleaseStates",
    "Search",
    "copy_entries",
    "query_words",
    "search_name",
]

logger = logging.getLogger(__name__)

# Words shorter than this stay whole words in the partial-word retry: pg_trgm
# takes no trigram from one or two characters, and LIKE '%ab%' would read
# the whole trigram index.
_TRIGRAM_MIN = 3
# The partial-word retry's statement timeout. Trigrams narrow a part of a word
# less than full text does a word (pg_trgm's bitmap holds every name with its
# trigrams, each LIKE-checked), so its bitmaps can be large; past this the
# retry gives up and the q finds nothing (logged). 1M rows: 5-40 ms.
_PARTIAL_TIMEOUT_MS = 300
# A search with words looks at the newest rows first (see `_word_page`): this
# many pages of them (offset, the page and one past it), at most _WINDOW_MAX.
# A page of 101 looks at 5k rows: any word in 2% of the names fills it there.
_WINDOW_PAGES = 50
_WINDOW_MAX = 20_000  # rows; ~8 ms
_WINDOW_ROWS = """
    SELECT FROM (SELECT * FROM catalog ORDER BY posted DESC, id DESC LIMIT %s) AS catalog
    WHERE {}
"""
_WINDOW = """
    SELECT id, guid, name, category, size, files, poster, groups, posted, completion,
           season, episode, grabs, sources, state
    FROM (SELECT * FROM catalog ORDER BY posted DESC, id DESC LIMIT %s) AS catalog
    WHERE {} ORDER BY posted DESC, id DESC LIMIT %s OFFSET %s
"""
# The window is skipped when the planner expects it to hold less than this
# share of the page: a miss costs the look (2-3 ms for 5k rows) on top of the
# bitmaps. Two words of one show: 4 expected of 5k rows (17 there), skipped; a
# word it has no statistics for: 13 expected (none there), looked at.
_WINDOW_HOPE = 0.1

_RELEASES = "SELECT key, head_name, poster, groups, files_announced FROM releases"
_FRAGMENTS = (
    "SELECT release_key, poster, head_name, files_announced, packed FROM fragments"
    " ORDER BY range_id, batch_first"
)
_RELEASES_OF = _RELEASES + " WHERE key = ANY(%b)"
# A build job's release rows as one JSON text (wire/buildjob.ReleaseRows).
_RELEASES_JSON_OF = """
    SELECT coalesce(json_agg(json_build_array(
               encode(key, 'hex'), head_name, poster, groups, files_announced))::text, '[]')
    FROM releases WHERE key = ANY(%b)
"""
_FRAGMENTS_OF = (
    "SELECT release_key, range_id, batch_first, octet_length(packed), packed FROM fragments"
    " WHERE release_key = ANY(%b) ORDER BY range_id, batch_first"
)
# A build job's fragments, as they are (CatalogStore.packed).
_PACKED_OF = (
    "SELECT release_key, poster, head_name, files_announced, packed FROM fragments"
    " WHERE release_key = ANY(%b) ORDER BY range_id, batch_first"
)
# Which fragments the keys have, without their bytes: octet_length of a value
# stored out of line (STORAGE EXTERNAL) is read from its pointer, not its data.
_FRAGMENT_IDS_OF = (
    "SELECT release_key, range_id, batch_first, octet_length(packed), poster, head_name,"
    " files_announced FROM fragments WHERE release_key = ANY(%b) ORDER BY range_id, batch_first"
)
_PROBED_OF = (
    "SELECT release_key FROM probe_candidates WHERE release_key = ANY(%b) AND source = 'batch'"
)
_CATALOG_TEMP = """
    CREATE TEMPORARY TABLE catalog_new (LIKE catalog INCLUDING DEFAULTS) ON COMMIT DROP
"""
# The rows a pending build made across its scope's edge (core/catalog.Scope), to be
# compared with the stored ones, not written.
_CATALOG_OUT_TEMP = """
    CREATE TEMPORARY TABLE catalog_out (LIKE catalog INCLUDING DEFAULTS) ON COMMIT DROP
"""
# Binary: the rows' arrays (groups, sources) dumped in text cost a tenth of a build.
_CATALOG_COPY = """
    COPY {} (guid, name, search_name, category, size, files, poster, groups, posted,
             completion, season, episode, probe_candidate, sources, changed_at, state,
             imdb, tvdb, tvmaze, tmdb, anchor, span_low, span_high)
    FROM STDIN (FORMAT BINARY)
"""
_CATALOG_TYPES = (
    "text", "text", "text", "int4", "int8", "int4", "text", "text[]", "int8",
    "float4", "int4", "int4", "bool", "bytea[]", "timestamptz", "text",
    "int4", "int4", "int4", "int4", "text", "int8", "int8",
)  # fmt: skip
# Shown: complete, or quiet for long enough; a row once shown stays shown. A row
# the build made again as it was is not written (no dead tuple, no index entry,
# no trigger): only a new row, a changed one, or one to show now. As it was means
# but for its changed_at: that is when its source keys last got chunks, and a key
# shared by many uploads (a repost's, random names keyed by poster and M) gets
# them for its newest upload while its earlier ones' rows stay as they were; such
# a row keeps the date it last changed (and is shown once quiet since then, by
# _SHOW_QUIET), where every upload of the key was written again and kept waiting.
# A row made again otherwise than it is stored, its changed_at aside (`new`: the made
# row's alias).
_CHANGED_ROW = """(c.name, c.search_name, c.category, c.size, c.files, c.poster, c.groups,
           c.posted, c.completion, c.season, c.episode, c.probe_candidate, c.sources,
           c.state, c.imdb, c.tvdb, c.tvmaze, c.tmdb, c.anchor, c.span_low, c.span_high)
          IS DISTINCT FROM
          ({new}.name, {new}.search_name, {new}.category, {new}.size, {new}.files,
           {new}.poster, {new}.groups, {new}.posted, {new}.completion, {new}.season,
           {new}.episode, {new}.probe_candidate, {new}.sources, {new}.state, {new}.imdb,
           {new}.tvdb, {new}.tvmaze, {new}.tmdb, {new}.anchor, {new}.span_low, {new}.span_high)"""
_CATALOG_MERGE = f"""
    INSERT INTO catalog AS c (guid, name, search_name, category, size, files, poster, groups,
                              posted, completion, season, episode, probe_candidate, sources,
                              changed_at, state, imdb, tvdb, tvmaze, tmdb, anchor,
                              span_low, span_high, shown)
    SELECT guid, name, search_name, category, size, files, poster, groups, posted,
           completion, season, episode, probe_candidate, sources, changed_at, state,
           imdb, tvdb, tvmaze, tmdb, anchor, span_low, span_high,
           completion >= 1 OR changed_at <= now() - make_interval(secs => %(quiet)s)
    FROM catalog_new
    ON CONFLICT (guid) DO UPDATE SET
        name = excluded.name, search_name = excluded.search_name,
        category = excluded.category, size = excluded.size, files = excluded.files,
        poster = excluded.poster, groups = excluded.groups, posted = excluded.posted,
        completion = excluded.completion, season = excluded.season,
        episode = excluded.episode, probe_candidate = excluded.probe_candidate,
        sources = excluded.sources, changed_at = excluded.changed_at, state = excluded.state,
        imdb = excluded.imdb, tvdb = excluded.tvdb, tvmaze = excluded.tvmaze,
        tmdb = excluded.tmdb, anchor = excluded.anchor, span_low = excluded.span_low,
        span_high = excluded.span_high, shown = c.shown OR excluded.shown, built_at = now()
    WHERE NOT c.guid = ANY(%(held)s::text[])
      AND ({_CHANGED_ROW.format(new="excluded")} OR (excluded.shown AND NOT c.shown))
"""
# Of the rows a build of some keys made, those the catalog has under the same guid
# made of keys beside them: another release's row, or the same release's made of
# more than this build merged (a guid is a release's key; an edge's job merges
# only its keys). Such a row is not written over: it stays as it is, and its
# sources and the entry's are marked pending again (`MARK_PENDING`), so that the
# next build merges them all (its closure starts from every one of them). The
# keys hashed once (a hashed SubPlan), each row by catalog_guid_key.
_HELD_ROWS = """
    SELECT c.guid, c.sources, n.sources FROM catalog_new AS n JOIN catalog AS c ON c.guid = n.guid
    WHERE EXISTS (SELECT FROM unnest(c.sources) AS s WHERE s NOT IN (SELECT unnest(%b::bytea[])))
"""
# The anchors and guids of the rows the keys went into (merge.Pins), by each of their
# source keys: the keys a merge of them keeps (catalog_keys, then each row by its
# primary key, as _ROW_KEYS). A row written before migration 0044 has none.
_PINS_OF = """
    SELECT DISTINCT k, c.anchor, c.guid FROM catalog AS c, unnest(c.sources) AS k
    WHERE c.id = ANY(ARRAY(SELECT catalog_id FROM catalog_keys WHERE key = ANY(%b)))
      AND c.anchor IS NOT NULL AND k = ANY(%b)
"""
_PINS = """
    SELECT DISTINCT k, c.anchor, c.guid FROM catalog AS c, unnest(c.sources) AS k
    WHERE c.anchor IS NOT NULL
"""
_CATALOG_PRUNE_ALL = "DELETE FROM catalog WHERE guid NOT IN (SELECT guid FROM catalog_new)"
# The rows none of whose source keys has a stored fragment: no build merges them
# again (a whole build's slices are of the keys with fragments), so only a whole
# build deletes them, a page of rows by id at a time. A key has fragments exactly
# when it has a `releases` row: a stored batch writes both for each of its
# releases in one transaction (store/batches.py) and nothing deletes either. So
# each row's keys are looked up in releases' primary key, one probe a key; in
# fragments, partitioned by group, each key probed every group's partition (at
# 200k rows and 20 groups one statement over the whole catalog read 7.7M index
# pages in 6.6 s, at 1M rows 67 s: past the sessions' statement_timeout). The
# page's rows by id = ANY(ARRAY(...)), their primary key: joined to the page, the
# planner hashed the whole catalog. A row a builder changed meanwhile is checked
# again by its new sources (c.sources).
_CATALOG_PRUNE_UNSTORED = """
    WITH page AS (
        SELECT id FROM catalog WHERE id > %(after)s ORDER BY id LIMIT %(rows)s
    ), gone AS (
        DELETE FROM catalog AS c
        WHERE c.id = ANY(ARRAY(SELECT id FROM page))
          AND NOT EXISTS (SELECT FROM releases AS r WHERE r.key = ANY(c.sources))
        RETURNING c.id
    )
    SELECT (SELECT max(id) FROM page), (SELECT count(*) FROM page), (SELECT count(*) FROM gone)
"""
# A row of a posting tool's From whose span meets a pending build's scope
# (core/catalog.Scope: its lows and highs), or any other row (no span).
_IN_SCOPE = """(c.span_low IS NULL OR EXISTS (
        SELECT FROM unnest(%(lows)s::int8[], %(highs)s::int8[]) AS w(low, high)
        WHERE c.span_low <= w.high AND c.span_high >= w.low))"""
# The spans of the rows of a tool's From that keys went into, in a pending build's
# scope (the generations its fresh chunks may join: core/catalog.Closure `reach`).
_ROW_SPANS = f"""
    SELECT DISTINCT c.span_low, c.span_high FROM catalog AS c
    WHERE c.id = ANY(ARRAY(SELECT catalog_id FROM catalog_keys WHERE key = ANY(%(keys)b)))
      AND c.span_low IS NOT NULL AND {_IN_SCOPE}
"""
# The rows made before from keys merged anew that the merge no longer makes
# (catalog_keys: the rows of a key, by a btree).
_CATALOG_PRUNE_OF = """
    DELETE FROM catalog
    WHERE id = ANY(ARRAY(SELECT catalog_id FROM catalog_keys WHERE key = ANY(%b)))
      AND guid NOT IN (SELECT guid FROM catalog_new)
"""
# As _CATALOG_PRUNE_OF in a pending build's scope: rows of a tool's From the scope
# does not meet stay, and so do the rows the build made beyond its scope (those
# crossing it, in catalog_out, and those beyond it, `skipped`).
_CATALOG_PRUNE_SCOPED = f"""
    DELETE FROM catalog AS c
    WHERE c.id = ANY(ARRAY(SELECT catalog_id FROM catalog_keys WHERE key = ANY(%(keys)b)))
      AND c.guid NOT IN (SELECT guid FROM catalog_new)
      AND c.guid NOT IN (SELECT guid FROM catalog_out)
      AND NOT c.guid = ANY(%(skipped)s::text[])
      AND {_IN_SCOPE}
"""
# Of the rows a pending build made across its scope's edge, those it did not make as
# stored (or anew): their keys are built again, all their rows read.
_OUT_CHANGED = f"""
    SELECT o.sources FROM catalog_out AS o LEFT JOIN catalog AS c ON c.guid = o.guid
    WHERE c.guid IS NULL OR {_CHANGED_ROW.format(new="o")}
"""
# Of the rows a pending build made beyond its scope, those stored in it (or with no
# span): made otherwise now, their keys are built again, all their rows read.
_SKIPPED_CHANGED = f"""
    SELECT c.sources FROM catalog AS c
    WHERE c.guid = ANY(%(skipped)s::text[]) AND {_IN_SCOPE}
"""
_SHOW_QUIET = """
    UPDATE catalog SET shown = true
    WHERE NOT shown AND changed_at <= now() - make_interval(secs => %s)
"""
_PENDING = "SELECT key, seq FROM catalog_pending"
_ANY_PENDING = "SELECT EXISTS (SELECT FROM catalog_pending WHERE since <= %s)"
_PENDING_SINCE = "SELECT count(*) FROM catalog_pending WHERE since <= %s"
_NOW = "SELECT now()"
# The built keys' rows locked in key order, as a stored batch upserts them
# (store/batches.py): a delete in the join's order and a batch's upsert in key
# order each held a row the other wanted (a deadlock, a 503 to the edge). A
# row a batch marked again meanwhile has another seq and stays.
_PENDING_DONE = """
    WITH done AS (
        SELECT p.key FROM catalog_pending p
        JOIN unnest(%b::bytea[], %s::bigint[]) AS d(key, seq) ON p.key = d.key AND p.seq = d.seq
        ORDER BY p.key
        FOR UPDATE OF p
    )
    DELETE FROM catalog_pending p USING done WHERE p.key = done.key
"""
# Lists of keys, posters and times go made whole (store/arrays.py): psycopg
# dumps a list element by element, a bytea list as text 70x slower than binary
# (159 ms against 2.4 ms for 10k keys), and arrays.keys makes it in 0.3 ms.
# What the closure of a build's keys reads (core/catalog.py's Closure), each by
# an index: release rows by key (releases_pkey), the keys of the catalog rows
# the keys went into (catalog_keys), the releases of a poster whose span meets
# a window (releases_span, a GiST of the poster's hash, M and span; migration 0030).
# A key's chunk dates by release_times_key, key by key (a lateral look-up): joined
# and grouped instead, a build's thousands of keys were planned as a hash of the
# whole of release_times (at 40M generated lines, 5k keys: 107 ms, 80 ms so).
# With them, the chunks of another poster or M than the row's, each with its own
# (a key without the poster and M in it holds one name's uploads by several, and
# one poster's of several M: a track posted alone, then in its album).
_SPANS = """
    SELECT r.key, r.poster, r.posted, r.latest, r.files_announced, r.no_album, t.starts, t.ends,
           t.other_posters, t.other_ms, t.other_starts, t.other_ends
    FROM releases AS r
    LEFT JOIN LATERAL (
        SELECT array_agg(t.posted ORDER BY t.posted) AS starts,
               array_agg(t.latest ORDER BY t.posted) AS ends,
               array_agg(t.poster) FILTER (WHERE o.other) AS other_posters,
               array_agg(t.files_announced) FILTER (WHERE o.other) AS other_ms,
               array_agg(t.posted) FILTER (WHERE o.other) AS other_starts,
               array_agg(t.latest) FILTER (WHERE o.other) AS other_ends
        FROM release_times AS t,
             LATERAL (SELECT t.poster <> r.poster
                             OR t.files_announced IS DISTINCT FROM r.files_announced AS other) AS o
        WHERE t.key = r.key AND t.posted > 0
    ) AS t ON true
    WHERE r.key = ANY(%b)
"""
# The rows' ids as an array (an InitPlan): each row is then fetched by its
# primary key, where a join of catalog_keys with itself was planned as a hash
# over the whole table once the keys were a few hundred.
_ROW_KEYS = """
    SELECT DISTINCT k FROM catalog AS c, unnest(c.sources) AS k
    WHERE c.id = ANY(ARRAY(SELECT catalog_id FROM catalog_keys WHERE key = ANY(%b)))
"""
# As _ROW_KEYS, of the rows in a pending build's scope: a tool's From's rows of
# other hours and days are not read (each row is still fetched, by its primary
# key, for its span).
_SCOPED_ROW_KEYS = f"""
    SELECT DISTINCT k FROM catalog AS c, unnest(c.sources) AS k
    WHERE c.id = ANY(ARRAY(SELECT catalog_id FROM catalog_keys WHERE key = ANY(%(keys)b)))
      AND {_IN_SCOPE}
"""
# A window finds a release by its whole span (earliest file to latest) and the
# poster and M the release row has (its earliest file's): a release's generation
# may reach from one of its chunks to another days later (a poster's own uploads;
# core/catalog.py's `_runs`). Its chunks of another poster or M are found by
# their own dates (_OTHERS_WINDOW_KEYS, below). Under a posting
# tool's From (`Window.near_runs`) no generation reaches past a run of its key's
# chunks, and a key there may hold every upload of one M for months: such a
# window also wants a chunk of the release (any From and M: the row's are what
# the window matched) within merge.APART_SECONDS of it, a run of chunks being
# at most that far apart (release_times_key: the key's chunks). A chunk of no
# latest date (a release stored before migration 0013, one row by 0027) reaches
# on without end, as its release's span does.
_WINDOW_KEYS = """
    SELECT r.key FROM unnest(%s::text[], %s::int8[], %s::int8[]) AS w(poster, low, high)
    JOIN releases AS r ON hashtext(r.poster) = hashtext(w.poster) AND r.poster = w.poster
      AND r.posted > 0 AND int8range(r.posted, r.latest, '[]') && int8range(w.low, w.high, '[]')
"""
# An album's parts under a shared From (Window.album): of one M, not marked.
_ALBUM_WINDOW_KEYS = """
    SELECT r.key
    FROM unnest(%s::text[], %s::int4[], %s::int8[], %s::int8[]) AS w(poster, m, low, high)
    JOIN releases AS r ON hashtext(r.poster) = hashtext(w.poster) AND r.poster = w.poster
      AND r.files_announced = w.m AND r.posted > 0
      AND int8range(r.posted, r.latest, '[]') && int8range(w.low, w.high, '[]')
      AND NOT r.no_album
"""
# A window finds too the keys holding a chunk of its poster (and M, an album's)
# within it whose release row has another poster (or M): one name's upload by a
# second poster, or an album's track its poster posted alone before, kept apart
# by the merge by each chunk's own poster and M (migration 0047), whose chunks
# lie where the generation does (release_times_span, migration 0047).
# Window by window (a lateral look-up, OFFSET 0 keeps it one): release_times is
# narrow, and joined whole the planner hashed all of it for a few hundred
# windows at 100k chunks, where each window reads a few of them by the index.
_OTHERS_WINDOW_KEYS = """
    SELECT t.key FROM unnest(%s::text[], %s::int8[], %s::int8[]) AS w(poster, low, high)
    CROSS JOIN LATERAL (
        SELECT t.key, t.poster FROM release_times AS t
        WHERE hashtext(t.poster) = hashtext(w.poster) AND t.poster = w.poster AND t.posted > 0
          AND int8range(t.posted, t.latest, '[]') && int8range(w.low, w.high, '[]')
        OFFSET 0
    ) AS t
    JOIN releases AS r ON r.key = t.key AND r.poster <> t.poster
"""
_OTHERS_ALBUM_WINDOW_KEYS = """
    SELECT t.key
    FROM unnest(%s::text[], %s::int4[], %s::int8[], %s::int8[]) AS w(poster, m, low, high)
    CROSS JOIN LATERAL (
        SELECT t.key, t.poster, t.files_announced FROM release_times AS t
        WHERE hashtext(t.poster) = hashtext(w.poster) AND t.poster = w.poster
          AND t.files_announced = w.m AND t.posted > 0
          AND int8range(t.posted, t.latest, '[]') && int8range(w.low, w.high, '[]')
        OFFSET 0
    ) AS t
    JOIN releases AS r ON r.key = t.key
      AND (r.poster <> t.poster OR r.files_announced IS DISTINCT FROM t.files_announced)
"""
# Either, for windows `near_runs` (their own statements: an OR of the two kept
# the planner off releases_span): one chunk at least near the window too.
_NEAR_RUNS = f"""
    AND EXISTS (
        SELECT FROM release_times AS t
        WHERE t.key = r.key AND t.posted > 0
          AND int8range(t.posted, t.latest, '[]')
              && int8range(w.low - {APART_SECONDS}, w.high + {APART_SECONDS}, '[]'))
"""
_WINDOW_KEYS_NEAR_RUNS = _WINDOW_KEYS + _NEAR_RUNS
_ALBUM_WINDOW_KEYS_NEAR_RUNS = _ALBUM_WINDOW_KEYS + _NEAR_RUNS
# By (an album's window, near runs): an album's take its M after the poster.
_WINDOW_STATEMENTS = {
    (False, False): _WINDOW_KEYS,
    (False, True): _WINDOW_KEYS_NEAR_RUNS,
    (True, False): _ALBUM_WINDOW_KEYS,
    (True, True): _ALBUM_WINDOW_KEYS_NEAR_RUNS,
}
_OTHERS_STATEMENTS = {False: _OTHERS_WINDOW_KEYS, True: _OTHERS_ALBUM_WINDOW_KEYS}
_NO_ALBUM = """
    WITH marked AS (
        SELECT key FROM releases WHERE key = ANY(%b) AND NOT no_album ORDER BY key FOR UPDATE
    )
    UPDATE releases r SET no_album = true FROM marked WHERE r.key = marked.key AND NOT r.no_album
"""
_FILL_LATEST = """
    UPDATE releases AS r SET latest = f.latest
    FROM unnest(%b::bytea[], %s::int8[]) AS f(key, latest)
    WHERE r.key = f.key AND r.latest IS NULL
"""
_FILL_TIMES = """
    UPDATE release_times AS t SET latest = f.latest
    FROM unnest(%b::bytea[], %s::int8[]) AS f(key, latest)
    WHERE t.key = f.key AND t.latest IS NULL
"""
_CHANGED = "SELECT key, updated_at FROM releases"
_CHANGED_OF = _CHANGED + " WHERE key = ANY(%b)"
# The catalog build is shared out by poster: a key's shard is its release's
# poster's (a build's closure is its posters' releases, so it stays in its
# shards), and a builder holds the advisory lock (4, shard) of every shard its
# keys are in while it reads and writes them. Pending builds only try locks
# (never wait: no deadlock); a whole build waits for every shard, in order.
SHARDS = 64
# A poster's shard, in SQL (`{poster}`: its column); migration 0029 has it too.
PENDING_SHARD = f"(hashtext({{poster}}) & {SHARDS - 1})"
_LOCK_CLASS = 4
_SHARD = PENDING_SHARD.format(poster="r.poster")
# A pending key's shard is kept with it (catalog_pending.shard, as a batch or a
# probe marks it: store/batches.py, store/probes.py).
_PENDING_SHARDS = """
    SELECT DISTINCT shard FROM catalog_pending
    WHERE shard IS NOT NULL AND since <= now() - make_interval(secs => %s)
"""
_PENDING_IN = "SELECT key, seq FROM catalog_pending WHERE shard = ANY(%s)"
_PENDING_OF = "SELECT key, seq FROM catalog_pending WHERE key = ANY(%b)"
# The dates of what batches stored under pending keys (store/batches.py), where known.
_FRESH_IN = """
    SELECT key, low, high FROM catalog_pending WHERE shard = ANY(%s) AND high IS NOT NULL
"""
# Those a batch stored chunks under since their last build (`stored`, migration
# 0039), whether or not the dates of those chunks are known.
_STORED_OF = "SELECT key FROM catalog_pending WHERE key = ANY(%b) AND stored"
# Pending keys marked without a shard: no stored release had them (a probe's
# outcome for a generation's key: a repost merged from its first key's chunks;
# its row's guid is that key), by catalog_pending_shard.
_ORPHANS = "SELECT key, seq FROM catalog_pending WHERE shard IS NULL"
# Keys marked pending (again), each with its release's shard (none when no release
# has it: a generation's key a probe marks), with no dates (low/high NULL: the build
# looks around each key's whole span); in key order, as a batch marks its keys
# (store/batches.py) and _PENDING_DONE takes them: never a row each of the other's.
# A held row's keys (here) and a probe's outcome (store/probes.py) pass `stored`
# false; the catalog sweep (store/sweep.py) true, as a batch marks its own (a build
# that reaches such a key through a row or a window leaves it pending, 0039).
MARK_PENDING = f"""
    INSERT INTO catalog_pending (key, shard, stored)
    SELECT k, (SELECT {PENDING_SHARD.format(poster="r.poster")} FROM releases AS r WHERE r.key = k),
           %b
    FROM unnest(%b::bytea[]) AS k ORDER BY k
    ON CONFLICT (key) DO UPDATE SET seq = nextval('catalog_pending_seq'),
        shard = coalesce(excluded.shard, catalog_pending.shard), low = NULL, high = NULL,
        stored = catalog_pending.stored OR excluded.stored
"""
# Keys marked pending by a stored batch (store/batches.py) or a probe's outcome
# (store/probes.py): said once per transaction, delivered as it commits, to every
# coordinator process (coordinator/landings.py), whose builder and held build asks
# wake (its CatalogDue). Never a notification per key: "something is pending" is
# all a listener needs (it looks in the database).
PENDING_CHANNEL = "uidx_catalog_pending"
NOTIFY_PENDING = f"SELECT pg_notify('{PENDING_CHANNEL}', '')"
_GUID_SOURCES = "SELECT DISTINCT unnest(sources) FROM catalog WHERE guid = ANY(%s)"
_SHARDS_OF = f"SELECT DISTINCT {_SHARD} FROM releases r WHERE key = ANY(%b)"
_TRY_LOCK = f"SELECT s FROM unnest(%s::int[]) AS s WHERE pg_try_advisory_lock({_LOCK_CLASS}, s)"
# Waiting for each, in order (never a deadlock among waiters): a whole build's every
# shard, an edge's rows written over its job's shards.
_LOCK_IN_ORDER = f"""
    SELECT count(pg_advisory_lock({_LOCK_CLASS}, s))
    FROM (SELECT s FROM unnest(%s::int[]) AS s ORDER BY s) AS shards
"""
_UNLOCK = f"SELECT pg_advisory_unlock({_LOCK_CLASS}, s) FROM unnest(%s::int[]) AS s"
_ROW = """
    SELECT id, guid, name, category, size, files, poster, groups, posted, completion,
           season, episode, grabs, sources, state, imdb, tvdb, tvmaze, tmdb
    FROM catalog
"""
# Every match by the indexes' bitmaps, sorted: `posted + 0` is the order of no
# index (catalog_newest, catalog_category), so the planner cannot walk one
# newest first on a guess, and needs no setting changed (a round trip each).
_BITMAP_PAGE = _ROW + " WHERE {} ORDER BY posted + 0 DESC, id DESC LIMIT %s OFFSET %s"
# A search with words that the bitmaps serve reads every match to sort them: the
# same read counts them (a window over all the matches, before LIMIT), where a
# count of its own would build the words' bitmap a second time (2M rows: ~15 ms
# for two words of one show). Only the matches' ids and dates go through the
# window and the sort; the page's rows are then read by id.
_BITMAP_COUNTED = """
    SELECT c.id, c.guid, c.name, c.category, c.size, c.files, c.poster, c.groups, c.posted,
           c.completion, c.season, c.episode, c.grabs, c.sources, c.state, c.imdb, c.tvdb,
           c.tvmaze, c.tmdb, m.total
    FROM (SELECT id, posted, least(count(*) OVER (), %s) AS total FROM catalog
          WHERE {} ORDER BY posted + 0 DESC, id DESC LIMIT %s OFFSET %s) AS m
    JOIN catalog AS c ON c.id = m.id
    ORDER BY m.posted DESC, m.id DESC
"""
_BITMAP_ANY = "SELECT FROM catalog WHERE {} ORDER BY posted + 0 LIMIT 1"
# q's whole words, period by period (migration 0026's catalog_search_keys: a
# word's key per period of ~24 days), newest first: each period's matches by
# its keys' bitmap, sorted (`posted + 0`: the order of no index, so that no
# walk of catalog_offered evaluates the keys row by row), until LIMIT has the
# page's end and the count's. The periods are apart in time, so the matches
# come in the order of (posted DESC, id DESC) as a whole: the newest n of them
# are the page's rows and, up to _COUNT_MAX, the total. A period without the
# words costs a look in the index's entry tree (10M rows, 150 periods: a rare q
# walks them all in a few ms). Only periods that hold a row are walked, each
# found from the one before by catalog_newest (one index probe): a release dated
# far from the others (a Date header in the year 9999, any bigint from a node)
# made a walk of every period between, billions of them, till the statement's
# timeout (a 503 to every q). The walk stops at maxage's period. The page is
# read from the walked ids; its first row carries the count (NULL columns but the
# count: past the last match).
_WALK = """
    WITH RECURSIVE floor AS (
        SELECT catalog_period(coalesce(%s::int8, -9223372036854775808)) AS period
    ),
    periods(period) AS (
        SELECT catalog_period(max(posted)) FROM catalog HAVING max(posted) IS NOT NULL
        UNION ALL
        SELECT older.period
        FROM periods AS p, floor,
             LATERAL (SELECT catalog_period(c.posted) AS period FROM catalog AS c
                      WHERE c.posted < (p.period << 21) ORDER BY c.posted DESC LIMIT 1) AS older
        WHERE p.period > floor.period
    ),
    walked AS MATERIALIZED (
        SELECT m.id, m.posted
        FROM periods, floor,
             LATERAL (SELECT id, posted FROM catalog
                      WHERE catalog_search_keys(words, season, posted)
                            @> catalog_query_keys(%s, '|' || periods.period) AND {}
                      ORDER BY posted + 0 DESC, id DESC) AS m
        WHERE periods.period >= floor.period
        LIMIT %s)
    SELECT c.id, c.guid, c.name, c.category, c.size, c.files, c.poster, c.groups, c.posted,
           c.completion, c.season, c.episode, c.grabs, c.sources, c.state, c.imdb, c.tvdb,
           c.tvmaze, c.tmdb, t.total
    FROM (SELECT count(*) AS total FROM walked) AS t
    LEFT JOIN (SELECT id, posted FROM walked ORDER BY posted DESC, id DESC LIMIT %s OFFSET %s)
        AS p ON true
    LEFT JOIN catalog AS c ON c.id = p.id
    ORDER BY p.posted DESC, p.id DESC
"""
_GRAB = "UPDATE catalog SET grabs = grabs + 1 WHERE guid = %s"
# A search's total: its matches counted, up to _COUNT_MAX, by the conditions of its
# page (offset and limit play no part: every page of a query says the same). Only a
# full page is counted (a short one is the last: its end is the total). The count
# costs the conditions' bitmap (1M rows: ~11 ms for a word's 25k matches) and a
# heap visit per row counted, hence the cap: ten pages of 100 (the most a page
# holds), and below the 10k at which NZBHydra2 takes an id search's results for an
# indexer that ignored the id. Past it a total says "this many or more".
_COUNT_MAX = 1_000
_COUNT = "SELECT count(*) FROM (SELECT FROM catalog WHERE {} LIMIT %s) AS matches"
# The rows by state, from what each change of the catalog appended (migration
# 0031: statement triggers), not a scan of the catalog at every status read.
_STATES = """
    SELECT coalesce(sum(n) FILTER (WHERE shown AND state = 'whole'), 0),
           coalesce(sum(n) FILTER (WHERE shown AND state = 'repairable'), 0),
           coalesce(sum(n) FILTER (WHERE shown AND state = 'broken'), 0),
           coalesce(sum(n) FILTER (WHERE NOT shown), 0)
    FROM catalog_counts
"""
# Folded into one row per (state, shown) by a build's write once there are more
# than _FOLD_ROWS, by one builder at a time (the others go on: a try lock); rows
# another transaction appends meanwhile are not in this one's snapshot and stay.
_FOLD_ROWS = 256
_FOLD_LOCK = (5, 0)
_FOLD_WANTED = "SELECT count(*) > %s AND pg_try_advisory_xact_lock(%s, %s) FROM catalog_counts"
_FOLD_COUNTS = """
    WITH folded AS (DELETE FROM catalog_counts RETURNING state, shown, n)
    INSERT INTO catalog_counts (state, shown, n)
    SELECT state, shown, sum(n) FROM folded GROUP BY state, shown HAVING sum(n) <> 0
"""
_BROKEN = _ROW + " WHERE state = 'broken' AND shown ORDER BY posted DESC, id DESC LIMIT %s"
_STORED = "SELECT count(*), max(stored_at) FROM batches"
# A release is a probe candidate as the indexer says (a batch's candidate),
# as `uidx index` says it; the build's own candidates (renames.more_probe) not.
_PROBED = "SELECT release_key FROM probe_candidates WHERE source = 'batch'"
_SIZES = """
    SELECT coalesce(sum(pg_total_relation_size(c)), 0)::bigint,
           (SELECT coalesce(sum(segments), 0)::bigint FROM fragments)
    FROM (SELECT 'releases'::regclass AS c
          UNION ALL SELECT inhrelid::regclass FROM pg_inherits
          WHERE inhparent = 'fragments'::regclass) AS tables
"""


# The segments of the fragments a CatalogStore keeps unpacked (see `chunks`).
UNPACKED_SEGMENTS = 2_000_000
_NUMBERS = attrgetter("numbers")
# A stored fragment, as the unpacked ones are kept: its release key, range and
# batch (its row's key within its group: a range is of one group), and its length.
FragmentId = tuple[bytes, int, int, int]


@attrs.define(eq=False)
class CatalogStore:
    """Stored release chunks read back.

    Fragments stay unpacked, by which stored fragment they are (`FragmentId`),
    up to `unpacked_segments` segments, the least recently read dropped first:
    those of the batches this process stored (`remember`: the node API hands
    over what it inflated to check them, so a pending build neither reads nor
    inflates its batches' fragments again), and those of the keys a build
    asked, as a pending build merges again the keys around those a batch
    touched, whose fragments the builds before mostly read too. A stored
    fragment is never changed (a batch is stored once, its rows' keys refuse
    another), and the same bytes unpack to the same files, so what a
    fragment is never depends on what is kept.
    """

    pool: ConnectionPool
    pure: bool = False  # fragments.unpack's pure code, even where the compiled one is built
    unpacked_segments: int = UNPACKED_SEGMENTS  # the most kept unpacked
    _unpacked: dict[FragmentId, tuple[FileChunk, ...]] = attrs.field(init=False, factory=dict)
    _held: int = attrs.field(init=False, default=0)  # their segments
    _lock: threading.Lock = attrs.field(init=False, factory=threading.Lock)

    def chunks(self, keys: Sequence[bytes] | None = None) -> Iterator[ReleaseChunk]:
        """Every stored release chunk (of the release `keys` only, when given),
        rebuilt from its fragment."""
        with self.pool.connection() as conn:
            if keys is None:
                release_rows = conn.execute(_RELEASES).fetchall()
                rows = conn.execute(_FRAGMENTS, binary=True).fetchall()
                pieces: Iterable[tuple[bytes, tuple[FileChunk, ...], Said]] = (
                    (
                        bytes(key),
                        tuple(fragments.unpack(bytes(packed), pure=self.pure)),
                        _said(poster, head_name, announced),
                    )
                    for key, poster, head_name, announced, packed in rows
                )
            else:
                release_rows = conn.execute(_RELEASES_OF, (arrays.keys(keys),)).fetchall()
                pieces = self._pieces(conn, keys)
        releases = {bytes(r[0]): r for r in release_rows}
        for key, files, said in pieces:
            yield stored_chunk(key, releases[key], said, files)

    def _pieces(
        self, conn: psycopg.Connection[tuple[Any, ...]], keys: Sequence[bytes]
    ) -> list[tuple[bytes, tuple[FileChunk, ...], Said]]:
        """The files of each fragment of `keys` (in order of range and batch): the kept
        ones, the others read, unpacked and kept; with what each chunk says of itself."""
        listed = [
            ((bytes(key), int(range_id), int(first), int(length)), _said(poster, head, announced))
            for key, range_id, first, length, poster, head, announced in conn.execute(
                _FRAGMENT_IDS_OF, (arrays.keys(keys),)
            ).fetchall()
        ]
        ids = [i for i, _ in listed]
        with self._lock:
            kept = {i: files for i in ids if (files := self._unpacked.pop(i, None)) is not None}
            self._unpacked.update(kept)  # the most recently read now
        missing = sorted({i[0] for i in ids if i not in kept})
        if missing:
            # Binary: packed bytes as they are, not hex (twice the bytes, and the
            # server's hex_encode was 2% of its CPU in a bench-scale run).
            for key, range_id, first, length, packed in conn.execute(
                _FRAGMENTS_OF, (arrays.keys(missing),), binary=True
            ).fetchall():
                i = (bytes(key), int(range_id), int(first), int(length))
                if i not in kept:
                    kept[i] = tuple(fragments.unpack(bytes(packed), pure=self.pure))
                    with self._lock:
                        self._keep(i, kept[i])
        return [(i[0], kept[i], said) for i, said in listed if i in kept]

    def packed(self, keys: Sequence[bytes]) -> tuple[str, list[tuple[bytes, bytes, Said]]]:
        """The release rows of `keys` as JSON and their stored fragments as they are (key,
        packed, what the chunk says of itself; in order of range and batch): what an
        edge's build job reads
        (wire/buildjob.py).

        The rows are one JSON array of [key (hex), head name, poster, groups, M]
        arrays that PostgreSQL writes and the coordinator passes on untouched:
        a row and a tuple each cost 4x the CPU.
        """
        with self.pool.connection() as conn:
            row = conn.execute(_RELEASES_JSON_OF, (arrays.keys(keys),)).fetchone()
            releases = "[]" if row is None else str(row[0])
            stored = [
                (bytes(key), bytes(packed), _said(poster, head_name, announced))
                for key, poster, head_name, announced, packed in conn.execute(
                    _PACKED_OF, (arrays.keys(keys),), binary=True
                ).fetchall()
            ]
        return releases, stored

    def remember(self, range_id: int, batch_first: int, releases: Iterable[PackedRelease]) -> None:
        """Keep unpacked the fragments of a batch just stored (its releases as checked,
        with what they inflated to), for the builds that merge them."""
        for release in releases:
            if release.inflated is None:
                continue
            files = tuple(fragments.files_of(release.inflated, pure=self.pure))
            with self._lock:
                self._keep((release.key, range_id, batch_first, len(release.fragment)), files)

    def _keep(self, fragment: FragmentId, files: tuple[FileChunk, ...]) -> None:
        if fragment in self._unpacked:
            return
        self._unpacked[fragment] = files
        self._held += _segments(files)
        while self._held > self.unpacked_segments and len(self._unpacked) > 1:
            oldest = next(iter(self._unpacked))
            self._held -= _segments(self._unpacked.pop(oldest))

    def probed(self, keys: Sequence[bytes] | None = None) -> list[bytes]:
        """The release keys a batch reported a probe candidate for (of `keys`, when given),
        as `uidx index` marks them; the build's own candidates (renames.more_probe) not."""
        with self.pool.connection() as conn:
            rows = (
                conn.execute(_PROBED)
                if keys is None
                else conn.execute(_PROBED_OF, (arrays.keys(keys),))
            ).fetchall()
        return [bytes(key) for (key,) in rows]

    def bytes_per_segment(self) -> tuple[int, int]:
        """(bytes of the catalog tables with their indexes and TOAST, segments stored)."""
        with self.pool.connection() as conn:
            row = conn.execute(_SIZES).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


@attrs.frozen
class CatalogRow:
    """A catalog release: what the newznab API lists of it (`item`), and what the
    catalog keeps beside (its row id, the release keys its NZB is merged from)."""

    id: int
    item: Item
    sources: tuple[bytes, ...]

    @property
    def guid(self) -> str:
        return self.item.guid


@attrs.frozen
class ReleaseStates:
    """The catalog's releases shown, by what a downloader makes of them
    (core/completion.py), and those not shown yet."""

    whole: int
    repairable: int
    broken: int
    waiting: int  # incomplete and not quiet yet: not shown

    @property
    def shown(self) -> int:
        return self.whole + self.repairable + self.broken


@attrs.frozen
class Search:
    """What a search asks for (the newznab API's parameters, checked).

    Attributes:
        words: q, as words that must all be in the name (empty: any).
        categories: newznab ids; a parent takes its subcategories (empty: any).
        season, episode: tvsearch's numbers (None: any).
        aired: a daily show's air date as a name's words write it ("2023 05 12":
            those words in a row in the name; None: any).
        since: only releases posted at or after this unix time (maxage).
        min_size, max_size: bytes (None: no bound).
        group: only releases posted to this group.
        limit, offset: the page.
        broken: broken releases too (completion.State); by default only whole and
            repairable ones, what a downloader can finish.
        ids: the media ids of one title (imdbid, tvdbid, tvmazeid, tmdbid): a
            release whose NFO named any of them matches; none given: any release.
    """

    words: str = ""
    categories: tuple[int, ...] = ()
    season: int | None = None
    episode: int | None = None
    aired: str | None = None
    since: int | None = None
    min_size: int | None = None
    max_size: int | None = None
    group: str | None = None
    limit: int = 100
    offset: int = 0
    broken: bool = False
    ids: MediaIds = NO_IDS


def _changed(records: Sequence[tuple[Any, ...]]) -> dict[bytes, datetime]:
    return {bytes(key): when for key, when in records}


def _pins(records: Iterable[tuple[Any, ...]]) -> dict[bytes, Pins]:
    found: dict[bytes, list[tuple[str, bytes]]] = {}
    for key, anchor, guid in records:
        found.setdefault(bytes(key), []).append((anchor, bytes.fromhex(guid)))
    return {key: tuple(sorted(pairs)) for key, pairs in found.items()}


def _rows(records: Sequence[tuple[Any, ...]]) -> list[CatalogRow]:
    return [
        CatalogRow(
            id=int(r[0]),
            item=Item(
                guid=str(r[1]),
                name=str(r[2]),
                category=int(r[3]),
                size=int(r[4]),
                files=int(r[5]),
                poster=str(r[6]),
                groups=tuple(r[7]),
                posted=int(r[8]),
                completion=float(r[9]),
                season=None if r[10] is None else int(r[10]),
                episode=None if r[11] is None else int(r[11]),
                grabs=int(r[12]),
                state=str(r[14]),
                ids=MediaIds(*r[15:19]),
            ),
            sources=tuple(bytes(k) for k in r[13]),
        )
        for r in records
    ]


# A condition of a search's WHERE with its one parameter (_NO_PARAMETER: none).
_Condition = tuple[sql.Composable, object]
_NO_PARAMETER = object()
# What a search offers unless asked for broken releases too: a literal, never a
# parameter, so that a prepared statement's generic plan still proves the
# partial index's predicate (catalog_offered).
_OFFERED: _Condition = (sql.SQL("state <> 'broken'"), _NO_PARAMETER)


def _word_conditions(words: Sequence[str], *, partial: bool) -> list[_Condition]:
    """Every word in full (full text, catalog_words_episode: beside an id; the walk and
    tvsearch ask catalog_search_keys), or, `partial`, those of
    _TRIGRAM_MIN characters or more anywhere in the name (pg_trgm, catalog_trigrams)."""
    parts = [w for w in words if partial and len(w) >= _TRIGRAM_MIN]
    whole = [w for w in words if w not in parts]
    conditions: list[_Condition] = []
    if whole:
        # The words hold letters and digits only: the parser splits them as it split
        # the names, and no tsquery operator can be among them.
        conditions.append((sql.SQL("words @@ plainto_tsquery('simple', %s)"), " ".join(whole)))
    # No word holds % or _ (search_name breaks on both): nothing to escape.
    conditions += [(sql.SQL("search_name LIKE %s"), f"%{w}%") for w in parts]
    return conditions


def _season_keys(words: Sequence[str], season: int) -> _Condition:
    """Every word in full in a row of `season` (catalog_search_keys' season keys: each
    word's list holds that season's rows only)."""
    keys = sql.SQL("catalog_search_keys(words, season, posted) @> catalog_query_keys(%s, {})")
    return keys.format(sql.Literal(f"|s{season:d}")), " ".join(words)


def _walk(
    conn: psycopg.Connection[Any],
    words: Sequence[str],
    filters: Sequence[_Condition],
    search: Search,
) -> tuple[list[tuple[Any, ...]], int] | None:
    """The page of q's whole words and its total (up to _COUNT_MAX) from the periods'
    keys, newest first (see _WALK); None when no release matches (at any offset)."""
    statement, params = _walk_statement(words, filters, search)
    records = conn.execute(statement, params).fetchall()
    total = int(records[0][-1])
    if not total:
        return None
    return [r[:-1] for r in records if r[0] is not None], min(total, _COUNT_MAX)


def _walk_statement(
    words: Sequence[str], filters: Sequence[_Condition], search: Search
) -> tuple[sql.Composed, list[object]]:
    """_WALK for q's whole `words` and the search's `filters`, with its parameters."""
    where, params = _where(filters)
    wanted = max(_COUNT_MAX, search.offset + search.limit + 1)
    return sql.SQL(_WALK).format(where), [
        search.since,
        " ".join(words),
        *params,
        wanted,
        search.limit + 1,
        search.offset,
    ]


def _has_partial(words: Sequence[str]) -> bool:
    return any(len(w) >= _TRIGRAM_MIN for w in words)


def _filters(search: Search) -> list[_Condition]:
    """The conditions of a search but q."""
    conditions: list[_Condition] = []
    if search.categories:
        # A parent takes its subcategories: one = ANY over ids, which the index serves.
        ids = sorted({c for asked in search.categories for c in (asked, *subcategories(asked))})
        conditions.append((sql.SQL("category = ANY(%s)"), ids))
    # Season and episode as int4, their columns' type: btree_gin's operator class
    # holds no cross-type operator, and psycopg sends a small int as int2, which
    # would leave them out of catalog_words_episode's scan (filtered row by row).
    for column, value, op in (
        ("season", search.season, "= %s::int4"),
        ("episode", search.episode, "= %s::int4"),
        ("posted", search.since, ">= %s"),
        ("size", search.min_size, ">= %s"),
        ("size", search.max_size, "<= %s"),
    ):
        if value is not None:
            conditions.append((sql.SQL("{} " + op).format(sql.Identifier(column)), value))
    any_id = _any_id(search.ids)
    if any_id is not None:
        conditions.append(any_id)
    if search.group is not None:
        conditions.append((sql.SQL("%s = ANY(groups)"), search.group))
    if search.aired is not None:
        # On the rows its words found: the date's words in a row, whole words.
        aired = " ".join(search.aired.split())  # words of letters and digits only
        conditions.append((sql.SQL("' ' || search_name || ' ' LIKE %s"), f"% {aired} %"))
    if not search.broken:
        conditions.append(_OFFERED)
    return conditions


def _any_id(ids: MediaIds) -> _Condition | None:
    """A release whose NFO named any of `ids`: the ids of one film or show, which
    Radarr, Sonarr and Prowlarr send together (`tmdbid=603&imdbid=0133093`), and
    an NFO names one or some of. Each arm by its column's partial index
    (catalog_imdb, ...; `imdb = 133093` proves `imdb IS NOT NULL`), OR-ed in one
    bitmap; the ids are checked integers, written as literals. None: no id of a
    searched column asked."""
    arms = [
        sql.SQL("{} = {}").format(sql.Identifier(column), sql.Literal(value))
        for column in ("imdb", "tvdb", "tvmaze", "tmdb")
        if (value := getattr(ids, column)) is not None
    ]
    if not arms:
        return None
    return sql.SQL("({})").format(sql.SQL(" OR ").join(arms)), _NO_PARAMETER


def _where(conditions: Sequence[_Condition]) -> tuple[sql.Composable, list[object]]:
    # Only releases shown: complete, or quiet long enough (see CatalogTable).
    where = sql.SQL(" AND ").join([sql.SQL("shown"), *(c for c, _ in conditions)])
    return where, [value for _, value in conditions if value is not _NO_PARAMETER]


def _page(
    conn: psycopg.Connection[Any], conditions: Sequence[_Condition], search: Search
) -> list[tuple[Any, ...]]:
    """The page's rows and one past it, newest first (id breaks ties), as the
    planner likes (a search without words: the newest-first indexes serve it).

    One row past the page tells whether more follow; the total is then a lower
    bound (clients page on until a page comes back short), exact once the last
    page is reached. A count of the matches would cost more than the page (a
    common word: 40 ms of 1M rows).
    """
    where, params = _where(conditions)
    page = sql.SQL(_ROW + " WHERE {} ORDER BY posted DESC, id DESC LIMIT %s OFFSET %s")
    return conn.execute(page.format(where), [*params, search.limit + 1, search.offset]).fetchall()


def _id_page(
    conn: psycopg.Connection[Any], conditions: Sequence[_Condition], search: Search
) -> list[tuple[Any, ...]]:
    """The page of a search by id and one row past it: the id's few rows by its partial
    index, sorted (never a walk of the newest rows for an id, on a wrong guess of how
    many have it)."""
    where, params = _where(conditions)
    page = sql.SQL(_BITMAP_PAGE).format(where)
    return conn.execute(page, [*params, search.limit + 1, search.offset]).fetchall()


def _page_end(search: Search, records: Sequence[tuple[Any, ...]]) -> int | None:
    """The total when the page tells it: a short page is the last (none past the
    page's end), an empty first page matches nothing; else None (a count is needed)."""
    if 0 < len(records) <= search.limit or (not records and search.offset == 0):
        return min(search.offset + len(records), _COUNT_MAX)
    return None


def _total(
    conn: psycopg.Connection[Any],
    conditions: Sequence[_Condition],
    search: Search,
    records: Sequence[tuple[Any, ...]],
) -> int:
    """How many releases match, up to _COUNT_MAX: told by the page (`_page_end`), else
    a count of the conditions the page was found by."""
    end = _page_end(search, records)
    if end is not None:
        return end
    where, params = _where(conditions)
    row = conn.execute(sql.SQL(_COUNT).format(where), [*params, _COUNT_MAX]).fetchone()
    return 0 if row is None else int(row[0])


def _partial_total(
    conn: psycopg.Connection[Any],
    conditions: Sequence[_Condition],
    search: Search,
    records: Sequence[tuple[Any, ...]],
) -> int:
    """The partial-word retry's total, a count under its statement timeout; past it
    (the trigrams narrow little: many matches), _COUNT_MAX."""
    end = _page_end(search, records)
    if end is not None:
        return end
    try:
        with _settings(conn, f"SET LOCAL statement_timeout = {_PARTIAL_TIMEOUT_MS}"):
            return _total(conn, conditions, search, records)
    except psycopg.errors.QueryCanceled:
        logger.info(
            "search: q %r: the partial-word count took over %d ms",
            search.words,
            _PARTIAL_TIMEOUT_MS,
        )
        return _COUNT_MAX


@contextlib.contextmanager
def _settings(conn: psycopg.Connection[Any], statement: str) -> Iterator[None]:
    """The block under `statement`'s transaction-local settings, in a savepoint that
    is rolled back after it, so that they end with it. Rows fetched in it are kept."""
    with conn.transaction() as savepoint:
        conn.execute(statement)
        yield
        raise psycopg.Rollback(savepoint)


def _word_page(
    conn: psycopg.Connection[Any], conditions: Sequence[_Condition], search: Search
) -> tuple[list[tuple[Any, ...]], int | None] | None:
    """The page of a search with words that the periods' walk (`_walk`) does not serve
    (parts of words, a tvsearch's season keys, words beside an id): the newest rows
    looked at first, else every match by the indexes' bitmaps; None when no release
    matches (at any offset).
    With the page, its total when the bitmaps counted it (up to _COUNT_MAX), else None.

    The planner guesses a word's matches from statistics and errs both ways. A
    word it has no statistics for it takes for 0.27% of the rows, and walks the
    newest-first index for them: 550 ms over 1M rows when there are none. Two
    words of one show it takes for independent (700 rows for 25k), and its
    bitmap then fetches and sorts them all. So it is not left to pick: the
    newest _WINDOW_PAGES pages of rows are looked at first (2-3 ms for 5k
    rows), where the page of a word in 2% of the names is. When they do not
    fill the page, the matches are few (under 1 in _WINDOW_PAGES of the newest
    rows), and the bitmaps fetch and sort them all, at a cost in proportion to
    them. Neither walks the whole table. The window is skipped when it would
    surely miss: a tvsearch, or a q the planner expects under a tenth of a page
    in it (_WINDOW_HOPE; its guess of a rare pair is low, which then costs the
    bitmaps, as before, but no walk).
    """
    where, params = _where(conditions)
    wanted = search.offset + search.limit + 1
    window = min(_WINDOW_PAGES * wanted, _WINDOW_MAX)
    # A show's season or episode (tvsearch) is a handful of releases, never a
    # page among the newest rows: straight to the bitmaps (the words' season keys
    # in one scan of catalog_search_keys), as when the planner expects under a
    # tenth of a page there.
    if (
        search.season is None
        and search.episode is None
        and not search.ids
        and _expected(conn, where, params, window) >= _WINDOW_HOPE * wanted
    ):
        newest = sql.SQL(_WINDOW).format(where)
        cursor = conn.execute(newest, [window, *params, search.limit + 1, search.offset])
        page = cursor.fetchall()
        if len(page) > search.limit:
            return page, None
    bitmaps = sql.SQL(_BITMAP_COUNTED).format(where)
    counted = conn.execute(
        bitmaps, [_COUNT_MAX, *params, search.limit + 1, search.offset]
    ).fetchall()
    if counted:
        return [r[:-1] for r in counted], int(counted[0][-1])
    if search.offset == 0:
        return None
    # Past the last match: no row to tell the total (counted apart) or whether any matches.
    found = conn.execute(sql.SQL(_BITMAP_ANY).format(where), params).fetchone()
    return ([], None) if found is not None else None


def _expected(
    conn: psycopg.Connection[Any], where: sql.Composable, params: list[object], window: int
) -> float:
    """The planner's guess of the matches among the newest `window` rows (0.3 ms)."""
    # EXPLAIN takes no bound parameters: the values are quoted into it by psycopg.
    explain = sql.SQL("EXPLAIN (FORMAT JSON) " + _WINDOW_ROWS).format(where)
    row = psycopg.ClientCursor(conn).execute(explain, [window, *params]).fetchone()
    return 0.0 if row is None else float(row[0][0]["Plan"]["Plan Rows"])


def _partial_page(
    conn: psycopg.Connection[Any], conditions: Sequence[_Condition], search: Search
) -> tuple[list[tuple[Any, ...]], int | None] | None:
    """The partial-word retry's page (None: no match), or None when it takes longer
    than _PARTIAL_TIMEOUT_MS (logged): a nice extra that never holds a request up."""
    try:
        with _settings(conn, f"SET LOCAL statement_timeout = {_PARTIAL_TIMEOUT_MS}"):
            return _word_page(conn, conditions, search)
    except psycopg.errors.QueryCanceled:
        logger.info(
            "search: q %r: the partial-word retry took over %d ms",
            search.words,
            _PARTIAL_TIMEOUT_MS,
        )
        return None


def copy_entries(conn: psycopg.Connection[Any], entries: Iterable[CatalogEntry], table: str) -> int:
    """Copy catalog rows into `table` (the build's catalog_new; scripts/bench-search
    fills `catalog` itself so), in binary; how many."""
    made = 0
    with conn.cursor().copy(sql.SQL(_CATALOG_COPY).format(sql.Identifier(table))) as copy:
        copy.set_types(_CATALOG_TYPES)
        for entry in entries:
            copy.write_row(_catalog_record(entry))
            made += 1
    return made


def _catalog_record(entry: CatalogEntry) -> tuple[object, ...]:
    return (
        entry.guid,
        entry.name,
        entry.search_name,
        entry.category,
        entry.size,
        entry.files,
        entry.poster,
        list(entry.groups),
        entry.posted,
        entry.completion,
        entry.season,
        entry.episode,
        entry.probe_candidate,
        list(entry.sources),
        entry.changed_at,
        entry.state,
        entry.ids.imdb,
        entry.ids.tvdb,
        entry.ids.tvmaze,
        entry.ids.tmdb,
        entry.anchor or None,
        *(entry.span or NO_SPAN),
    )


@attrs.frozen
class Written:
    """What one write of catalog rows did.

    Attributes:
        rows: rows the build made (kept releases).
        written: of those, rows inserted or changed (the others were as they were).
        pruned: rows deleted that the merge no longer makes.
        shown: rows shown for having been quiet long enough (and not complete).
        held: guids of rows made of keys beside the build's, kept as they were
            (their keys pending again; see `_HELD_ROWS`).
        beyond: keys pending again for rows of a tool's From made otherwise beyond
            a pending build's scope (core/catalog.Scope).
    """

    rows: int
    written: int
    pruned: int
    shown: int
    held: tuple[str, ...] = ()
    beyond: int = 0


@attrs.frozen
class PrunedPage:
    """A page of catalog rows checked for a stored key (`CatalogTable.prune_unstored`).

    Attributes:
        last: the page's last id (the one it started after when it was empty).
        checked: rows in the page (fewer than asked: the catalog's end).
        deleted: of those, rows none of whose keys has a stored fragment, deleted.
    """

    last: int
    checked: int
    deleted: int


def _segments(files: Sequence[FileChunk]) -> int:
    return sum(map(len, map(_NUMBERS, files)))


def _seqs(records: Sequence[tuple[Any, ...]]) -> dict[bytes, int]:
    return {bytes(key): int(seq) for key, seq in records}


@attrs.define(eq=False)
class ShardLocks:
    """The advisory locks of the catalog build's shards one builder holds (see SHARDS).

    Attributes:
        held: the shards locked.
    """

    _conn: psycopg.Connection[Any]
    held: set[int] = attrs.field(factory=set)

    @property
    def connection(self) -> psycopg.Connection[Any]:
        """The locks' connection (autocommit), which the build's closure reads on too."""
        return self._conn

    @property
    def jobs(self) -> BuildJobs:
        """The edges' build jobs, on this connection."""
        return BuildJobs(self._conn)

    def pending_shards(self, waited_seconds: float = 0.0) -> list[int]:
        """The shards with pending keys (ones pending at least `waited_seconds`)."""
        rows = self._conn.execute(_PENDING_SHARDS, (float(waited_seconds),)).fetchall()
        return sorted(int(s) for (s,) in rows)

    def try_lock(self, shards: Iterable[int]) -> set[int]:
        """Lock those of `shards` no other builder holds and no edge's job reserved
        (never waits); the ones locked."""
        wanted = sorted(set(shards) - self.held)
        got = {int(s) for (s,) in self._conn.execute(_TRY_LOCK, (wanted,)).fetchall()}
        # Asked with the lock held: a job reserves its shards under their locks.
        reserved = self.jobs.reserved(got) if got else set()
        if reserved:
            self._conn.execute(_UNLOCK, (sorted(reserved),))
            got -= reserved
        self.held |= got
        return got

    def lock_in_order(self, shards: Iterable[int]) -> None:
        """Lock `shards`, waiting for each in order (an edge's job's rows written)."""
        wanted = sorted(set(shards) - self.held)
        self._conn.execute(_LOCK_IN_ORDER, (wanted,))
        self.held |= set(wanted)

    def lock_all(self) -> None:
        """Every shard, waiting for each in order (a whole build)."""
        self.lock_in_order(range(SHARDS))

    def unlock(self, shards: Iterable[int] | None = None) -> None:
        """Give up `shards` (every shard held: None)."""
        given = sorted(self.held if shards is None else set(shards) & self.held)
        if given and not self._conn.closed:
            self._conn.execute(_UNLOCK, (given,))
        self.held -= set(given)

    def pending(self, shards: Iterable[int]) -> dict[bytes, int]:
        """The pending keys of `shards`, with their seq."""
        return _seqs(self._conn.execute(_PENDING_IN, (sorted(shards),), binary=True).fetchall())

    def fresh(self, shards: Iterable[int]) -> dict[bytes, tuple[int, int]]:
        """Of the pending keys of `shards`, the earliest and latest date of the chunks
        batches stored under each since its last build, where known (not all of them:
        a key marked otherwise, an undated chunk)."""
        rows = self._conn.execute(_FRESH_IN, (sorted(shards),), binary=True).fetchall()
        return {bytes(key): (int(low), int(high)) for key, low, high in rows}

    def stored_of(self, keys: Sequence[bytes]) -> set[bytes]:
        """Those of `keys` pending because a batch stored chunks under them since their
        last build (the dates of those chunks known or not: an undated chunk, a mark
        of a row's keys or a probe's outcome since)."""
        rows = self._conn.execute(_STORED_OF, (arrays.keys(keys),), binary=True).fetchall()
        return {bytes(key) for (key,) in rows}

    def pending_of(self, keys: Sequence[bytes]) -> dict[bytes, int]:
        """Those of `keys` that are pending, with their seq."""
        return _seqs(self._conn.execute(_PENDING_OF, (arrays.keys(keys),), binary=True).fetchall())

    def orphans(self) -> dict[bytes, int]:
        """Pending keys marked without a shard (no stored release had them: a
        generation's key), with their seq."""
        return _seqs(self._conn.execute(_ORPHANS).fetchall())

    def guid_sources(self, keys: Sequence[bytes]) -> set[bytes]:
        """The source keys of the catalog rows whose guids are `keys`."""
        rows = self._conn.execute(_GUID_SOURCES, ([k.hex() for k in keys],)).fetchall()
        return {bytes(key) for (key,) in rows}

    def shards_of(self, keys: Sequence[bytes]) -> set[int]:
        """The shards of the stored releases of `keys`."""
        return {int(s) for (s,) in self._conn.execute(_SHARDS_OF, (arrays.keys(keys),)).fetchall()}


@attrs.define(eq=False)
class CatalogTable:
    """The searchable catalog (`catalog` rows): read for a build, written, searched.

    A stored batch marks its release keys pending (store/batches.py); the
    coordinator's build (coordinator/catalog_build.py) reads them, asks what
    else to merge with them (spans, the keys of their rows, windows),
    merges (core/catalog.py) and writes the rows back (`write`). A row is
    shown (listed and searched) once its release is complete, or once no
    chunk of it came for `quiet_seconds`, with its completion; once shown
    it stays shown. A search offers the rows whose state (core/completion.py)
    is whole or repairable, and broken ones only when asked (`Search.broken`).

    Attributes:
        pool: the database's connection pool.
    """

    pool: ConnectionPool

    @contextmanager
    def shards(self) -> Iterator[ShardLocks]:
        """The build's shard locks, on a connection held for the build (every lock it
        took is given up at the end; a builder that dies gives them up with it)."""
        with self.pool.connection() as conn:
            # Autocommit: session locks need no transaction, and one left open
            # while the build works on other connections would be ended by the
            # idle-in-transaction timeout (a long build lost its lock so).
            conn.autocommit = True
            locks = ShardLocks(conn)
            try:
                yield locks
            finally:
                locks.unlock()
                conn.autocommit = False

    def any_pending(self, since: datetime) -> bool:
        """Whether keys pending since `since` or before (the database's clock) wait for a
        build."""
        with self.pool.connection() as conn:
            row = conn.execute(_ANY_PENDING, (since,)).fetchone()
        return bool(row and row[0])

    def pending_since(self, since: datetime) -> int:
        """How many keys pending since `since` or before wait for a build."""
        with self.pool.connection() as conn:
            row = conn.execute(_PENDING_SINCE, (since,)).fetchone()
        return int(row[0]) if row else 0

    def now(self) -> datetime:
        """The database's clock."""
        with self.pool.connection() as conn:
            row = conn.execute(_NOW).fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]

    def pending(self) -> dict[bytes, int]:
        """The keys batches touched since the last build, with their seq."""
        with self.pool.connection() as conn:
            return {bytes(k): int(seq) for k, seq in conn.execute(_PENDING).fetchall()}

    @contextmanager
    def _reading(self, locks: ShardLocks | None) -> Iterator[psycopg.Connection[Any]]:
        """A connection to read on: the build's own (`locks`: autocommit, one round trip
        a statement, no checkout), else one of the pool's."""
        if locks is not None:
            yield locks.connection
            return
        with self.pool.connection() as conn:
            yield conn

    def spans(self, keys: Sequence[bytes], locks: ShardLocks | None = None) -> dict[bytes, Span]:
        """The stored releases of `keys`: poster, earliest and latest file's date (read on
        the connection of `locks` when given)."""
        with self._reading(locks) as conn:
            # Binary: keys as they are (not hex both ways), the times' arrays without text.
            rows = conn.execute(_SPANS, (arrays.keys(keys),), binary=True).fetchall()
        # bigint columns come as ints; both arrays are one aggregate's, of one length.
        return {
            key: Span(
                poster,
                posted,
                latest,
                announced,
                no_album,
                tuple(zip(starts, ends, strict=True)) if starts else (),
                tuple(zip(o_posters, o_ms, o_starts, o_ends, strict=True)) if o_posters else (),
            )
            for (
                key, poster, posted, latest, announced, no_album, starts, ends,
                o_posters, o_ms, o_starts, o_ends,
            ) in rows
        }  # fmt: skip

    def row_keys(
        self, keys: Sequence[bytes], locks: ShardLocks | None = None, scope: Scope | None = None
    ) -> set[bytes]:
        """Every source key of the catalog rows any of `keys` went into (of those in
        `scope` only, when given: core/catalog.Scope), read on the connection of `locks`
        when given."""
        with self._reading(locks) as conn:
            if scope is None:
                rows = conn.execute(_ROW_KEYS, (arrays.keys(keys),), binary=True).fetchall()
            else:
                asked = {"keys": arrays.keys(keys), **_scope_params(scope)}
                rows = conn.execute(_SCOPED_ROW_KEYS, asked, binary=True).fetchall()
        return {bytes(key) for (key,) in rows}

    def row_spans(
        self, keys: Sequence[bytes], scope: Scope | None, locks: ShardLocks | None = None
    ) -> list[tuple[int, int]]:
        """The spans of the catalog rows of a tool's From that `keys` went into and that
        meet `scope` (core/catalog.Scope; none: none), read on the connection of `locks`
        when given."""
        if scope is None or not keys:
            return []
        with self._reading(locks) as conn:
            asked = {"keys": arrays.keys(keys), **_scope_params(scope)}
            rows = conn.execute(_ROW_SPANS, asked, binary=True).fetchall()
        return [(int(low), int(high)) for low, high in rows]

    def window_keys(self, windows: Sequence[Window], locks: ShardLocks | None = None) -> set[bytes]:
        """The keys of the releases of each window's poster whose span meets it (of
        its M and not marked no album's, for an album's window; with a chunk near
        it, for a window `near_runs`), and of those holding a chunk of its poster
        (and M) within it under another poster's row; read on the connection of
        `locks` when given."""
        rows: list[tuple[Any, ...]] = []
        with self._reading(locks) as conn:
            for (album, near_runs), statement in _WINDOW_STATEMENTS.items():
                asked = [
                    w for w in windows if (w.album is not None, w.near_runs) == (album, near_runs)
                ]
                if asked:
                    rows += conn.execute(statement, _window_columns(asked), binary=True).fetchall()
            for album, statement in _OTHERS_STATEMENTS.items():
                asked = [w for w in windows if (w.album is not None) == album]
                if asked:
                    rows += conn.execute(statement, _window_columns(asked), binary=True).fetchall()
        return {bytes(key) for (key,) in rows}

    def pins(
        self, keys: Sequence[bytes] | None = None, locks: ShardLocks | None = None
    ) -> dict[bytes, Pins]:
        """The anchors and guids of the catalog rows (of `keys` only, when given) by each
        of their source keys (merge.Pins, sorted), read on the connection of `locks` when
        given: the keys a merge of those keys keeps."""
        with self._reading(locks) as conn:
            if keys is None:
                rows = conn.execute(_PINS, binary=True).fetchall()
            else:
                asked = arrays.keys(keys)
                rows = conn.execute(_PINS_OF, (asked, asked), binary=True).fetchall()
        return _pins(rows)

    def mark_no_album(self, keys: Sequence[bytes]) -> int:
        """Mark releases whose files are not all an album's (core/catalog.py's
        `no_albums`); how many were not marked before."""
        if not keys:
            return 0
        with self.pool.connection() as conn:
            return int(conn.execute(_NO_ALBUM, (arrays.keys(keys),)).rowcount)

    def changed(self, keys: Sequence[bytes] | None = None) -> dict[bytes, datetime]:
        """When each key's chunks last changed (of `keys`, when given)."""
        with self.pool.connection() as conn:
            if keys is None:
                return _changed(conn.execute(_CHANGED).fetchall())
            return _changed(conn.execute(_CHANGED_OF, (arrays.keys(keys),)).fetchall())

    def fill_latest(self, latest: Mapping[bytes, int]) -> int:
        """Set the latest file date of the releases stored before it was kept."""
        with self.pool.connection() as conn:
            conn.execute(_FILL_TIMES, (arrays.keys(latest), arrays.int8s(latest.values())))
            return int(
                conn.execute(
                    _FILL_LATEST, (arrays.keys(latest), arrays.int8s(latest.values()))
                ).rowcount
            )

    def prune_unstored(self, after: int, rows: int) -> PrunedPage:
        """Of the `rows` catalog rows next by id after `after`, delete those none of
        whose source keys has a stored fragment (one statement, reading those rows
        and a primary key look-up of each of their keys)."""
        with self.pool.connection() as conn:
            row = conn.execute(_CATALOG_PRUNE_UNSTORED, {"after": after, "rows": rows}).fetchone()
        assert row is not None  # an aggregate's one row
        last, checked, deleted = row
        return PrunedPage(after if last is None else int(last), int(checked), int(deleted))

    def show_quiet(self, quiet_seconds: float) -> int:
        """Show the rows no chunk came for in `quiet_seconds`; how many."""
        with self.pool.connection() as conn:
            return int(conn.execute(_SHOW_QUIET, (quiet_seconds,)).rowcount)

    def write(
        self,
        entries: Iterable[CatalogEntry],
        quiet_seconds: float,
        pending: Mapping[bytes, int],
        keys: Sequence[bytes] | None,
        scope: Scope | None = None,
    ) -> Written:
        """Replace the rows made from `keys` (every row: None) by `entries`, in one
        transaction, and take `pending` (at the seq read) as built.

        Rows are matched by guid (a release's grabs stay); a row as it was is
        left alone; a row made before from `keys` that is not among `entries`
        is deleted. A row the catalog has from keys beside `keys` is not
        written over (`_HELD_ROWS`): its keys and the entry's are pending again
        (marked once the rows are committed, in a transaction of their own).
        With a pending build's `scope`, rows of a tool's From are written and
        deleted as core/catalog.Scope says: only those it holds are written,
        the keys of those made otherwise beyond it are pending again, and only
        rows it meets are deleted.
        """
        inside: Iterable[CatalogEntry] = entries
        crossing: list[CatalogEntry] = []
        skipped: list[str] = []
        if scope is not None:
            inside = []
            for entry in entries:
                span = entry.span
                if span is None or scope.holds(span):
                    inside.append(entry)
                elif scope.meets(span):
                    crossing.append(entry)
                else:
                    skipped.append(entry.guid)
        again: set[bytes] = set()
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(_CATALOG_TEMP)
            made = copy_entries(conn, inside, "catalog_new")
            held: dict[str, set[bytes]] = {}
            if keys is not None:
                for guid, theirs, ours in conn.execute(_HELD_ROWS, (arrays.keys(keys),)):
                    held[guid] = {bytes(k) for k in (*theirs, *ours)}
            merge = {"quiet": quiet_seconds, "held": sorted(held)}
            written = int(conn.execute(_CATALOG_MERGE, merge).rowcount)
            if keys is None:
                pruned = conn.execute(_CATALOG_PRUNE_ALL).rowcount
            elif scope is None:
                pruned = conn.execute(_CATALOG_PRUNE_OF, (arrays.keys(keys),)).rowcount
            else:
                conn.execute(_CATALOG_OUT_TEMP)
                copy_entries(conn, crossing, "catalog_out")
                asked = {"keys": arrays.keys(keys), "skipped": skipped, **_scope_params(scope)}
                for (sources,) in conn.execute(_OUT_CHANGED).fetchall():
                    again.update(bytes(k) for k in sources)
                if skipped:
                    for (sources,) in conn.execute(_SKIPPED_CHANGED, asked).fetchall():
                        again.update(bytes(k) for k in sources)
                pruned = conn.execute(_CATALOG_PRUNE_SCOPED, asked).rowcount
            quiet = int(conn.execute(_SHOW_QUIET, (quiet_seconds,)).rowcount)
            conn.execute(_PENDING_DONE, (arrays.keys(pending), arrays.int8s(pending.values())))
            fold = conn.execute(_FOLD_WANTED, (_FOLD_ROWS, *_FOLD_LOCK)).fetchone()
            if fold is not None and fold[0]:
                conn.execute(_FOLD_COUNTS)
        beyond = len(again)
        if held or again:
            # In a transaction of its own, after the rows: marked in the write's, after
            # _PENDING_DONE locked the keys taken, these were a second pass of locks in
            # key order, and a batch marking keys of both between the two passes
            # deadlocked with it (a 503). A stop between the two leaves the held rows as
            # they were until the catalog sweep marks their keys. Marked without fresh
            # dates: their next build reads all their rows.
            again.update(*held.values())
            with self.pool.connection() as conn, conn.transaction():
                conn.execute(MARK_PENDING, (False, arrays.keys(sorted(again))))
        made += len(crossing) + len(skipped)
        return Written(made, written, int(pruned), quiet, tuple(sorted(held)), beyond)

    def search(self, search: Search) -> tuple[int, list[CatalogRow]]:
        """Releases that match a search, newest first (see "How q matches" above).

        Args:
            search: what is asked.

        Returns:
            (how many releases match, counted up to _COUNT_MAX, the same on every
            page; the page of them).
        """
        words = query_words(search.words)
        filters = _filters(search)
        with self.pool.connection() as conn:
            if not words:
                page = (_id_page if search.ids else _page)(conn, filters, search)
                return _total(conn, filters, search, page), _rows(page[: search.limit])
            whole = [*_word_conditions(words, partial=False), *filters]
            if search.ids:
                found = _word_page(conn, whole, search)
            elif search.season is not None:
                found = _word_page(conn, [_season_keys(words, search.season), *filters], search)
            else:
                found = _walk(conn, words, filters, search)
            records: Sequence[tuple[Any, ...]] = []
            total = 0
            if found is not None:
                records, counted = found
                total = _total(conn, whole, search, records) if counted is None else counted
            elif _has_partial(words):
                partial = [*_word_conditions(words, partial=True), *filters]
                retried = _partial_page(conn, partial, search)
                if retried is not None:
                    records, counted = retried
                    total = (
                        _partial_total(conn, partial, search, records)
                        if counted is None
                        else counted
                    )
        return total, _rows(records[: search.limit])

    def row(self, guid: str, *, shown: bool = False, broken: bool = True) -> CatalogRow | None:
        """The catalog row of a guid, or None; with `shown`, only a row that is shown
        (what the newznab API hands out: a row not shown yet is no search's either);
        without `broken`, not a broken row (one no search offers: `Search.broken`)."""
        where = " WHERE guid = %s" + (" AND shown" if shown else "")
        where += "" if broken else " AND state <> 'broken'"
        with self.pool.connection() as conn:
            records = conn.execute(_ROW + where, (guid,)).fetchall()
        rows = _rows(records)
        return rows[0] if rows else None

    def count(self) -> int:
        """Releases in the searchable catalog (shown)."""
        return self.counts()[0]

    def counts(self) -> tuple[int, int]:
        """(releases shown, releases waiting: incomplete and not quiet yet)."""
        states = self.states()
        return states.shown, states.waiting

    def states(self) -> ReleaseStates:
        """The releases shown, by state, and those waiting (catalog_counts' few rows)."""
        with self.pool.connection() as conn:
            row = conn.execute(_STATES).fetchone()
        assert row is not None
        return ReleaseStates(*(int(n) for n in row))

    def broken(self, limit: int) -> list[CatalogRow]:
        """The newest broken releases shown (catalog_broken), at most `limit`."""
        with self.pool.connection() as conn:
            return _rows(conn.execute(_BROKEN, (limit,)).fetchall())

    def stored_mark(self) -> tuple[int, object]:
        """What changes when a batch is stored: (batches, the latest stored_at)."""
        with self.pool.connection() as conn:
            row = conn.execute(_STORED).fetchone()
        assert row is not None
        return int(row[0]), row[1]

    def grab(self, guid: str) -> None:
        """Count one grab (an NZB fetched) of a release."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL synchronous_commit TO off")  # a grab is no fsync's worth
            conn.execute(_GRAB, (guid,))


def _scope_params(scope: Scope) -> dict[str, arrays.Array]:
    """A scope's spans as the statements' lows and highs (_IN_SCOPE)."""
    return {"lows": arrays.int8s(scope.lows), "highs": arrays.int8s(scope.highs)}


def _window_columns(windows: Sequence[Window]) -> list[arrays.Array]:
    """The window statements' parameters: posters, an album's M (when they are an
    album's), lows and highs."""
    columns = [arrays.texts([w.poster for w in windows])]
    if windows[0].album is not None:
        columns.append(arrays.int4s([w.album or 0 for w in windows]))
    columns += [arrays.int8s([w.low for w in windows]), arrays.int8s([w.high for w in windows])]
    return columns


def _said(poster: object, head_name: object, announced: object) -> Said:
    """What a stored chunk says of itself (its fragment row's columns), or None for one
    stored before migration 0047 (its poster NULL)."""
    if poster is None:
        return None
    return (
        str(poster),
        None if head_name is None else str(head_name),
        None if announced is None else int(str(announced)),
    )
