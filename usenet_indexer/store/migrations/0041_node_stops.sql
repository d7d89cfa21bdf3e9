-- How many times the node said it stops (a range given back with
-- `{"stopping": true}`: store/ranges.py). A lease call held open when its edge
-- stops looks again when the range given back is planned, and, before the
-- coordinator has seen that call's connection close, would lease it straight
-- back to the stopping node; a held call remembers the count it began with and
-- leases nothing once it has moved.
ALTER TABLE nodes ADD COLUMN stops bigint NOT NULL DEFAULT 0;
