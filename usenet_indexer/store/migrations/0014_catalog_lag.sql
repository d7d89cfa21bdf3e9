-- How the catalog keeps up (issue 25): what `uidx status`, the status page and
-- /metrics show of the catalog builder, kept in the database because several
-- coordinator processes build and `uidx status` is a process of its own.

-- When a key FIRST became pending: the upserts that mark a key again
-- (store/batches.py, store/probes.py) change only `seq`, so the oldest
-- `since` is how long the catalog has lagged. Keys pending before this file
-- count from now. No index: the lag is read with the count, over the pending
-- keys only (a table the builds empty).
ALTER TABLE catalog_pending ADD COLUMN since timestamptz NOT NULL DEFAULT now();

-- One row per catalog build that did something, from any coordinator process
-- (store/builds.py); rows older than a day are deleted as rows are added.
CREATE TABLE catalog_builds (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    pending integer NOT NULL,   -- pending keys taken
    keys integer NOT NULL,      -- release keys merged (their closure)
    written integer NOT NULL,   -- catalog rows inserted or changed
    shown integer NOT NULL,     -- rows shown for having gone quiet
    cpu_s double precision NOT NULL,
    wall_s double precision NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL
);
CREATE INDEX catalog_builds_at ON catalog_builds (at);
