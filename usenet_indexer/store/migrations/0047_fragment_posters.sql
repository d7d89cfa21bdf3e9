-- What each stored release chunk says of itself: its poster, head and [i/M]
-- (core/batch.ReleaseChunk). A release key without the poster in it (files linked
-- by their names, subject.py's headless basis) holds every poster's upload of one
-- name, and the merge tells them apart by these (merge.py: two posters' uploads of
-- one name); the release row keeps only its earliest file's. NULL poster: stored
-- before this migration, when the release row's stood for every chunk of its key.
ALTER TABLE fragments
    ADD COLUMN poster text,
    ADD COLUMN head_name text,
    ADD COLUMN files_announced int4;
-- The chunks of one poster near a window (store/catalog.py's window statements):
-- a key holding a second poster's upload of one name is found by that poster's
-- windows through it, its row keeping the first's poster. By a hash of the poster,
-- as releases_span (0030: btree_gist's text keys made the inserts dear).
CREATE INDEX release_times_span ON release_times
    USING gist (hashtext(poster), files_announced, int8range(posted, latest, '[]'))
    WHERE posted > 0;
