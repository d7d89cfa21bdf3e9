-- Nothing reads releases by date yet, and the index on posted cost every
-- stored batch about a tenth of its time (one more index entry per new or
-- re-dated release). The search API that needs an order by date will make
-- the index it needs.

DROP INDEX IF EXISTS releases_posted;
