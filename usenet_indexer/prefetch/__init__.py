"""The spool-prefetcher: NNTP connections filling the coordinator's spool.

What to fetch next is pure and lives with the spool (spool/plan.py).

servers.py  the servers of the settings (URL, connections) and their live figures
daemon.py   the trio side: scheduler, one task per connection, housekeeping, signals
"""
