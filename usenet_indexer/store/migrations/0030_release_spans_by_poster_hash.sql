-- The windows' GiST (0028) keyed by a hash of the poster, not the poster's text.
-- Every release a batch stores or merges again is (re)inserted into this index
-- (its span changes, so the update is never HOT), and btree_gist's text keys
-- made that the dearest part of storing a batch: at 10M generated articles
-- (62k releases), 3,000 new rows took 60-89 ms with the text key, 24 ms with
-- an int4 hash, 11-13 ms with the primary key alone. The windows ask for
-- hashtext(poster) and check the poster itself (store/catalog.py: a hash shared
-- by two posters reads both, and keeps only the asked one's).
DROP INDEX IF EXISTS releases_span;
CREATE INDEX releases_span ON releases
    USING gist (hashtext(poster), files_announced, int8range(posted, latest, '[]'))
    WHERE posted > 0;
