-- catalog_keys_moved (0025) found the rows whose sources changed by joining the
-- statement's old rows with its new ones (`was JOIN became ON id`), and plpgsql
-- keeps a statement without parameters on one plan per session, made at its
-- first call (or the first after an invalidation: an autoanalyze) for that
-- call's transition tables. A first call that changed one row made the join a
-- nested loop, quadratic in the rows of every later build's write: 2.8 s of
-- PostgreSQL's time in 6 statements at 20M articles (auto_explain over
-- bench-scale). A first call of many rows made the opposite mistake: a hash of
-- the whole of catalog_keys at every later call however few its rows (55 ms for
-- a one-row change at 400k keys, against 0.3 ms). Now the changed rows are a set
-- difference (new (id, sources) pairs EXCEPT the old ones: never a loop within a
-- loop), and both statements run through EXECUTE: planned at each call for its
-- own tables' sizes (a probe of catalog_keys_row per changed row for a few rows,
-- a hash or a sort that may spill for many), at well under a millisecond a plan.
CREATE OR REPLACE FUNCTION catalog_keys_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only rows whose sources changed: a grab, a row shown or rebuilt as it
    -- was, touches no key.
    EXECUTE $sql$
        DELETE FROM catalog_keys AS ck
        USING (SELECT id, sources FROM became EXCEPT SELECT id, sources FROM was) AS n
        WHERE ck.catalog_id = n.id AND ck.key <> ALL (n.sources)
    $sql$;
    EXECUTE $sql$
        INSERT INTO catalog_keys (key, catalog_id)
            SELECT DISTINCT k, n.id
            FROM (SELECT id, sources FROM became EXCEPT SELECT id, sources FROM was) AS n,
                 unnest(n.sources) AS k
        ON CONFLICT DO NOTHING
    $sql$;
    RETURN NULL;
END
$$;
