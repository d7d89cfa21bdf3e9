-- catalog_keys_moved (0042) kept, as plpgsql keeps any statement without
-- parameters, one plan per session, made at its first call (or the first after
-- an invalidation: an autoanalyze of catalog or catalog_keys) for that call's
-- transition tables. 0042's set difference needs no loop within a loop for a
-- plan made for one row; but a plan made for a call of many rows (a whole
-- build's write) hashed the whole of catalog_keys in its DELETE (a sequential
-- scan) at every later call, however few its rows: 104 ms for a change of 2
-- rows at 400k keys, against 1.2 ms, and growing with the catalog. EXECUTE
-- plans each call for its own tables' sizes: a probe of catalog_keys_row per
-- changed row for a few rows, a hash or a sort for many (a sort that spills,
-- where a HashSetOp planned for one row could not). It costs a plan of each
-- statement at each call: well under a millisecond.
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
