"""The spool-prefetcher: NNTP connections filling the coordinator's spool.

What to fetch next is pure and lives with the spool (spool/plan.py); which
connection fetches which chunk is pure too (scheduler.py), and the rest of
the package is its trio shell.

options.py       PrefetchOptions: what the prefetcher needs of the settings
events.py        Landed, Reported: what a test or a log observes
servers.py       the servers of the settings (URL, connections) and their live figures
scheduler.py     pure: the work list's decisions; time comes in as `now`, reads go out
                 as actions (`take(server, now) -> ChunkJob | Refresh | Pending`)
work.py          the scheduler's adapter: the clock, the work list read in a thread
                 (one read at a time, no lock held across it), the observer
connection.py    one connection's task: connect, GROUP, the chained OVER pipeline
landing.py       a chunk into the spool: fsync, rename and index row in one thread call
housekeeping.py  the servers' figures to the database, the sweep of the spool
daemon.py        the Prefetcher (the wiring), `run_prefetcher`, signals, the database wait
"""

# Sans-IO modules of this package (tests/test_purity.py checks them).
PURE_MODULES = ("scheduler",)
