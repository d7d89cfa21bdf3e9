-- Who may see what (issue 29): an API user's role, and the status page's
-- login sessions. A session is a random token kept as its SHA-256 (like keys
-- and node tokens), shared by every coordinator process through this table,
-- with an expiry; a revoked user's sessions end with its key (the look-up
-- joins api_users).

ALTER TABLE api_users
    ADD COLUMN role text NOT NULL DEFAULT 'user' CHECK (role IN ('user', 'operator'));

CREATE TABLE sessions (
    token_hash bytea PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES api_users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

-- Expired sessions are deleted at each login, found by this index.
CREATE INDEX sessions_expires ON sessions (expires_at);
