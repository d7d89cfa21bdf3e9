-- The catalog sweep (core/sweep.py, store/sweep.py): every stored release key is
-- marked pending again once per catalog_sweep_hours, in key order, a slice a
-- tick, so that the catalog followed batch by batch becomes what a whole
-- rebuild makes (joins beyond a build's closure; rows an older version wrote,
-- such as those without 0044's anchor). One row: where the sweep is, made by
-- its first tick (a database just migrated holds no data: `uidx db restore`
-- restores into one).
CREATE TABLE catalog_sweep (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    -- The last key marked in this cycle; NULL: the cycle starts at the first key.
    after bytea,
    -- How far in time the sweep has marked keys; NULL: it never ran.
    swept_at timestamptz,
    cycle_started timestamptz,
    cycles bigint NOT NULL DEFAULT 0
);
