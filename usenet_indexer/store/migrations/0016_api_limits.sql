-- newznab as every client reads it (issue 26): per-key daily limits and the
-- failures downloaders report (store/users.py).

-- A user's own daily limits; NULL: the settings' (api_requests_per_day,
-- api_grabs_per_day); 0: none.
ALTER TABLE api_users
    ADD COLUMN requests_per_day integer CHECK (requests_per_day >= 0),
    ADD COLUMN grabs_per_day integer CHECK (grabs_per_day >= 0);

-- Requests and NZB downloads per key and UTC day: one upsert per request,
-- by the primary key (a row per user and day).
CREATE TABLE api_usage (
    user_id bigint NOT NULL REFERENCES api_users (id) ON DELETE CASCADE,
    day date NOT NULL,
    requests integer NOT NULL DEFAULT 0,
    grabs integer NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day)
);

-- A failed download of a release, as a downloader reported it through the
-- X-DNZB-Failure URL of its NZB: one row per release and user (a second
-- report of the same counts in `reports`). By guid, not the catalog row: rows
-- are rewritten by builds, a release's guid stays.
CREATE TABLE download_failures (
    guid text NOT NULL,
    user_id bigint NOT NULL REFERENCES api_users (id) ON DELETE CASCADE,
    reports integer NOT NULL DEFAULT 1,
    corrupt boolean NOT NULL DEFAULT false,  -- FailureLink's &corrupt=true
    first_at timestamptz NOT NULL DEFAULT now(),
    last_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (guid, user_id)
);
