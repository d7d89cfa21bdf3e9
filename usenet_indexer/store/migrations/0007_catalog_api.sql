-- The catalog as its users see it: one row per merged release (what
-- merge.ReleaseMerger makes of the stored fragments), searchable, with its
-- newznab category; and the API users whose keys the newznab API takes.
--
-- A catalog row holds no segment: an NZB is rebuilt from the fragments of
-- the release keys in `sources` (the keys whose chunks the merge put in it),
-- so the catalog stays at the fragments' bytes per segment. Rows are
-- replaced by `uidx catalog build` and the coordinator's builder; `grabs`
-- survives a rebuild (rows are updated by guid, never dropped and made again).

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE catalog (
    id bigserial PRIMARY KEY,
    guid text NOT NULL UNIQUE,
    name text NOT NULL,
    -- lower case, dots, underscores and dashes as spaces: what q matches
    search_name text NOT NULL,
    category int NOT NULL,
    size bigint NOT NULL,
    files int NOT NULL,
    poster text NOT NULL,
    groups text[] NOT NULL,
    posted bigint NOT NULL,
    completion real NOT NULL,
    season int,
    episode int,
    probe_candidate boolean NOT NULL,
    sources bytea[] NOT NULL,
    grabs int NOT NULL DEFAULT 0,
    built_at timestamptz NOT NULL DEFAULT now(),
    words tsvector GENERATED ALWAYS AS (to_tsvector('simple', search_name)) STORED
);
-- Newest first, and stable pages (id breaks ties).
CREATE INDEX catalog_newest ON catalog (posted DESC, id DESC);
CREATE INDEX catalog_category ON catalog (category, posted DESC, id DESC);
CREATE INDEX catalog_words ON catalog USING gin (words);
CREATE INDEX catalog_trigrams ON catalog USING gin (search_name gin_trgm_ops);

-- Users of the newznab API; keys kept as SHA-256 hashes, like node tokens.
CREATE TABLE api_users (
    id bigserial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    key_hash bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    requests bigint NOT NULL DEFAULT 0,
    last_seen timestamptz
);
