-- Ids from NFOs (issue 26): the IMDb, TheTVDB, TVmaze and TMDB ids a probed
-- NFO names (decode/ids.py), what the *arr programs search by (newznab
-- imdbid, tvdbid, tvmazeid, tmdbid).

-- What a probe's NFO named (NULL: none of that kind). TMDB numbers movies and
-- shows apart: a show's id is kept, not offered as a movie's tmdbid.
ALTER TABLE probe_candidates
    ADD COLUMN found_imdb int,
    ADD COLUMN found_tvdb int,
    ADD COLUMN found_tvmaze int,
    ADD COLUMN found_tmdb int,
    ADD COLUMN found_tmdb_tv int;

-- A catalog row's ids, as the build applies the findings of its release.
ALTER TABLE catalog
    ADD COLUMN imdb int,
    ADD COLUMN tvdb int,
    ADD COLUMN tvmaze int,
    ADD COLUMN tmdb int;
-- A search by id (t=movie&imdbid=, t=tvsearch&tvdbid=...) finds its few rows
-- by one of these; most rows have no id, and no entry.
CREATE INDEX catalog_imdb ON catalog (imdb) WHERE imdb IS NOT NULL;
CREATE INDEX catalog_tvdb ON catalog (tvdb) WHERE tvdb IS NOT NULL;
CREATE INDEX catalog_tvmaze ON catalog (tvmaze) WHERE tvmaze IS NOT NULL;
CREATE INDEX catalog_tmdb ON catalog (tmdb) WHERE tmdb IS NOT NULL;
