-- q at catalog scale (issue 27): GIN keys narrower than a word. A word's posting
-- list in catalog_words_episode holds every row with the word (10M rows: a
-- show's word 340k entries), and a search must intersect whole lists and
-- fetch every match to find the newest page and count to 1,000 (two words of
-- a show: 16k rows, 400 ms). catalog_search_keys holds each word once per
-- period of its row (`castle|825`, ~24 days: posted >> 21) and, for a row with
-- a season, once per season (`castle|s2`). A q is then asked period by period,
-- newest first, each period's lists a few hundred entries, until the page and
-- the count are found (store/catalog.py's _walk); a tvsearch asks its season's
-- keys. The keys are the `words` tsvector's lexemes, so a key matches exactly
-- where the full text search does.

-- A row's period: its posted time in units of 2^21 s (~24 days).
CREATE FUNCTION catalog_period(posted int8) RETURNS int8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN posted >> 21;

-- Each lexeme of `words` with `tag` appended (none for no lexeme).
CREATE FUNCTION catalog_tagged(words tsvector, tag text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN words = ''::tsvector THEN '{}'::text[]
                ELSE string_to_array(array_to_string(tsvector_to_array(words), tag || ' ') || tag, ' ')
           END;

CREATE FUNCTION catalog_search_keys(words tsvector, season int4, posted int8) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN catalog_tagged(words, '|' || catalog_period(posted))
           || CASE WHEN season IS NULL THEN '{}'::text[]
                   ELSE catalog_tagged(words, '|s' || season) END;

-- q's keys with `tag`: its words as the full text search parses them. A q of
-- no lexeme gets the tag alone, a key no row has (it matches nothing, as
-- `words @@ plainto_tsquery('')` does; an empty array would match every row).
CREATE FUNCTION catalog_query_keys(q text, tag text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN to_tsvector('simple', q) = ''::tsvector THEN ARRAY[tag]
                ELSE catalog_tagged(to_tsvector('simple', q), tag)
           END;

CREATE INDEX catalog_search_keys ON catalog USING gin (catalog_search_keys(words, season, posted));
