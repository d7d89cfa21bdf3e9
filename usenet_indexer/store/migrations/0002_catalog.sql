-- The catalog and what feeds it: stored batches (for the fence and its
-- "already stored" answer), the spool's chunk index, releases, files and
-- their fragments, rule counts and probe candidates.

-- One row per stored batch. The coordinator answers a retried batch whose
-- reply was lost from here; the primary key makes a double store impossible.
CREATE TABLE batches (
    range_id bigint NOT NULL REFERENCES ranges,
    batch_first bigint NOT NULL,
    batch_next bigint NOT NULL,
    node_id bigint NOT NULL REFERENCES nodes,
    epoch bigint NOT NULL,
    lines int NOT NULL,
    release_chunks int NOT NULL,
    segments int NOT NULL,
    body_bytes int NOT NULL,
    stored_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (range_id, batch_first),
    CHECK (batch_first < batch_next)
);

-- The spool: compressed chunks of overview lines on disk, indexed here. A
-- chunk row is written after its file is complete (renamed into place); a
-- gap row (path NULL) records articles the server does not have.
CREATE TABLE spool_chunks (
    group_id bigint NOT NULL REFERENCES groups,
    first_article bigint NOT NULL,
    last_article bigint NOT NULL,
    codec smallint NOT NULL,
    path text,
    lines int NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, first_article),
    CHECK (first_article <= last_article)
);

-- Catalog releases, merged from release chunks by key. Counters are sums
-- over chunks (a crossposted segment stored from two groups counts twice
-- here; exports merge fragments by segment number and count it once).
CREATE TABLE releases (
    key bytea PRIMARY KEY CHECK (length(key) = 16),
    name text NOT NULL,
    head_name text,
    poster text NOT NULL,
    groups text[] NOT NULL,
    posted bigint NOT NULL,
    files_announced int,
    chunks int NOT NULL DEFAULT 0,
    segments bigint NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0,
    probe_message_id text,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX releases_posted ON releases (posted);

-- The files of a release chunk (seen in one batch), their details and
-- segments packed in one value (see fragments.py): never one row per
-- segment, nor per file.
CREATE TABLE fragments (
    group_id bigint NOT NULL,
    release_key bytea NOT NULL,
    range_id bigint NOT NULL,
    batch_first bigint NOT NULL,
    files int NOT NULL,
    segments int NOT NULL,
    packed bytea NOT NULL,
    PRIMARY KEY (group_id, release_key, range_id, batch_first)
) PARTITION BY LIST (group_id);
-- One partition per group, made by the first batch that needs it (checked
-- per batch in store/batches.py, never remembered in a process), so that a
-- group's catalog can be dropped or moved whole.
-- Packed fragments are compressed already: do not let TOAST try again. And
-- each partition keeps a row in its page up to the largest target (a page):
-- TOAST only what cannot fit, not every value over 2 kB (each TOAST chunk
-- costs a header and an index entry; measured on generated batches: 0.7 B
-- less per segment).
ALTER TABLE fragments ALTER COLUMN packed SET STORAGE EXTERNAL;

CREATE TABLE rule_counts (
    range_id bigint NOT NULL,
    batch_first bigint NOT NULL,
    rule text NOT NULL,
    key text NOT NULL,
    releases int NOT NULL,
    segments bigint NOT NULL,
    PRIMARY KEY (range_id, batch_first, rule, key)
);

CREATE TABLE probe_candidates (
    release_key bytea PRIMARY KEY,
    message_id text NOT NULL,
    file_name text NOT NULL,
    state text NOT NULL DEFAULT 'new' CHECK (state IN ('new', 'probing', 'done', 'failed')),
    created_at timestamptz NOT NULL DEFAULT now()
);
