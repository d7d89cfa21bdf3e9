"""How many files a coordinator process may hold open.

Every connection an edge holds to the coordinator is a descriptor of the
coordinator's: an edge worker keeps 2-4 (its API client, its range stream,
the next range's, its catalog build asks), besides the spool chunks being
read, the pool's PostgreSQL connections and the listener. The soft limit a
process starts with is often 1,024 (systemd's default LimitNOFILE, most
shells') while the hard limit is far higher: with 48 edge workers on 100
descriptors (`scripts`' scale hunt, the same ratio as ~250 workers on 1,024)
accept failed with EMFILE every 0.1 s, spool chunks could not be opened, and
edges saw connection errors and gave their ranges back lease after lease.

`allow_open_files` raises the soft limit to the hard one (which only the
administrator can raise: LimitNOFILE in the unit), at the process's start,
as servers that hold a connection per client do (Go's runtime, nginx's
worker_rlimit_nofile). Where there is no such limit (not POSIX), nothing is
set.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

# The most asked for when the hard limit is unlimited (Linux refuses more than
# fs.nr_open, 1,048,576 by default, for RLIMIT_NOFILE).
MOST_OPEN_FILES = 1 << 20


def allow_open_files() -> int | None:
    """Raise this process's soft limit of open files to its hard limit.

    Returns:
        The soft limit now; None where the platform has no such limit.
    """
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = MOST_OPEN_FILES if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as error:
            logger.warning("open files: the limit stays %d (%d refused: %s)", soft, wanted, error)
            return soft
        logger.info("open files: the limit raised from %d to %d (the hard limit)", soft, wanted)
        return wanted
    return soft
