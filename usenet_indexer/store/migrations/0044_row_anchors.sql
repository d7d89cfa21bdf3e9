-- A row's anchor: the first message-id of the file chunk its guid was made of
-- (core/merge.py `_keyed`). A build reads the anchors of the rows of the keys it
-- merges (store/catalog.py `pins`) and the generation that holds a row's anchor
-- keeps the row's guid, so an upload indexed late (a backfill of an earlier
-- upload under the same release key, or of an upload's own first articles)
-- moves no stored row's guid to other content. Rows written before have none
-- until a build writes them again: until then they are keyed as before.
ALTER TABLE catalog ADD COLUMN anchor text;
