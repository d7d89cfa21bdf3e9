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

-- A row's period: its posted time in units of 2^21 s (~24 days), as
-- catalog_search_keys tags it.
CREATE FUNCTION catalog_period(posted int8) RETURNS int8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN posted >> 21;

-- Each lexeme of `words` tagged with the row's period (`castle|825`), and, with a
-- season, with it too (`castle|s2`): the stripped tsvector's text, `'a' 'b'`,
-- made `a|825 b|825`. Lexemes of search_name are letters and digits (no quote,
-- no space). Only immutable built-ins (array_to_string is stable; `text || int`
-- too), so that PostgreSQL inlines this into the index expression: a SQL
-- function it cannot inline runs in the SQL function executor for each row
-- written (~100 us a row, where this takes ~6).
CREATE FUNCTION catalog_search_keys(words tsvector, season int4, posted int8) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN words = ''::tsvector THEN '{}'::text[]
                ELSE string_to_array(
                    btrim(replace(strip(words)::text, ''' ''', '|' || (posted >> 21)::text || ' '),
                          '''')
                    || '|' || (posted >> 21)::text
                    || CASE WHEN season IS NULL THEN ''
                            ELSE ' ' || btrim(replace(strip(words)::text, ''' ''',
                                                      '|s' || season::text || ' '), '''')
                                 || '|s' || season::text
                       END,
                    ' ')
           END;

-- q's keys with `tag` (`|825`, `|s2`): its words as the full text search parses
-- them. A q of no lexeme gets the tag alone, a key no row has (it matches
-- nothing, as `words @@ plainto_tsquery('')` does; an empty array would match
-- every row).
CREATE FUNCTION catalog_query_keys(q text, tag text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN to_tsvector('simple', q) = ''::tsvector THEN ARRAY[tag]
                ELSE string_to_array(
                    btrim(replace(strip(to_tsvector('simple', q))::text, ''' ''', tag || ' '), '''')
                    || tag,
                    ' ')
           END;

-- A pending list of 256 kB at most (gin_pending_list_limit; the default is
-- 4 MB): a GIN scan reads its whole pending list, and the walk scans the index
-- once per period (150 at 10M rows), so a 4 MB list of rows written since the
-- last vacuum would be read 150 times by one search (~77k pages; 256 kB: 32
-- pages a look at most). Smaller lists are merged into the index too often: at
-- 64 kB each catalog row written cost ~110 us more, at 256 kB a few, and
-- without a list (fastupdate off) ~350 us more.
CREATE INDEX catalog_search_keys ON catalog USING gin (catalog_search_keys(words, season, posted))
    WITH (gin_pending_list_limit = 256);
