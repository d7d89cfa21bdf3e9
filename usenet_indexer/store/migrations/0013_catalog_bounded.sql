-- The catalog build takes in a batch at a cost bounded by the batch, not by
-- what its posters posted before (coordinator/catalog_build.py): a touched
-- release is merged again with its repost keys, with the releases the
-- catalog made it one upload with, and with the releases of its poster
-- posted within uploads.TOGETHER_SECONDS of it (the only ones `link` can join
-- to it), each found through an index.

-- The latest date of a release's files, beside `posted` (the earliest): the
-- span an upload's parts are looked for in. NULL for releases stored before
-- this file: their span is open-ended (found by every later window, which is
-- right but costs) until `uidx catalog build` fills it in.
ALTER TABLE releases ADD COLUMN latest bigint;
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE INDEX releases_span ON releases USING gist (poster, int8range(posted, latest, '[]'))
    WHERE posted > 0;
DROP INDEX IF EXISTS releases_poster;

-- Which catalog rows a release key went into (a key's chunks can make several
-- rows: the generations of a repost chain). Kept by triggers from
-- catalog.sources, so no writer can forget it; a btree finds the rows of a
-- build's keys where `sources && keys` read the whole table (the GIN index
-- went unused past a few hundred keys).
CREATE TABLE catalog_keys (
    key bytea NOT NULL,
    catalog_id bigint NOT NULL REFERENCES catalog (id) ON DELETE CASCADE,
    PRIMARY KEY (key, catalog_id)
);
CREATE INDEX catalog_keys_row ON catalog_keys (catalog_id);
INSERT INTO catalog_keys (key, catalog_id)
    SELECT DISTINCT k, id FROM catalog, unnest(sources) AS k;

CREATE FUNCTION catalog_keys_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM catalog_keys WHERE catalog_id = NEW.id AND key <> ALL (NEW.sources);
    END IF;
    INSERT INTO catalog_keys (key, catalog_id)
        SELECT DISTINCT k, NEW.id FROM unnest(NEW.sources) AS k
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER catalog_keys_made AFTER INSERT ON catalog
    FOR EACH ROW EXECUTE FUNCTION catalog_keys_follow();
CREATE TRIGGER catalog_keys_moved AFTER UPDATE OF sources ON catalog
    FOR EACH ROW WHEN (OLD.sources IS DISTINCT FROM NEW.sources)
    EXECUTE FUNCTION catalog_keys_follow();
DROP INDEX IF EXISTS catalog_sources;
