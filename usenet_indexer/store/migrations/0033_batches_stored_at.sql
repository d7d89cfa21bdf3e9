-- The batches stored lately, by when: `uidx status`, the status page and every
-- /metrics scrape read the last five minutes' batches for the throughput and each
-- node's rate (store/status.py), and scanned every batch ever stored to find them
-- (one per live range a minute and per 500k articles, kept with their ranges).
CREATE INDEX batches_stored_at ON batches (stored_at);
