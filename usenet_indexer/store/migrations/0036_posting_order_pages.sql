-- A whole catalog build or export (store/posting_order.py) reads the stored keys'
-- runs a page of posting time at a time, and the releases stored before their
-- latest date was kept a page of keys at a time, each page through an index:
--
-- * release_times_posted: the chunks posted in a page's interval (and where the
--   next page ends). One statement over every chunk took 53 s and 1.7 GB of
--   temporary files at 3M releases (12M chunks), before the first slice.
-- * releases_undated: the releases with no dated chunk (dated 0 or before
--   1970), which come first; few, and none of the others is in it.
-- * releases_unfilled, release_times_unfilled: the rows whose latest date is
--   not known (stored before migration 0013), empty once a build filled them
--   in. Without them, a page of those keys read every row after the last
--   page's (14 s at 3M releases when none was left).
CREATE INDEX release_times_posted ON release_times (posted);
CREATE INDEX releases_undated ON releases (posted, key) WHERE posted <= 0;
CREATE INDEX releases_unfilled ON releases (key) WHERE latest IS NULL;
CREATE INDEX release_times_unfilled ON release_times (key) WHERE latest IS NULL;
