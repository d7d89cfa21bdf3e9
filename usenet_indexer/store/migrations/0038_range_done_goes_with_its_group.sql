-- range_done (0032) holds a group's count of done ranges: a derived row, kept by
-- triggers on ranges. Its key referenced groups without a delete rule, so an
-- operator removing a group by hand (its batches, ranges and spool rows, then the
-- group) was refused on a row they need not know of. The row now goes with its
-- group. (Numbered 0038, not 0037: another change in flight takes 0037; the
-- migrator applies whatever is missing, in order.)
ALTER TABLE range_done
    DROP CONSTRAINT range_done_group_id_fkey,
    ADD CONSTRAINT range_done_group_id_fkey
        FOREIGN KEY (group_id) REFERENCES groups ON DELETE CASCADE;
