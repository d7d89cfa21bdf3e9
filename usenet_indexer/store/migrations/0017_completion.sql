-- Completion a downloader can trust (issue 26): each catalog row says whether
-- its release is whole, repairable from its PAR2 recovery, or broken
-- (core/completion.py). The newznab API and the status page offer whole and
-- repairable releases; broken ones stay in the catalog, shown on the page, and
-- offered only with offer_broken_releases.

-- Rows made before this file: whole when every announced segment was seen,
-- else broken until the build judges them again (every release is pending
-- below): never offered on a guess. A build always writes the state; the
-- default is for rows written by hand (benchmarks, tests of the search).
ALTER TABLE catalog ADD COLUMN state text NOT NULL DEFAULT 'whole'
    CHECK (state IN ('whole', 'repairable', 'broken'));
UPDATE catalog SET state = 'broken' WHERE completion < 1;

-- What feeds and searches ask by default (shown, not broken), newest first,
-- as a walk of an index that holds only those rows: RSS without q, and a
-- category's newest (`category = ANY(...)` filters that walk, as it filters
-- catalog_newest's, which serves the same with broken releases offered). A
-- partial index never walks past broken rows, however many of the newest
-- there are (a takedown's backfill).
CREATE INDEX catalog_offered ON catalog (posted DESC, id DESC)
    WHERE shown AND state <> 'broken';
-- The broken releases the status page lists, newest first.
CREATE INDEX catalog_broken ON catalog (posted DESC, id DESC) WHERE state = 'broken';

-- A par2 index's slice size, read from its main packet by a probe: the block
-- size the completion rule divides by, where the volumes' sizes only estimate it.
ALTER TABLE probe_candidates ADD COLUMN found_slice_bytes bigint;

INSERT INTO catalog_pending (key) SELECT key FROM releases ON CONFLICT (key) DO NOTHING;
