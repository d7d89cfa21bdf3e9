-- How many times the node said it stops (a range given back with
-- `{"stopping": true}`: store/ranges.py), or had its token replaced (`uidx nodes
-- rotate`: store/nodes.py). A lease call held open when its edge stops looks
-- again when the range given back is planned, and, before the coordinator has
-- seen that call's connection close, would lease it straight back to the
-- stopping node (a call held with a replaced token, to edges whose every later
-- call is 401); a held call remembers the count it began with and leases
-- nothing once it has moved.
ALTER TABLE nodes ADD COLUMN stops bigint NOT NULL DEFAULT 0;
