-- The spool-prefetcher's NNTP servers as it last reported them, for
-- `uidx status`: connections open, lines fetched and their rate, the
-- compression in use and the errors seen. One row per server ("host:port").

CREATE TABLE nntp_servers (
    server text PRIMARY KEY,
    connections int NOT NULL DEFAULT 0,
    connection_limit int NOT NULL DEFAULT 0,
    lines bigint NOT NULL DEFAULT 0,
    lines_per_second double precision NOT NULL DEFAULT 0,
    compression text,
    errors bigint NOT NULL DEFAULT 0,
    last_error text,
    updated_at timestamptz NOT NULL DEFAULT now()
);

