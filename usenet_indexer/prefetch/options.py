"""What the prefetcher needs of the settings, read once."""

from __future__ import annotations

import attrs

from usenet_indexer.config import Settings, default
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.nntp.client import tls_context
from usenet_indexer.prefetch.follower import FollowOptions
from usenet_indexer.prefetch.prober import ProbeOptions
from usenet_indexer.prefetch.scheduler import RECHECK_SECONDS
from usenet_indexer.spool.store import SpoolStore, as_spool, open_spool

# How often the servers' figures go to the database, and the sweep runs. Not a
# setting (the same number as prefetch_poll_seconds' default, not that setting).
REPORT_SECONDS = 5.0
# How often the housekeeping lists the spool for chunks stored but never indexed
# (a bucket's LIST is a request per 1000 keys), and how old such a chunk must be
# before it may be deleted: one younger may be between its upload and its row
# (a landing takes milliseconds; a database that stalls, up to its statement
# timeout). Not settings either.
LEFTOVERS_SECONDS = 3600.0
LEFTOVER_GRACE_SECONDS = 600.0


@attrs.frozen
class PrefetchOptions:
    """What the prefetcher needs of the settings; the defaults are the settings' (config.py)."""

    # Where chunks go (a Path is a folder spool).
    spool: SpoolStore = attrs.field(converter=as_spool)
    slice_articles: int = default("prefetch_slice_articles")
    chunk_articles: int = default("prefetch_chunk_articles")
    poll_seconds: float = default("prefetch_poll_seconds")
    budget_bytes: int = default("spool_budget_bytes")  # 0: no limit
    ca_file: str | None = default("nntp_ca_file") or None
    timeout_seconds: float = default("nntp_timeout_seconds")
    # Pauses after failures of a connection in a row: 1, 2, 4 ... 60 s, for ever.
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    report_seconds: float = REPORT_SECONDS
    leftovers_seconds: float = LEFTOVERS_SECONDS
    leftover_grace_seconds: float = LEFTOVER_GRACE_SECONDS
    # A group a server answered 411 for is asked of the servers again after this
    # long (not a setting either).
    recheck_seconds: float = RECHECK_SECONDS
    follow: FollowOptions = attrs.field(factory=FollowOptions)
    probe: ProbeOptions = attrs.field(factory=ProbeOptions)

    @classmethod
    def from_settings(cls, settings: Settings) -> PrefetchOptions:
        """The options of `settings`.

        Raises:
            ConfigError: an `nntp_ca_file` that cannot be read or holds no PEM
                certificate. (The numbers' bounds hold already: Settings checks
                them, config._BOUNDS.)
        """
        if settings.nntp_ca_file:
            tls_context(settings.nntp_ca_file)  # loaded once here: a mistake stops the start
        return cls(
            open_spool(settings),
            settings.prefetch_slice_articles,
            settings.prefetch_chunk_articles,
            settings.prefetch_poll_seconds,
            settings.spool_budget_bytes,
            settings.nntp_ca_file or None,
            settings.nntp_timeout_seconds,
            follow=FollowOptions(
                settings.live_poll_seconds,
                settings.live_margin_articles,
                settings.range_articles,
                settings.backfill_ranges_ahead,
            ),
            probe=ProbeOptions(
                share=settings.probe_share, max_body_bytes=settings.probe_max_body_bytes
            ),
        )
