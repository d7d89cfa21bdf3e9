-- What a stored batch added to a pending key, by date: the earliest and the
-- latest date of the chunks it stored under the key since the key's last build
-- (store/batches.py; widened by each batch until a build takes the key). The
-- build's closure looks around a key's fresh chunks only, not its whole span
-- (core/catalog.Closure, "fresh"): a poster's key filled in days later brought
-- back every release of his in between at every build. NULL: not known (a row's
-- keys marked again, a probe's outcome, keys pending before this migration, an
-- undated chunk): the whole span is looked around, as before.
ALTER TABLE catalog_pending ADD COLUMN low bigint, ADD COLUMN high bigint;
