-- tvsearch at catalog scale (issue 27): q, season and episode in one GIN scan.
-- catalog_words (q) and catalog_episode (season, episode) were two bitmaps
-- ANDed, and an episode's bitmap holds that episode of every show: a
-- twentieth of the TV rows, built row by row (2M rows: 50k entries, ~20 ms; at
-- 10M five times that) for the few rows of one show. In one GIN index the
-- words' and the numbers' posting lists are intersected inside the scan,
-- which skips through the longer lists and hands only the matches on. Its
-- first column serves q alone as catalog_words did (a GIN index answers any
-- subset of its columns), and season or episode alone (tvsearch without q).
-- btree_gin gives int4 its GIN operator class (a trusted extension, as
-- btree_gist and pg_trgm are).
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX catalog_words_episode ON catalog USING gin (words, season, episode);
DROP INDEX catalog_words;
DROP INDEX catalog_episode;
