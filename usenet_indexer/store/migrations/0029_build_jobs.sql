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
