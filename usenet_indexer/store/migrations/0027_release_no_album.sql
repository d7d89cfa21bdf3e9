-- Under a posting tool's default From (uploads.SHARED_FROMS) uploads.link
-- joins only an album's parts, of one M. The catalog build marks the
-- releases there whose files are not all an album's (uploads.album_files; a
-- release's files only grow, so the mark stays true), and its closure looks
-- for an album's parts by poster, M and span among the unmarked only
-- (core/catalog.py's Closure): a busy default From's thousands of uploads
-- an hour are no longer merged again with every batch that touches it.
-- Releases stored before this file are unmarked (looked at, as before) until
-- a build merges them again, or `uidx catalog build` marks them all.
ALTER TABLE releases ADD COLUMN no_album boolean NOT NULL DEFAULT false;
DROP INDEX IF EXISTS releases_span;
CREATE INDEX releases_span ON releases
    USING gist (poster, files_announced, int8range(posted, latest, '[]'))
    WHERE posted > 0;
