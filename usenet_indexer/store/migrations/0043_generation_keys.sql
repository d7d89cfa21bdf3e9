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

-- The probes a build queued for such a generation were queued under its key, no
-- stored release's: a key a build no longer makes. What they found (a real name,
-- file names, ids) is read through a release's sources (core/renames.py `_of`),
-- so they move to the first source key of the row whose guid is their key (where
-- that key has no candidate of the same segment already), as builds now queue
-- them (`renames.probe_key`). A probe found is not asked again.
UPDATE probe_candidates AS p SET release_key = c.sources[1]
FROM catalog AS c
WHERE c.guid = encode(p.release_key, 'hex')
  AND NOT EXISTS (SELECT FROM releases AS r WHERE r.key = p.release_key)
  AND NOT EXISTS (
      SELECT FROM probe_candidates AS q
      WHERE q.release_key = c.sources[1] AND q.message_id = p.message_id
  );
