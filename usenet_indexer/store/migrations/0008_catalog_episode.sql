-- tvsearch asks for a season and an episode beside q: an index on both lets
-- PostgreSQL AND it with the words' bitmap and fetch only the rows of that
-- episode (scripts/bench-search: the heap reads of a two-word q otherwise).
CREATE INDEX catalog_episode ON catalog (season, episode) WHERE season IS NOT NULL;
