-- The catalog build's windows (core/catalog.py's Closure) find a release by
-- its whole span again, with the poster and M of its row, not by the chunks
-- of release_times (0027), which now only tell the windows asked around a
-- touched key's runs of chunks:
--
-- * one generation of a key may hold files posted days apart (a poster's own
--   upload filled in later), and uploads.link joins to it a part of its
--   poster and M posted in between, which no chunk of it is near;
-- * the merge gives every chunk of a release its row's From and M (the
--   earliest file's), where release_times kept each chunk's own.
CREATE INDEX releases_span ON releases
    USING gist (poster, files_announced, int8range(posted, latest, '[]'))
    WHERE posted > 0;
DROP INDEX IF EXISTS release_times_span;
