-- The catalog's rows by state and shown, kept by the statements that change them.
-- `uidx status`, the status page and every /metrics scrape counted them with a
-- scan of the whole catalog (its rows carry the search words and names: at 10M
-- releases, gigabytes read per scrape). Each statement that inserts, updates or
-- deletes catalog rows appends what it changed here (statement triggers with
-- transition tables: one aggregate per statement, none per row); a reader sums
-- these few rows; a build folds them into one per (state, shown) now and then
-- (store/catalog.py, _FOLD_COUNTS). Appended, not updated in place: two builders
-- writing at once never wait on one counter row.
CREATE TABLE catalog_counts (
    id bigserial PRIMARY KEY,
    state text NOT NULL,
    shown boolean NOT NULL,
    n bigint NOT NULL
);

CREATE FUNCTION catalog_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO catalog_counts (state, shown, n)
    SELECT state, shown, count(*) FROM new_rows GROUP BY state, shown;
    RETURN NULL;
END $$;

CREATE FUNCTION catalog_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO catalog_counts (state, shown, n)
    SELECT state, shown, -count(*) FROM old_rows GROUP BY state, shown;
    RETURN NULL;
END $$;

-- An update that leaves every row's state and shown as they were (a grab's count,
-- a name) appends nothing.
CREATE FUNCTION catalog_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO catalog_counts (state, shown, n)
    SELECT state, shown, sum(n) FROM (
        SELECT state, shown, 1 AS n FROM new_rows
        UNION ALL
        SELECT state, shown, -1 FROM old_rows
    ) AS changed
    GROUP BY state, shown HAVING sum(n) <> 0;
    RETURN NULL;
END $$;

-- (A trigger with transition tables takes one event.)
CREATE TRIGGER catalog_counts_insert AFTER INSERT ON catalog
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_counts_inserted();
CREATE TRIGGER catalog_counts_delete AFTER DELETE ON catalog
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_counts_deleted();
CREATE TRIGGER catalog_counts_update AFTER UPDATE ON catalog
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_counts_updated();

INSERT INTO catalog_counts (state, shown, n)
SELECT state, shown, count(*) FROM catalog GROUP BY state, shown;

CREATE FUNCTION catalog_counts_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM catalog_counts;
    RETURN NULL;
END $$;
CREATE TRIGGER catalog_counts_truncate AFTER TRUNCATE ON catalog
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_counts_truncated();
