-- A range the coordinator refuses again and again (a batch past its end, a
-- finish before it) is parked as 'failed' instead of being leased, refused
-- and given back for ever (issue 25): the refusals in a row are counted on
-- the range (a stored batch or a finish sets them back to 0), the last
-- reason kept, and `uidx ranges retry` puts a parked range back.
ALTER TABLE ranges ADD COLUMN refusals int NOT NULL DEFAULT 0;
ALTER TABLE ranges ADD COLUMN refusal text;
ALTER TABLE ranges ADD COLUMN failed_at timestamptz;
ALTER TABLE ranges DROP CONSTRAINT ranges_state_check;
ALTER TABLE ranges ADD CONSTRAINT ranges_state_check
    CHECK (state IN ('planned', 'leased', 'done', 'failed'));

-- Leasing looks only at planned and leased ranges (parked ones wait for an operator).
DROP INDEX ranges_lease_order;
CREATE INDEX ranges_lease_order ON ranges ((kind <> 'live'), planned_at, id)
    WHERE state IN ('planned', 'leased');
-- `uidx status`, the status page and /metrics list the parked ranges.
CREATE INDEX ranges_failed ON ranges (id) WHERE state = 'failed';
