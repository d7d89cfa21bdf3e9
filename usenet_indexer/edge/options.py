"""What an edge worker is told: settings, limits, and the command line's choices."""

from __future__ import annotations

from typing import Any, Final

import attrs

from usenet_indexer.config import Settings, default
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.errors import ConfigError

# A spool chunk holds some 10k-100k overview lines (a few MB compressed); a
# frame announcing more than this is refused before its payload is buffered.
# A cap, not a setting (the same number as max_body_bytes' default, not that
# setting: that one caps a batch body the coordinator reads).
MAX_CHUNK_PAYLOAD_BYTES: Final = 256 << 20

# And inflated: ~314 B per line makes 100k lines ~31 MB. The cap only stops
# a corrupt or hostile chunk from taking the worker's memory.
MAX_CHUNK_TEXT_BYTES: Final = 1 << 30

# Giving a range back at the end of a stop: one small POST, retried; past
# this the lease simply expires on the coordinator.
GIVE_BACK_SECONDS: Final = 30.0

# ... but at a stop (SIGTERM), or a range cut short from outside (a cancel), a try or
# two at most: a stopping edge is gone within 2 s (its lease wait is cut at once), and
# a lease its coordinator did not take back (gone, or not answering) expires there by
# itself after the lease TTL.
STOP_GIVE_BACK_SECONDS: Final = 1.5

# A lease lasts lease_ttl_seconds from its last batch or heartbeat: three
# heartbeats per TTL leave room for two to be lost or slow.
HEARTBEATS_PER_TTL: Final = 3


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be positive, not {value}")


def _positive_or_none(
    instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} must be at least 1, not {value}")


@attrs.frozen(kw_only=True)
class EdgeOptions:
    """How one edge worker runs.

    Attributes:
        coordinator_url: the coordinator's base URL (the node API path is added).
        node_token: the bearer token (never logged).
        ranges: stop after this many ranges, and at the first 204; None to
            run until stopped.
        batch_articles: articles per posted batch.
        idle_seconds: the wait after a 204 (or a failed range) before asking again.
        heartbeat_seconds: the longest a lease goes without a batch or heartbeat.
        retry: the backoff of failed requests.
        give_back_seconds: the deadline of the shielded release at the end.
        stop_give_back_seconds: its deadline from a stop (before or during it), or
            when the range is cut short from outside (a cancel, a KeyboardInterrupt).
        max_payload_bytes: the largest chunk payload accepted.
        max_text_bytes: the most a chunk may inflate to.
        pure_indexer: run the RangeIndexer's pure-Python loop (settings.pure_indexer).
    """

    coordinator_url: str
    node_token: str = attrs.field(repr=False)
    ranges: int | None = attrs.field(default=None, validator=_positive_or_none)
    batch_articles: int = attrs.field(default=default("batch_articles"), validator=_positive)
    idle_seconds: float = attrs.field(default=default("idle_seconds"), validator=_positive)
    heartbeat_seconds: float = attrs.field(
        default=default("lease_ttl_seconds") / HEARTBEATS_PER_TTL, validator=_positive
    )
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    give_back_seconds: float = attrs.field(default=GIVE_BACK_SECONDS, validator=_positive)
    stop_give_back_seconds: float = attrs.field(default=STOP_GIVE_BACK_SECONDS, validator=_positive)
    max_payload_bytes: int = attrs.field(default=MAX_CHUNK_PAYLOAD_BYTES, validator=_positive)
    max_text_bytes: int = attrs.field(default=MAX_CHUNK_TEXT_BYTES, validator=_positive)
    pure_indexer: bool = False

    @classmethod
    def from_settings(
        cls, settings: Settings, *, ranges: int | None = None, batch_articles: int | None = None
    ) -> EdgeOptions:
        """The options of an edge with these settings and command line.

        Args:
            settings: coordinator_url, node_token, batch_articles,
                idle_seconds, lease_ttl_seconds.
            ranges: --ranges, or None.
            batch_articles: --batch-articles, or None for the setting.

        Returns:
            The options; change one with `attrs.evolve`.

        Raises:
            ConfigError: COORDINATOR_URL or NODE_TOKEN is not set (the message
                names the missing ones).
        """
        missing = [
            name
            for name, value in (
                ("COORDINATOR_URL", settings.coordinator_url),
                ("NODE_TOKEN", settings.node_token),
            )
            if not value.strip()
        ]
        if missing:
            raise ConfigError(
                " and ".join(missing),
                "an edge needs COORDINATOR_URL and NODE_TOKEN (environment or settings file)",
            )
        return cls(
            coordinator_url=settings.coordinator_url.strip(),
            node_token=settings.node_token.strip(),
            ranges=ranges,
            batch_articles=batch_articles or settings.batch_articles,
            idle_seconds=settings.idle_seconds,
            heartbeat_seconds=settings.lease_ttl_seconds / HEARTBEATS_PER_TTL,
            pure_indexer=settings.pure_indexer,
        )
