-- catalog_keys_moved (0025) found the rows whose sources changed by joining the
-- statement's old rows with its new ones (`was JOIN became ON id`). The planner
-- knows nothing of a transition table's size (plpgsql's plan took it as one row),
-- so the join was a nested loop: quadratic in the rows one build writes, 2.8 s of
-- PostgreSQL's time in 6 statements at 20M articles (auto_explain over
-- bench-scale), where the rest of the trigger took milliseconds. The changed rows
-- are now a set difference (new (id, sources) pairs EXCEPT the old ones: a hash or
-- a sort, never a loop within a loop), and the keys are found by the key index per
-- changed row, as before.
CREATE OR REPLACE FUNCTION catalog_keys_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only rows whose sources changed: a grab, a row shown or rebuilt as it
    -- was, touches no key.
    DELETE FROM catalog_keys AS ck
    USING (SELECT id, sources FROM became EXCEPT SELECT id, sources FROM was) AS n
    WHERE ck.catalog_id = n.id AND ck.key <> ALL (n.sources);
    INSERT INTO catalog_keys (key, catalog_id)
        SELECT DISTINCT k, n.id
        FROM (SELECT id, sources FROM became EXCEPT SELECT id, sources FROM was) AS n,
             unnest(n.sources) AS k
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
