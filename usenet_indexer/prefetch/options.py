"""What the prefetcher needs of the settings, read once."""

from __future__ import annotations

import attrs

from usenet_indexer.config import Settings, default
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.errors import ConfigError
from usenet_indexer.nntp.client import tls_context
from usenet_indexer.prefetch.follower import FollowOptions
from usenet_indexer.prefetch.prober import ProbeOptions
from usenet_indexer.spool.store import SpoolStore, as_spool, open_spool

# How often the servers' figures go to the database, and the sweep runs. Not a
# setting (the same number as prefetch_poll_seconds' default, not that setting).
REPORT_SECONDS = 5.0


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
    follow: FollowOptions = attrs.field(factory=FollowOptions)
    probe: ProbeOptions = attrs.field(factory=ProbeOptions)

    @classmethod
    def from_settings(cls, settings: Settings) -> PrefetchOptions:
        """The options of `settings`.

        Raises:
            ConfigError: a slice or chunk size below one article, an
                `nntp_ca_file` that cannot be read or holds no PEM certificate.
        """
        for key in ("prefetch_slice_articles", "prefetch_chunk_articles", "range_articles"):
            if getattr(settings, key) < 1:
                raise ConfigError(key, "must be at least 1")
        if settings.live_poll_seconds <= 0:
            raise ConfigError("live_poll_seconds", "must be more than 0")
        if settings.live_margin_articles < 0:
            raise ConfigError("live_margin_articles", "must not be negative")
        if settings.backfill_ranges_ahead < 1:
            raise ConfigError("backfill_ranges_ahead", "must be at least 1")
        if settings.probe_share > 1:
            raise ConfigError("probe_share", "is a share of the connections: at most 1")
        if settings.probe_max_body_bytes < 1 << 16:
            raise ConfigError("probe_max_body_bytes", "must be at least 65536 (a segment's)")
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
