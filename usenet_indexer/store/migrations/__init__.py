"""The schema, as numbered SQL files `NNNN_name.sql` applied in order by `usenet_indexer.store.migrate`.

Each file runs in one transaction together with its row in schema_migrations,
so a file must not BEGIN or COMMIT itself, nor use statements that cannot run
in a transaction (CREATE INDEX CONCURRENTLY). A file is never edited once it
has shipped: a change is a new file.
"""
