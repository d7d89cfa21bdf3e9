"""The supervisor: N worker processes of a daemon, restarted, stopped, watched.

policy.py   pure: what to do when a worker ends (restart after a pause,
            retire, halt); EXIT_STARTUP_ERROR
arbiter.py  the process side: spawn, reap, forward signals, SIGKILL late ones
notify.py   sd_notify (READY=1, STOPPING=1) for systemd's Type=notify
parent.py   the worker side: watch_parent(fd, stop), a trio task
report.py   a worker's start-up error, told to the supervisor (said once for all)
entry.py    supervised(...): what a daemon command calls first
startup.py  stop_signals(): a stop signal during the supervisor's own start-up
            (the embedded cluster's start, the migrations) ends it cleanly
"""

from usenet_indexer.supervisor.policy import EXIT_STARTUP_ERROR

__all__ = ["EXIT_STARTUP_ERROR"]

# Sans-IO modules of this package (tests/test_purity.py checks them).
PURE_MODULES = ("policy",)
