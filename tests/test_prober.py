"""The prefetcher's prober against the FAKE NNTP server, with a real PostgreSQL queue.

The fake (usenet_indexer/testing/fake_nntp.py) answers BODY from a script:
a real par2 index's first segment (made by par2cmdline), a 430, and a body
over the cap, which a real INN2 will not give on demand. The prober must
record each outcome, retry the 430 on a later pass, and hold the server's
highest header slot while it probes (`ServerState.probing`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.prefetch.prober import ProbeOptions, Prober, probe_slots
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.store.probes import ProbeStore
from usenet_indexer.testing.fake_nntp import FakeNNTPServer, multiline
from usenet_indexer.testing.obfuscated import ToolMissing, build

URL = "nntp://fake.invalid:119?connections=10"


def body_reply(body: bytes) -> bytes:
    return multiline("222 0 <x> body", body.split(b"\r\n")[:-1])


@pytest.mark.trio
async def test_the_prober_records_what_each_body_says_on_its_share(
    nursery: trio.Nursery, stores: Stores, tmp_path: Path
) -> None:
    try:
        upload = build(tmp_path, "newsup", 0, seed=2, posted=1_796_000_000)
    except ToolMissing as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))
    par2 = next(a for a in upload.articles if '"rename.with.this.par2"' in a.subject)
    with stores.catalog.pool.connection() as conn:
        conn.execute(
            "INSERT INTO probe_candidates (release_key, message_id, file_name) VALUES"
            " (%s, %s, 'rename.with.this.par2'), (%s, 'gone@x', 'a.par2'),"
            " (%s, 'huge@x', 'b.par2')",
            (b"a" * 16, par2.message_id.strip("<>"), b"b" * 16, b"c" * 16),
        )
    fake = FakeNNTPServer(
        replies={
            f"BODY {par2.message_id}": body_reply(par2.body),
            "BODY <gone@x>": b"430 no such article\r\n",
            "BODY <huge@x>": body_reply(
                b"=ybegin line=128 size=1 name=x\r\n" + b"A" * 70_000 * 2 + b"\r\n"
            ),
        }
    ).run_in(nursery)
    (state,) = [ServerState.of(c) for c in server_configs((URL,), 4)]
    assert probe_slots(state.config.connections, 0.1) == 1
    held: list[int] = []
    three = trio.Event()

    def observed(_outcome: object) -> None:
        held.append(state.probing)
        if len(held) == 3:
            three.set()

    prober = Prober(
        ProbeStore(stores.catalog.pool),
        [state],
        ProbeOptions(share=0.1, max_body_bytes=100_000, poll_seconds=0.05),
        header_idle=lambda: True,
        open_stream=fake.open_stream,
        observe=observed,
    )
    async with trio.open_nursery() as probing:
        await probing.start(prober.run)
        with trio.fail_after(30):
            await three.wait()
        probing.cancel_scope.cancel()
    assert held == [1, 1, 1]  # each outcome while one header slot yields
    assert state.probing == 0
    with stores.catalog.pool.connection() as conn:
        rows: dict[str, tuple[object, ...]] = {
            str(r[0]): tuple(r[1:])
            for r in conn.execute(
                "SELECT message_id, state, outcome, found_name, missing_on FROM probe_candidates"
            ).fetchall()
        }
    assert rows[par2.message_id.strip("<>")] == ("done", "renamed", upload.real_name, [])
    assert rows["gone@x"] == ("new", "article_missing", None, ["fake.invalid:119"])
    assert rows["huge@x"][:2] == ("done", "bad_data")
