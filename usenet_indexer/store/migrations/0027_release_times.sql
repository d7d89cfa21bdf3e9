-- The catalog build's look-around (core/catalog.py's Closure) bounded by
-- the batch, not by the history of the keys it touches:
--
-- * release_times: when each stored release chunk was posted (its earliest
--   and latest file), one row per chunk a batch stored, with the poster and
--   M of its key. A key posted again days later (a popular album's track
--   under PowerPost's default From, the same file name uploaded again) had
--   one span from its first to its last post in `releases`, and the window
--   around it read every release of that poster in between; a window is now
--   asked around each run of its chunks, and a release is found by a window
--   only where one of its chunks meets it.
-- * releases.no_album: under a posting tool's default From
--   (uploads.SHARED_FROMS) uploads.link joins only an album's parts, of one
--   M. The catalog build marks the releases there whose files are not all an
--   album's (uploads.album_files; files only grow, so the mark stays true),
--   and the closure looks for an album's parts among the unmarked of that M
--   only: a busy default From's rar uploads are no longer merged again with
--   every batch that touches the hour they were posted in.
--
-- Releases stored before this file get one row each, their whole span (as
-- the closure read them before), and no mark until a build merges them
-- again or `uidx catalog build` marks them all.
CREATE TABLE release_times (
    key bytea NOT NULL,
    poster text NOT NULL,
    files_announced integer,
    posted bigint NOT NULL,
    latest bigint
);
INSERT INTO release_times (key, poster, files_announced, posted, latest)
    SELECT key, poster, files_announced, posted, latest FROM releases WHERE posted > 0;
CREATE INDEX release_times_key ON release_times (key);
CREATE INDEX release_times_span ON release_times
    USING gist (poster, files_announced, int8range(posted, latest, '[]'))
    WHERE posted > 0;
DROP INDEX IF EXISTS releases_span;
ALTER TABLE releases ADD COLUMN no_album boolean NOT NULL DEFAULT false;
