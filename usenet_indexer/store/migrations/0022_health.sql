-- What each process reports of the components it sees (core/health.py): one
-- row per (component, subject, reporter); `since` is when its state began
-- (kept while the same state is reported again), `seen_at` its last report.
-- A process's heartbeat is its own row (component 'prefetcher' or
-- 'coordinator', subject = reporter).
CREATE TABLE health (
    component text NOT NULL,
    subject text NOT NULL,
    reporter text NOT NULL,
    state text NOT NULL,
    detail text NOT NULL DEFAULT '',
    since timestamptz NOT NULL DEFAULT now(),
    seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, subject, reporter)
);
CREATE INDEX health_reporter ON health (reporter);
