-- The core of the coordinator: the groups it indexes, the edge nodes it
-- trusts, and the article ranges it plans and leases to them.
-- Article numbers are bigint: big groups are past 2^31.

CREATE TABLE groups (
    id bigserial PRIMARY KEY,
    name text UNIQUE NOT NULL,
    backfill_days int,
    -- The server's low and high water marks, as last seen.
    low bigint,
    high bigint,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE nodes (
    id bigserial PRIMARY KEY,
    name text UNIQUE NOT NULL,
    -- A hash of the node's bearer token; the token itself is never stored.
    token_hash bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    last_seen timestamptz
);

CREATE TABLE ranges (
    id bigserial PRIMARY KEY,
    group_id bigint NOT NULL REFERENCES groups,
    first_article bigint NOT NULL,
    last_article bigint NOT NULL,
    -- The next article to index: batches move it, a new holder starts there.
    resume bigint NOT NULL,
    state text NOT NULL DEFAULT 'planned' CHECK (state IN ('planned', 'leased', 'done')),
    holder bigint REFERENCES nodes,
    -- Goes up on every grant: a batch or call naming an older epoch is stale.
    epoch bigint NOT NULL DEFAULT 0,
    -- When the lease passes to the next node (database clock).
    deadline timestamptz,
    -- clock_timestamp, not now: ranges planned in one transaction keep their order.
    planned_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at timestamptz,
    batches int NOT NULL DEFAULT 0,
    headers bigint NOT NULL DEFAULT 0,
    CHECK (first_article <= last_article),
    CHECK (resume BETWEEN first_article AND last_article + 1)
);

-- Leasing takes the oldest plan that is not done: this index holds only those.
CREATE INDEX ranges_lease_order ON ranges (planned_at, id) WHERE state <> 'done';
-- The foreign keys, for deletes on groups and nodes and for per-group views.
CREATE INDEX ranges_group ON ranges (group_id);
CREATE INDEX ranges_holder ON ranges (holder) WHERE holder IS NOT NULL;
