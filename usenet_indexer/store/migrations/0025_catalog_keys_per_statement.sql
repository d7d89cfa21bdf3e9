-- catalog_keys (0013) kept per statement, not per row (issue 25: PostgreSQL's
-- CPU). A catalog build writes its rows in one INSERT ... ON CONFLICT; the
-- row-level trigger ran one plpgsql call and one INSERT per catalog row, and
-- the foreign key one check per key row (a plan each, under the pool's
-- force_custom_plan, and a FOR KEY SHARE lock written into the catalog row):
-- 4.3 of the 6.2 s the build's catalog writes took over a 3M-line
-- bench-scale run, whose PostgreSQL CPU fell by a quarter without them. Statement
-- triggers read the statement's rows from its transition tables and write the
-- keys in one statement each; the delete trigger does what ON DELETE CASCADE
-- did. Only these triggers write catalog_keys, so the foreign key checked
-- nothing they do not keep.

DROP TRIGGER catalog_keys_made ON catalog;
DROP TRIGGER catalog_keys_moved ON catalog;
DROP FUNCTION catalog_keys_follow();
ALTER TABLE catalog_keys DROP CONSTRAINT catalog_keys_catalog_id_fkey;

CREATE FUNCTION catalog_keys_made() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- New rows have new ids: no key of theirs can be there yet.
    INSERT INTO catalog_keys (key, catalog_id)
        SELECT DISTINCT k, n.id FROM made AS n, unnest(n.sources) AS k;
    RETURN NULL;
END
$$;

CREATE FUNCTION catalog_keys_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only rows whose sources changed: a grab, a row shown or rebuilt as it
    -- was, touches no key.
    DELETE FROM catalog_keys AS ck
    USING was AS o JOIN became AS n ON n.id = o.id
    WHERE ck.catalog_id = n.id AND o.sources IS DISTINCT FROM n.sources
      AND ck.key <> ALL (n.sources);
    INSERT INTO catalog_keys (key, catalog_id)
        SELECT DISTINCT k, n.id
        FROM was AS o JOIN became AS n ON n.id = o.id, unnest(n.sources) AS k
        WHERE o.sources IS DISTINCT FROM n.sources
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE FUNCTION catalog_keys_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM catalog_keys WHERE catalog_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;

CREATE TRIGGER catalog_keys_made AFTER INSERT ON catalog
    REFERENCING NEW TABLE AS made
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_keys_made();
CREATE TRIGGER catalog_keys_moved AFTER UPDATE ON catalog
    REFERENCING OLD TABLE AS was NEW TABLE AS became
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_keys_moved();
CREATE TRIGGER catalog_keys_gone AFTER DELETE ON catalog
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_keys_gone();
