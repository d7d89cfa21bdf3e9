-- A release's date in the catalog is no later than when its articles were stored
-- (core/catalog.py, seen_by): a poster whose clock ran years ahead topped every
-- newest-first feed until then. The rows a build wrote before are dated so here,
-- as the next build of their keys would: only those dated past now are read (by
-- catalog_newest, posted DESC), the ones the feeds hold at the top.
UPDATE catalog SET posted = floor(extract(epoch FROM changed_at))::bigint
WHERE posted > extract(epoch FROM now())::bigint
  AND posted > floor(extract(epoch FROM changed_at))::bigint;
