-- Whether a stored batch marked the key pending since its last build (store/
-- batches.py), apart from the dates of what it stored (0037's low/high, NULL where
-- a chunk is undated or a row's keys or a probe's outcome marked the key again).
-- A pending key a build's closure reaches through a row or a window, without
-- looking around it, stays pending when a batch stored chunks under it: their
-- neighbours are looked around at its own build (coordinator/catalog_build.py).
-- Told by the dates alone, such a key with an undated chunk was taken as built.
ALTER TABLE catalog_pending ADD COLUMN stored boolean NOT NULL DEFAULT false;
-- Keys pending from before: as stored (looked around at their own build).
UPDATE catalog_pending SET stored = true;
