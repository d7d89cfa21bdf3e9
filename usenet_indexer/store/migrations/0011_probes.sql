-- Probes: the queue of probe candidates (one per release key, made by the
-- batches), leased by the prefetcher, fetched (BODY), decoded, and what
-- they found, which the catalog build applies (store/catalog.py).

ALTER TABLE probe_candidates
    -- 'probing': leased by a prober until `deadline`; 'new' with a later
    -- next_at: waiting for a retry (another server, after a 430).
    ADD COLUMN attempts int NOT NULL DEFAULT 0,
    ADD COLUMN next_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN deadline timestamptz,
    -- Servers that answered 430 (no such article): the next try asks another.
    ADD COLUMN missing_on text[] NOT NULL DEFAULT '{}',
    ADD COLUMN outcome text CHECK (outcome IN (
        'renamed', 'already_named', 'no_names', 'article_missing', 'bad_data', 'executable')),
    ADD COLUMN detail text,
    ADD COLUMN probed_at timestamptz,
    ADD COLUMN body_bytes int,
    -- What the body said: the release's name, and the real file names
    -- (a par2's file list, or the files inside an archive).
    ADD COLUMN found_name text,
    ADD COLUMN found_files text[] NOT NULL DEFAULT '{}',
    -- Each found file's length (a par2's), 0 where unknown.
    ADD COLUMN found_sizes bigint[] NOT NULL DEFAULT '{}',
    -- Where the candidate came from: a batch (par2, nfo) or the catalog build
    -- (renames.more_probe: a par2 an nfo's probe did not read, an archive's
    -- first volume).
    ADD COLUMN source text NOT NULL DEFAULT 'batch' CHECK (source IN ('batch', 'build'));
CREATE INDEX probe_candidates_due ON probe_candidates (next_at) WHERE state = 'new';
-- A key's chain may hold several uploads of one name (a tool's default From):
-- the catalog build may ask for one segment of each, so a candidate is a
-- segment of a release key. A batch still adds one per key (the first).
ALTER TABLE probe_candidates DROP CONSTRAINT probe_candidates_pkey;
ALTER TABLE probe_candidates ADD PRIMARY KEY (release_key, message_id);
