"""The coordinator's stores: sync psycopg, one module (and its SQL) per store.

Callers on a trio loop run each store call in `trio.to_thread.run_sync`: one
hop per unit of work, never a transaction held across network I/O.
"""
