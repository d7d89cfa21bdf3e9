"""The prober: BODY of each probe candidate's segment, examined, the outcome stored.

Theory of operation
-------------------
Probes share the servers with header fetching and never starve it. Per
server, `probe_slots` of its connections may probe (a share of them,
`probe_share`, 10% by default, rounded down): while one does, the
server's highest header slot yields (`ServerState.probing`), so the
server sees no more connections than configured (a header connection in
the middle of a chunk finishes it first). A server with too few
connections for a share gets one opportunistic slot that probes only
while the header work list is empty, and stops at the next chunk that
comes: leased ranges always come first.

A slot takes a few due candidates (store/probes.py leases them), asks
BODY of each (capped at `max_body_bytes`; a bigger body is recorded as
bad data, never read whole), and hands the body to core/probing.py's
pure `examine`. A 430 is retried later on another server (the next try
skips the servers that answered 430 while others are left), a provider
error later on any; after MAX_ATTEMPTS the candidate is given up. The
decoding runs in a worker thread (yEnc and PAR2 over up to a few MB).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import attrs
import psycopg
import trio

from usenet_indexer.config import default
from usenet_indexer.core.probing import Verdict, examine
from usenet_indexer.decode.ids import NO_IDS, MediaIds
from usenet_indexer.errors import LocalProtocolError, RemoteProtocolError
from usenet_indexer.nntp.client import NNTPClient, StreamFactory, connect
from usenet_indexer.nntp.errors import NNTPError, NoSuchArticle, ReplyError
from usenet_indexer.prefetch.servers import ServerState
from usenet_indexer.store.probes import Outcome, ProbeJob, ProbeStore

logger = logging.getLogger(__name__)


@attrs.frozen
class ProbeOptions:
    """What the prober needs of the settings.

    Attributes:
        share: the share of a server's connections that may probe.
        max_body_bytes: the largest body read (a bigger one is bad data).
        poll_seconds: how often an idle slot looks for due candidates.
        lease_seconds: how long a taken candidate stays a slot's.
        retry_seconds: the first pause before a candidate is tried again.
        batch: candidates taken at once.
    """

    share: float = default("probe_share")
    max_body_bytes: int = default("probe_max_body_bytes")
    # Not settings: poll_seconds is the same number as prefetch_poll_seconds'
    # default, but that setting does not reach it.
    poll_seconds: float = 5.0
    lease_seconds: float = 300.0
    retry_seconds: float = 60.0
    batch: int = 16


def probe_slots(connections: int, share: float) -> int:
    """Connections of a server that may probe at once (0: one, only while idle)."""
    return int(connections * share)


@attrs.define(eq=False)
class Prober:
    """Probes candidates on each server's share of connections."""

    probes: ProbeStore
    servers: list[ServerState]
    options: ProbeOptions
    header_idle: Callable[[], bool]  # no header chunk listed or in flight
    ca_file: str | None = None
    open_stream: StreamFactory | None = None  # tests: a fake server
    observe: Callable[[Outcome], None] = lambda _outcome: None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Probe until cancelled."""
        async with trio.open_nursery() as nursery:
            for state in self.servers:
                slots = probe_slots(state.config.connections, self.options.share)
                for _ in range(max(1, slots)):
                    nursery.start_soon(self._slot, state, slots == 0)
            task_status.started()

    async def _slot(self, state: ServerState, opportunistic: bool) -> None:
        while True:
            if opportunistic and not self.header_idle():
                await trio.sleep(self.options.poll_seconds)
                continue
            try:
                jobs = await trio.to_thread.run_sync(
                    partial(
                        self.probes.take,
                        self.options.batch,
                        self.options.lease_seconds,
                        server=state.config.server,
                        servers=len(self.servers),
                    )
                )
            except psycopg.OperationalError as error:
                logger.warning("probes: cannot read the queue: %s", error)
                jobs = []
            if not jobs:
                await trio.sleep(self.options.poll_seconds)
                continue
            await self._probe_all(state, jobs, opportunistic)

    async def _probe_all(
        self, state: ServerState, jobs: list[ProbeJob], opportunistic: bool
    ) -> None:
        server = state.config.server
        left = list(jobs)  # not probed yet (the first one is in flight)
        failed = False
        state.probing += 1
        try:
            async with connect(
                state.config.url,
                ca_file=self.ca_file,
                max_body_bytes=self.options.max_body_bytes,
                open_stream=self.open_stream,
            ) as client:
                # Until header work comes first, or the connection is spent.
                while left and not (opportunistic and not self.header_idle()):
                    usable = await self._probe(client, server, left[0])
                    del left[0]
                    if not usable:
                        break
        except (NNTPError, RemoteProtocolError) as error:
            logger.warning("probes on %s: %s", server, error)
            failed = True
        finally:
            state.probing -= 1
        await self._give_back(left)
        if failed:  # the server or the connection: not in a tight loop
            await trio.sleep(self.options.retry_seconds)

    async def _probe(self, client: NNTPClient, server: str, job: ProbeJob) -> bool:
        """Probe one candidate; False when the connection cannot be used again."""
        try:
            body = await client.body(f"<{job.message_id}>")
        except LocalProtocolError as error:
            # Not a message-id a command can carry (a hostile subject's): nothing to ask.
            await self._record(job, Outcome.BAD_DATA, detail=str(error))
            return True
        except NoSuchArticle:
            await self._retry(job, Outcome.ARTICLE_MISSING, f"430 on {server}", server)
            return True
        except RemoteProtocolError as error:
            # What the server sent for this article broke the protocol (a line
            # over the cap): bad data, and the connection is spent.
            await self._record(job, Outcome.BAD_DATA, detail=f"{server}: {error}")
            return False
        except ReplyError as error:
            if error.code == 222:  # over max_body_bytes: never read whole; the rest unread
                await self._record(job, Outcome.BAD_DATA, detail=f"{error}")
                return False
            await self._retry(job, Outcome.ARTICLE_MISSING, f"{server}: {error}", None)
            return True
        found = await trio.to_thread.run_sync(examine, body, job.file_name, job.release_name)
        outcome = Outcome(found.verdict.value)
        if found.verdict is Verdict.BAD_DATA:
            logger.info("probe %s: bad data: %s", job.file_name, found.detail)
        await self._record(
            job, outcome, detail=found.detail, body_bytes=len(body), name=found.name,
            files=found.files, sizes=found.sizes, slice_bytes=found.slice_bytes, ids=found.ids,
        )  # fmt: skip
        return True

    async def _record(
        self,
        job: ProbeJob,
        outcome: Outcome,
        *,
        detail: str,
        body_bytes: int | None = None,
        name: str | None = None,
        files: tuple[str, ...] = (),
        sizes: tuple[int, ...] = (),
        slice_bytes: int | None = None,
        ids: MediaIds = NO_IDS,
    ) -> None:
        record = partial(
            self.probes.record, job, outcome, detail=detail, body_bytes=body_bytes, name=name,
            files=files, sizes=sizes, slice_bytes=slice_bytes, ids=ids,
        )  # fmt: skip
        await self._store(record, "record", job, outcome)

    async def _retry(
        self, job: ProbeJob, outcome: Outcome, detail: str, server: str | None
    ) -> None:
        retry = partial(
            self.probes.retry, job, outcome, detail, server=server,
            pause_seconds=self.options.retry_seconds,
        )  # fmt: skip
        await self._store(retry, "put back", job, outcome)

    async def _store(
        self, call: Callable[[], object], what: str, job: ProbeJob, outcome: Outcome
    ) -> None:
        """One store call for a candidate in a worker thread; told to `observe` once done
        (the database away: a warning, and the lease passes the candidate on)."""
        try:
            await trio.to_thread.run_sync(call)
        except psycopg.OperationalError as error:
            logger.warning("probes: cannot %s %s: %s", what, job.file_name, error)
            return
        self.observe(outcome)

    async def _give_back(self, jobs: list[ProbeJob]) -> None:
        """Candidates taken and not probed: due again at once, the attempt not counted."""
        if not jobs:
            return
        with trio.CancelScope(shield=True):
            try:
                await trio.to_thread.run_sync(self.probes.give_back, jobs)
            except psycopg.OperationalError as error:
                logger.warning("probes: cannot give back %d candidates: %s", len(jobs), error)
