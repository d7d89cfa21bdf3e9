-- A revoked node's or API user's name can be given again: `uidx nodes create NAME`
-- and `uidx users create NAME` after a revoke make a new identity (a new id and
-- secret); the revoked row stays, revoked, with what refers to it (its batches,
-- failure reports, daily use). Only the live rows' names are unique.
ALTER TABLE nodes DROP CONSTRAINT nodes_name_key;
CREATE UNIQUE INDEX nodes_live_name ON nodes (name) WHERE revoked_at IS NULL;
ALTER TABLE api_users DROP CONSTRAINT api_users_name_key;
CREATE UNIQUE INDEX api_users_live_name ON api_users (name) WHERE revoked_at IS NULL;
