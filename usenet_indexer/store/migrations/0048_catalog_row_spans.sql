-- What a pending build reads and writes of a posting tool's default From (issue 25):
-- a key such a From's uploads share (random names keyed by poster and M) has a row
-- per upload ever stored, and a build of its newest upload read them all. A row's
-- span (its files' earliest and latest date; NULL: not a tool's From, a file not
-- dated, or written before this migration) lets a build read, write and delete only
-- the rows near what batches stored (store/catalog.py's scope statements). NULL is
-- read and written by every build, as before.
ALTER TABLE catalog
    ADD COLUMN span_low int8,
    ADD COLUMN span_high int8;
-- A build job's scope (core/catalog.Scope) as the closure drew it, for the write
-- of the edge's rows: NULL, none (every row of its keys).
ALTER TABLE build_jobs
    ADD COLUMN scope_lows int8[],
    ADD COLUMN scope_highs int8[];
