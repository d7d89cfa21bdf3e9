"""The spool-prefetcher: NNTP connections filling the coordinator's spool.

plan.py     pure: which chunks are missing, in which order, clipped to the server
servers.py  the servers of the settings (URL, connections) and their live figures
daemon.py   the trio side: scheduler, one task per connection, housekeeping, signals
"""
