-- A release's later generations (its reposts, and under a posting tool's From
-- or a poster's random names the later uploads of one key) were keyed by their
-- place in its history: the n-th repost key of the release key. A backfill
-- (an earlier upload stored late) moved every later row to another upload's
-- guid. Now the earliest generation has the release key and each later one a
-- key of its own upload's (core/reposts.py `generation_key`, core/merge.py
-- `_keyed`): the rows of every release with more than one generation are
-- built again under those keys (a row with one source and its own key as its
-- guid, alone under that key, is the release key's earliest generation and
-- keeps its guid). Pending as a stored batch marks them (store/catalog.py
-- MARK_PENDING: the shard of the release's poster).
INSERT INTO catalog_pending (key, shard)
SELECT r.key, hashtext(r.poster) & 63
FROM releases AS r
WHERE r.key IN (
    SELECT k FROM catalog AS c, unnest(c.sources) AS k
    WHERE cardinality(c.sources) > 1 OR decode(c.guid, 'hex') <> ALL (c.sources)
    UNION
    SELECT key FROM catalog_keys GROUP BY key HAVING count(*) > 1
)
ORDER BY r.key
ON CONFLICT (key) DO NOTHING;
