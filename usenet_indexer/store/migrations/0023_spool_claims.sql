-- Several prefetchers share the work list (issue 27): a chunk a prefetcher is
-- about to fetch is claimed here until `until` (renewed every few seconds
-- while it runs); another prefetcher's work list counts a live claim as
-- covered, and a claim is made only where no other live claim overlaps
-- (under a per-group advisory lock). A killed prefetcher's claims lapse.
CREATE TABLE spool_claims (
    group_id bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    first_article bigint NOT NULL,
    last_article bigint NOT NULL,
    claimant text NOT NULL,
    until timestamptz NOT NULL,
    PRIMARY KEY (group_id, first_article, claimant)
);
CREATE INDEX spool_claims_claimant ON spool_claims (claimant);
