-- A release's poster, head name and [i/M] come from its earliest file
-- (batch.representative: first segment's date, then file key), whichever
-- batch stores it first; these columns hold that order so that a later
-- batch with an earlier file replaces them. NULL (releases stored before
-- this migration) sorts after everything.

ALTER TABLE releases ADD COLUMN rep_posted bigint, ADD COLUMN rep_file bytea;
