-- Range queries that touch only what they need, however many ranges are done.
-- The follower plans a live range at each poll that finds new posts (1,440 a day
-- for a busy group); done ranges are kept (batches refer to them). Every poll's
-- view of the groups, `uidx status`, the status page, every /metrics scrape and
-- the spool's sweep read all of them: at 2M done ranges 0.6-2.4 s each, and the
-- cost grew with every day followed. Now:
-- - a group's ranges by position, either end (the plan's top, the lowest article,
--   the ranges above the follower's mark, overlap checks, the range holding an
--   article), in place of the index on group_id alone, and by kind and position;
-- - the ranges not done by group (what waits, what is leased);
-- - the done ones counted per group in `range_done`, kept by row triggers that fire
--   only when a row enters or leaves 'done' (a range finishes once; a batch moving
--   `resume` fires nothing).
CREATE INDEX ranges_group_first ON ranges (group_id, first_article);
CREATE INDEX ranges_group_last ON ranges (group_id, last_article);
DROP INDEX ranges_group;
CREATE INDEX ranges_open ON ranges (group_id) WHERE state <> 'done';
-- A kind's ends (the live head's top, the backfill's bottom, the follower's lowest),
-- also in a group that has none of that kind among a million others.
CREATE INDEX ranges_group_kind ON ranges (group_id, kind, last_article);

CREATE TABLE range_done (
    group_id bigint PRIMARY KEY REFERENCES groups,
    ranges bigint NOT NULL,
    -- sum(resume - first_article) and sum(last_article - first_article + 1).
    indexed bigint NOT NULL,
    articles bigint NOT NULL
);

CREATE FUNCTION range_done_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.state = 'done' THEN
        UPDATE range_done
        SET ranges = ranges - 1,
            indexed = indexed - (OLD.resume - OLD.first_article),
            articles = articles - (OLD.last_article - OLD.first_article + 1)
        WHERE group_id = OLD.group_id;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.state = 'done' THEN
        INSERT INTO range_done AS d (group_id, ranges, indexed, articles)
        VALUES (NEW.group_id, 1, NEW.resume - NEW.first_article,
                NEW.last_article - NEW.first_article + 1)
        ON CONFLICT (group_id) DO UPDATE
        SET ranges = d.ranges + 1, indexed = d.indexed + excluded.indexed,
            articles = d.articles + excluded.articles;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER range_done_insert AFTER INSERT ON ranges
    FOR EACH ROW WHEN (NEW.state = 'done') EXECUTE FUNCTION range_done_counted();
CREATE TRIGGER range_done_update AFTER UPDATE ON ranges
    FOR EACH ROW WHEN (OLD.state = 'done' OR NEW.state = 'done')
    EXECUTE FUNCTION range_done_counted();
CREATE TRIGGER range_done_delete AFTER DELETE ON ranges
    FOR EACH ROW WHEN (OLD.state = 'done') EXECUTE FUNCTION range_done_counted();

CREATE FUNCTION range_done_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM range_done;
    RETURN NULL;
END $$;
CREATE TRIGGER range_done_truncate AFTER TRUNCATE ON ranges
    FOR EACH STATEMENT EXECUTE FUNCTION range_done_truncated();

INSERT INTO range_done (group_id, ranges, indexed, articles)
SELECT group_id, count(*), sum(resume - first_article), sum(last_article - first_article + 1)
FROM ranges WHERE state = 'done' GROUP BY group_id;
