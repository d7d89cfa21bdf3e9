-- The catalog sweep gives way while the build is behind the batches (store/sweep.py):
-- since when, so that `uidx status`, the page and /metrics show it. NULL: the last
-- tick marked keys (or found none due), or none gave way yet.
ALTER TABLE catalog_sweep ADD COLUMN giving_way_since timestamptz;
