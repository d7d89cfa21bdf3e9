-- When a group's low and high water marks were last stored from an NNTP
-- server's GROUP answer: `uidx groups add` with servers, the prefetcher (when
-- the marks change) and `uidx ranges plan --days` set it. NULL: no server
-- has answered for the group yet (`uidx groups add --unchecked`), and
-- `uidx status` shows it as unchecked.
--
-- Before this file every path but one wrote both water marks from a GROUP
-- answer (the exception: `--low/--high` given by hand without servers), so a
-- group that has both counts as checked, at its creation; one without them
-- was added without a server and is unchecked.

ALTER TABLE groups ADD COLUMN checked_at timestamptz;
UPDATE groups SET checked_at = created_at WHERE low IS NOT NULL AND high IS NOT NULL;
