-- The daemon follows its groups (the prefetcher's follower plans the live
-- head and the backfill; see prefetch/follower.py), and the catalog follows
-- the stored batches release by release instead of being rebuilt whole.

-- A disabled group is neither followed nor leased; its plan is kept.
ALTER TABLE groups ADD COLUMN enabled boolean NOT NULL DEFAULT true;
-- The highest article the follower planned live (or began from: a group is
-- followed from its high water mark when first polled); NULL: never polled.
ALTER TABLE groups ADD COLUMN followed_to bigint;
-- The first article posted at or after now - backfill_days, as the servers
-- said it at backfill_checked_at (a bisect over OVER dates): the backfill's floor.
ALTER TABLE groups ADD COLUMN backfill_floor bigint;
ALTER TABLE groups ADD COLUMN backfill_checked_at timestamptz;
-- The latest oddity a server showed for the group (its high water mark went
-- down, its low passed planned ranges), and when: `uidx status` shows it.
ALTER TABLE groups ADD COLUMN quirk text;
ALTER TABLE groups ADD COLUMN quirk_at timestamptz;

-- What planned a range: the follower's live head (leased first), its
-- backfill, or an operator (`uidx ranges plan`).
ALTER TABLE ranges ADD COLUMN kind text NOT NULL DEFAULT 'manual'
    CHECK (kind IN ('live', 'backfill', 'manual'));
DROP INDEX ranges_lease_order;
CREATE INDEX ranges_lease_order ON ranges ((kind <> 'live'), planned_at, id) WHERE state <> 'done';

-- Release keys whose chunks changed since the catalog last took them in:
-- every stored batch bumps its keys' seq (in its own transaction); the
-- builder takes the keys it read, and deletes only those still at the seq
-- it read (a key a batch bumped meanwhile stays for the next build).
CREATE SEQUENCE catalog_pending_seq;
CREATE TABLE catalog_pending (
    key bytea PRIMARY KEY,
    seq bigint NOT NULL DEFAULT nextval('catalog_pending_seq')
);
-- What the database holds before this file was never built incrementally:
-- every release is pending once.
INSERT INTO catalog_pending (key) SELECT key FROM releases;

-- The builder merges a touched release with every release of its poster
-- (uploads are joined per poster), from its keys' fragments.
CREATE INDEX releases_poster ON releases (poster);
CREATE INDEX fragments_release ON fragments (release_key);
-- Rows made from a set of keys, found again when those keys are merged anew.
CREATE INDEX catalog_sources ON catalog USING gin (sources);

-- A release is shown once it is complete, or once no chunk of it has come
-- for catalog_quiet_seconds (then with its completion): `changed_at` is
-- when a chunk of it was last stored.
ALTER TABLE catalog ADD COLUMN changed_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE catalog ADD COLUMN shown boolean NOT NULL DEFAULT true;
CREATE INDEX catalog_waiting ON catalog (changed_at) WHERE NOT shown;
