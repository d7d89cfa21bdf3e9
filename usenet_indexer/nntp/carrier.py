"""A connection to the first of the configured servers that carries a group (trio adapter).

`uidx groups add`, `uidx ranges plan --days` and the prefetcher's follower
ask GROUP through it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

import attrs

from usenet_indexer.errors import RemoteProtocolError
from usenet_indexer.nntp.client import (
    DEFAULT_TIMEOUT_SECONDS,
    NNTPClient,
    ServerURL,
    StreamFactory,
    connect,
)
from usenet_indexer.nntp.errors import NNTPError, NoSuchGroup

if TYPE_CHECKING:
    from usenet_indexer.config import Settings

logger = logging.getLogger(__name__)


@attrs.frozen
class Carrier:
    """A server that carries the group: the connection, in the group, and what GROUP said."""

    client: NNTPClient
    count: int
    low: int
    high: int

    @property
    def server(self) -> str:
        return self.client.server


@asynccontextmanager
async def carrying(
    urls: Sequence[str],
    group: str,
    *,
    ca_file: str | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    open_stream: StreamFactory | None = None,
) -> AsyncIterator[Carrier]:
    """A connection to the first server of `urls` that carries `group`, the group selected.

    A server that is down or refuses is logged and passed over.

    Raises:
        NoSuchGroup: every server answered 411.
        NNTPError: no server carries the group and some did not answer.
        ConfigError: a URL is not an NNTP URL.
    """
    refusals: list[str] = []
    missing = 0  # servers that answered 411
    for url in urls:
        async with AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(
                    connect(
                        url,
                        ca_file=ca_file,
                        timeout_seconds=timeout_seconds,
                        open_stream=open_stream,
                    )
                )
                count, low, high = await client.group(group)
            except (NNTPError, RemoteProtocolError) as error:
                # An NNTPError names its server; a protocol error does not (and the
                # URL may hold a password).
                said = str(error) if isinstance(error, NNTPError) else f"{_where(url)}: {error}"
                refusals.append(said)
                if isinstance(error, NoSuchGroup):
                    missing += 1
                else:
                    logger.warning("GROUP %s: passing over a server: %s", group, said)
                continue
            yield Carrier(client, count, low, high)
            return
    details = "; ".join(refusals)
    if missing == len(urls):
        raise NoSuchGroup(411, f"no server carries {group} ({details})", command=f"GROUP {group}")
    raise NNTPError(f"GROUP {group}: no server that answered carries it ({details})")


def _where(url: str) -> str:
    return ServerURL.parse(url).server


def carrying_as_set(settings: Settings, group: str) -> AbstractAsyncContextManager[Carrier]:
    """`carrying` with the servers, CA file and timeout of the settings, as the
    prefetcher takes them (prefetch/options.py): what the operator's commands ask."""
    return carrying(
        settings.nntp,
        group,
        ca_file=settings.nntp_ca_file or None,
        timeout_seconds=settings.nntp_timeout_seconds,
    )
