-- The oldest pending key by an index (store/builds.py's lag, read about once a
-- second by the coordinator, and the builders' "pending since" look-ups), not a
-- scan of catalog_pending: every batch inserts into it and every build deletes
-- from it, so between two autovacuum runs it held ~5,000 pages for a few
-- thousand live rows at 20M articles, and the scan cost 2.6 ms a read. Its
-- autovacuum runs after a fixed number of changes, not a fifth of a table that
-- is nearly all churn.
CREATE INDEX catalog_pending_since ON catalog_pending (since);
ALTER TABLE catalog_pending SET (autovacuum_vacuum_scale_factor = 0.0,
                                 autovacuum_vacuum_threshold = 5000);
