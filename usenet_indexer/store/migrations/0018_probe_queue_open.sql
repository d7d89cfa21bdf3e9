-- The open probe candidates (new, or leased to a prober), found by an index:
-- `uidx standalone --exit-when-done` counts them every half second while it
-- waits for the probe queue to drain (store/probes.py's `queue`), and the
-- candidates done or given up are most of the table in a long-lived catalog.
CREATE INDEX probe_candidates_open ON probe_candidates (state, next_at)
    WHERE state IN ('new', 'probing');
