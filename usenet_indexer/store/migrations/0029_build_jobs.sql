-- Catalog builds done by edges (store/build_jobs.py): a job reserves the
-- build shards (store/catalog.py's SHARDS) its closure reached until it
-- expires, holding the pending keys it took (with their seq) and every key
-- it merges again. The edge's rows come back by job id; an expired job's
-- are refused and its keys, still pending, are built again.
CREATE TABLE build_jobs (
    id bigserial PRIMARY KEY,
    node_id bigint NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    shards int[] NOT NULL,
    pending bytea[] NOT NULL,
    seqs bigint[] NOT NULL,
    keys bytea[] NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
-- When a node last asked for a build: while an edge asks, the coordinators
-- leave fresh pending keys to the edges (and build those left waiting).
ALTER TABLE nodes ADD COLUMN build_asked_at timestamptz;
-- Each pending key's build shard (its release's poster's, as store/catalog.py's
-- _SHARD), kept with it: the builders and every edge's ask for a build find
-- the shards with pending keys, and the keys of some shards, without a join
-- with releases per pending key. NULL: no stored release has the key (a
-- probe's outcome for a repost generation's key).
ALTER TABLE catalog_pending ADD COLUMN shard int;
UPDATE catalog_pending AS p SET shard = hashtext(r.poster) & 63
FROM releases AS r WHERE r.key = p.key;
CREATE INDEX catalog_pending_shard ON catalog_pending (shard);
