"""The trio NNTP client: faults against an in-memory fake server, round trips against INN2.

Every test has a deadline (trio.fail_after); the fake server's stalls run on
the autojump clock, so nothing sleeps for real.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

# The wire forms of compressed replies (what the fake server sends).
from test_nntp_compressed import gzip_data, xzver_data

from usenet_indexer.errors import ConfigError
from usenet_indexer.nntp.client import (
    NNTPClient,
    OverviewText,
    ServerURL,
    connect,
    masked,
    tls_context,
)
from usenet_indexer.nntp.errors import (
    AuthRequired,
    CompressionError,
    ConnectionLost,
    LineTooLong,
    MalformedResponse,
    NoSuchArticle,
    NoSuchGroup,
    ReplyError,
    Timeout,
    Unavailable,
)
from usenet_indexer.testing.fake_nntp import FakeNNTPServer, Reply, multiline, stall
from usenet_indexer.testing.newsd import generate_articles

if TYPE_CHECKING:
    from nntp_fixtures import NewsServer

# The news_server fixture; harmless once tests/conftest.py lists the plugin too.

DEADLINE_SECONDS = 30
INN_DEADLINE_SECONDS = 120

# -- the in-memory fake server (usenet_indexer/testing/fake_nntp.py) ---------------


@asynccontextmanager
async def running_fake(fake: FakeNNTPServer | None = None) -> AsyncIterator[FakeNNTPServer]:
    """A fake server whose connections end (cancelled) when the block does."""
    async with trio.open_nursery() as nursery:
        yield (fake or FakeNNTPServer()).run_in(nursery)
        nursery.cancel_scope.cancel()


def _overview(number: int) -> bytes:
    return (
        f"{number}\tsubject {number} yEnc (1/1)\tposter\tdate\t<{number}@fake>\t\t100\t1".encode()
    )


def _fake_connect(
    fake: FakeNNTPServer, url: str = "nntp://fake.example:119", **options: Any
) -> Any:
    return connect(url, open_stream=fake.open_stream, **options)


@pytest.mark.trio
async def test_fake_round_trip_pipelined_in_order() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.groups["g"] = (1, 100)
            fake.overview = {n: _overview(n) for n in range(1, 101) if not 41 <= n <= 50}
            async with _fake_connect(fake) as client:
                assert await client.group("g") == (100, 1, 100)
                slices = [(n, n + 9) for n in range(1, 101, 10)]
                got = [item async for item in client.over_pipelined(slices, depth=3)]
            assert [s for s, _ in got] == slices
            assert got[4] == ((41, 50), [])  # 423: an empty slice, not an error
            assert got[0][1] == [_overview(n) for n in range(1, 11)]
            assert fake.received[-1] == "QUIT"


@pytest.mark.trio
async def test_fake_dot_lines_and_xover() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.overview = {1: b".starts with a dot", 2: b"..two dots", 3: b"."}
            async with _fake_connect(fake) as client:
                lines = [x async for piece in client.over(1, 3, xover=True) for x in piece]
            assert lines == [b".starts with a dot", b"..two dots", b"."]
            assert "XOVER 1-3" in fake.received


@pytest.mark.trio
async def test_fake_dropped_mid_response() -> None:
    async def half_then_drop(_line: str) -> Reply:
        return multiline("224 overview", [_overview(n) for n in range(11, 21)])[:150]

    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.overview = {n: _overview(n) for n in range(1, 31)}
            fake.replies["OVER 11-20"] = half_then_drop
            fake.replies["OVER 21-30"] = None
            got: list[tuple[tuple[int, int], list[bytes]]] = []

            async def read_all(client: NNTPClient) -> None:
                async for item in client.over_pipelined([(1, 10), (11, 20), (21, 30)]):
                    got.append(item)

            async with _fake_connect(fake) as client:
                with pytest.raises(ConnectionLost):
                    await read_all(client)
                # Whole slices only: the half-sent one is not there.
                assert got == [((1, 10), [_overview(n) for n in range(1, 11)])]
                with pytest.raises(ConnectionLost, match="unusable"):
                    await client.group("g")


@pytest.mark.trio
async def test_fake_abandoned_reply_makes_the_connection_unusable() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.overview = {n: _overview(n) for n in range(1, 11)}
            async with _fake_connect(fake) as client:
                pieces = client.over(1, 10)
                async with aclosing(pieces):
                    async for _ in pieces:
                        break
                with pytest.raises(ConnectionLost, match="abandoned"):
                    await client.date()


@pytest.mark.trio
async def test_fake_cancelled_command_makes_the_connection_unusable(
    autojump_clock: trio.abc.Clock,
) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.replies["GROUP"] = stall
            async with _fake_connect(fake, timeout_seconds=60) as client:
                with trio.move_on_after(5):
                    await client.group("g")
                with pytest.raises(ConnectionLost, match="cancelled"):
                    await client.date()


@pytest.mark.trio
async def test_fake_mode_reader_when_the_server_asks_for_it() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        fake_caps = ["VERSION 2", "MODE-READER", "IHAVE"]
        async with running_fake(FakeNNTPServer(greeting=b"201 transit server\r\n")) as fake:
            fake.capabilities = fake_caps
            fake.replies["MODE READER"] = b"200 reader now\r\n"
            async with _fake_connect(fake):
                pass
            assert fake.received[:3] == ["CAPABILITIES", "MODE READER", "CAPABILITIES"]


@pytest.mark.trio
async def test_fake_dropped_before_a_reply() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.replies["GROUP"] = None
            async with _fake_connect(fake) as client:
                with pytest.raises(ConnectionLost):
                    await client.group("g")


@pytest.mark.parametrize(
    "greeting", [b"502 too many connections from your host\r\n", b"400 service not available\r\n"]
)
@pytest.mark.trio
async def test_fake_too_many_connections_at_greeting(greeting: bytes) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake(FakeNNTPServer(greeting=greeting)) as fake:
            with pytest.raises(Unavailable) as caught:
                async with _fake_connect(fake):
                    pass  # pragma: no cover
            assert caught.value.code == int(greeting[:3])
            assert "fake.example:119" in str(caught.value)


@pytest.mark.trio
async def test_fake_502_on_a_command() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.replies["GROUP"] = b"502 connection limit reached\r\n"
            async with _fake_connect(fake) as client:
                with pytest.raises(Unavailable):
                    await client.group("g")


@pytest.mark.trio
async def test_fake_480_and_auth() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.replies["GROUP"] = b"480 authentication required\r\n"
            async with _fake_connect(fake) as client:
                with pytest.raises(AuthRequired):
                    await client.group("g")
                assert await client.date() == "20261130120000"  # still usable
            fake.replies["AUTHINFO USER me"] = b"381 more\r\n"
            fake.replies["AUTHINFO PASS bad"] = b"481 rejected\r\n"
            with pytest.raises(AuthRequired, match="481"):
                async with _fake_connect(fake, "nntp://me:bad@fake.example"):
                    pass  # pragma: no cover
            # An account's connection cap, said to AUTHINFO: not a refused login.
            fake.replies["AUTHINFO PASS good"] = b"502 too many connections for your user\r\n"
            with pytest.raises(Unavailable, match="502"):
                async with _fake_connect(fake, "nntp://me:good@fake.example"):
                    pass  # pragma: no cover


@pytest.mark.trio
async def test_fake_stall_times_out(autojump_clock: trio.abc.Clock) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.replies["OVER"] = stall
            started = trio.current_time()
            async with _fake_connect(fake, timeout_seconds=20) as client:
                with pytest.raises(Timeout, match="20"):
                    async for _ in client.over(1, 10):
                        pass  # pragma: no cover
                assert 20 <= trio.current_time() - started < 21
                with pytest.raises(ConnectionLost):
                    await client.date()


@pytest.mark.trio
async def test_fake_overview_lines_over_the_cap_are_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    line = b"2\tspam " + b"x" * 5000 + b"\tp@x\tdate\t<2@x>\t\t9\t1"
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.groups["alt.binaries.test"] = (1, 5)
            fake.overview = {1: b"1\ta", 2: line, 3: b"3\tc", 4: line, 5: b"5\te"}
            async with _fake_connect(fake, max_line_bytes=4096) as client:
                await client.group("alt.binaries.test")
                assert [x async for piece in client.over(1, 2) for x in piece] == [b"1\ta"]
                pieces = client.over_text_pipelined([(3, 5)])
                got = [(s, t.lines, b"".join(t.blocks)) async for s, t in pieces]
                assert got == [((3, 5), 2, b"3\tc\n5\te\n")]
                assert await client.date()  # still usable
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "fake.example:119 alt.binaries.test OVER 1-2: 1 overview line(s) over 4096 bytes skipped",
        "fake.example:119 alt.binaries.test OVER 3-5: 1 overview line(s) over 4096 bytes skipped",
    ]


@pytest.mark.trio
async def test_fake_absurd_lines() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.replies["LIST OVERVIEW.FMT"] = multiline("215 fields", [b"x" * 5000])
            async with _fake_connect(fake, max_line_bytes=4096) as client:
                with pytest.raises(LineTooLong, match="4096"):
                    await client.overview_format()
            fake.replies["GROUP"] = b"211 lots of articles\r\n"
            async with _fake_connect(fake) as client:
                with pytest.raises(MalformedResponse):
                    await client.group("g")
            fake.replies["DATE"] = b"\x00\x01 binary junk\r\n"
            async with _fake_connect(fake) as client:
                with pytest.raises(MalformedResponse):
                    await client.date()


@pytest.mark.trio
async def test_fake_article_numbers_beyond_2_to_the_32() -> None:
    low = 2**32 + 5
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.groups["big"] = (low, low + 99)
            fake.overview = {n: _overview(n) for n in range(low, low + 100)}
            async with _fake_connect(fake) as client:
                assert await client.group("big") == (100, low, low + 99)
                got = [
                    x async for _, lines in client.over_pipelined([(low, low + 99)]) for x in lines
                ]
            assert got == [_overview(n) for n in range(low, low + 100)]
            assert f"OVER {low}-{low + 99}" in fake.received


@pytest.mark.trio
async def test_fake_body_and_missing_article() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.replies["BODY <a@b>"] = multiline("222 0 <a@b>", [b"=ybegin", b".dot", b"=yend"])
            fake.replies["BODY <big@b>"] = multiline("222 0 <big@b>", [b"y" * 1000] * 100)
            fake.replies["BODY <gone@b>"] = b"430 no such article\r\n"
            async with _fake_connect(fake, max_body_bytes=10_000) as client:
                assert await client.body("<a@b>") == b"=ybegin\r\n.dot\r\n=yend\r\n"
                with pytest.raises(NoSuchArticle):
                    await client.body("<gone@b>")
                with pytest.raises(NoSuchGroup):
                    await client.group("nothing.here")
                with pytest.raises(ReplyError, match="10000"):
                    await client.body("<big@b>")


@pytest.mark.trio
async def test_fake_compress_garbage_falls_back_to_plain(caplog: pytest.LogCaptureFixture) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.capabilities.append("COMPRESS DEFLATE")
            fake.replies["COMPRESS DEFLATE"] = b"206 compression on\r\nthis is not deflate\r\n"
            fake.groups["g"] = (1, 2)
            async with _fake_connect(fake) as client:
                assert client.compression is None
                assert await client.group("g") == (2, 1, 2)
            assert fake.connections == 2
            assert "does not inflate" in caplog.text


@pytest.mark.trio
async def test_fake_compress_deflate() -> None:
    """A fake that really deflates: both directions are one raw deflate stream each."""
    with trio.fail_after(DEADLINE_SECONDS):
        client_end, server_end = trio.testing.memory_stream_pair()

        async def server() -> None:
            await server_end.send_all(b"200 hi\r\n")
            await _expect_line(server_end, b"CAPABILITIES\r\n")
            await server_end.send_all(multiline("101 caps", [b"VERSION 2", b"COMPRESS DEFLATE"]))
            await _expect_line(server_end, b"COMPRESS DEFLATE\r\n")
            deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
            await server_end.send_all(b"206 on\r\n" + _deflate(deflater, b""))
            inflater = zlib.decompressobj(-15)
            assert inflater.decompress(await server_end.receive_some(1000)) == b"DATE\r\n"
            await server_end.send_all(_deflate(deflater, b"111 20260101000000\r\n"))
            assert inflater.decompress(await server_end.receive_some(1000)) == b"OVER 1-2\r\n"
            reply = multiline("224 ov", [_overview(1), _overview(2)])
            await server_end.send_all(_deflate(deflater, reply))
            assert inflater.decompress(await server_end.receive_some(1000)) == b"QUIT\r\n"
            await server_end.send_all(_deflate(deflater, b"205 bye\r\n"))

        async def open_stream() -> trio.abc.Stream:
            return client_end

        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            async with connect("nntp://fake", open_stream=open_stream) as client:
                assert client.compression == "DEFLATE"
                assert [x async for p in client.over(1, 2) for x in p] == [
                    _overview(1),
                    _overview(2),
                ]


def _compressing_fake(
    fake: FakeNNTPServer, *, xfeature: str | None = None, xzver: bool = False, articles: int = 40
) -> FakeNNTPServer:
    """The fake offering XFEATURE COMPRESS GZIP and/or XZVER in CAPABILITIES, group "g"."""
    if xfeature is not None:
        fake.gzip_overview = partial(gzip_data, variant=xfeature)
        fake.capabilities.append("XFEATURE-COMPRESS GZIP TERMINATOR")
    if xzver:
        fake.xzver_overview = xzver_data
        fake.capabilities.append("XZVER")
    fake.groups["g"] = (1, articles)
    fake.overview = {n: _overview(n) for n in range(1, articles + 1)}
    return fake


SLICES = [(1, 10), (11, 20), (21, 30), (31, 40)]


def _expected(slices: list[tuple[int, int]]) -> list[tuple[tuple[int, int], list[bytes]]]:
    return [((a, b), [_overview(n) for n in range(a, b + 1)]) for a, b in slices]


@pytest.mark.parametrize("variant", ["a", "b", "c"])
@pytest.mark.trio
async def test_fake_xfeature_gzip_pipelined(variant: str) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            _compressing_fake(fake, xfeature=variant, xzver=True)
            async with _fake_connect(fake) as client:
                assert client.compression == "GZIP"  # preferred over XZVER
                await client.group("g")
                got = [item async for item in client.over_pipelined(SLICES, depth=3)]
                assert got == _expected(SLICES)
                assert await _text_slices(client, depth=3) == _expected(SLICES)
                assert [x async for piece in client.over(5, 7) for x in piece] == [
                    _overview(n) for n in (5, 6, 7)
                ]
                assert await client.date() == "20261130120000"  # in step after it all
            assert "XFEATURE COMPRESS GZIP TERMINATOR" in fake.received
            assert "OVER 11-20" in fake.received
            assert fake.connections == 1


@pytest.mark.parametrize("where", ["CAPABILITIES", "LIST EXTENSIONS"])
@pytest.mark.trio
async def test_fake_xzver(where: str) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            _compressing_fake(fake, xzver=True)
            if where == "LIST EXTENSIONS":
                fake.capabilities.remove("XZVER")
                fake.extensions = ["OVER", "XZVER", "XZHDR"]
            async with _fake_connect(fake, compress=True) as client:
                assert client.compression == "XZVER"
                await client.group("g")
                got = [item async for item in client.over_pipelined(SLICES, xover=True)]
                assert got == _expected(SLICES)
                assert await _text_slices(client, xover=True) == _expected(SLICES)
            assert [x for x in fake.received if x.startswith("XZVER")] == [
                "XZVER 1-10", "XZVER 11-20", "XZVER 21-30", "XZVER 31-40",
            ] * 2  # fmt: skip
            assert not any(x.startswith(("OVER", "XOVER")) for x in fake.received)


@pytest.mark.trio
async def test_fake_compress_false_and_refused_xfeature() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            _compressing_fake(fake, xfeature="a", xzver=True)
            async with _fake_connect(fake, compress=False) as client:
                assert client.compression is None
            assert not any(x.startswith(("XFEATURE", "LIST")) for x in fake.received)
            fake.replies["XFEATURE"] = b"500 unknown command\r\n"
            async with _fake_connect(fake) as client:
                assert client.compression == "XZVER"  # the next one offered


@pytest.mark.parametrize("xzver", [False, True])
@pytest.mark.trio
async def test_fake_gzip_garbage_reopens_without_it(
    caplog: pytest.LogCaptureFixture, xzver: bool
) -> None:
    """Garbage in the second slice: the connection is reopened, no slice lost or doubled."""
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            _compressing_fake(fake, xfeature="a", xzver=xzver)
            fake.garble = {"OVER 11-20": "junk", "XZVER 11-20": "junk"}
            async with _fake_connect(fake) as client:
                assert client.compression == "GZIP"
                await client.group("g")
                got = await _text_slices(client, depth=3)
                assert got == _expected(SLICES)
                assert client.compression is None
                assert await client.date() == "20261130120000"
            # GZIP broke, then XZVER (when offered) too: a connection for each.
            assert fake.connections == (3 if xzver else 2)
            assert fake.received.count("GROUP g") == fake.connections
            assert "GZIP data does not inflate" in caplog.text
            assert ("XZVER data does not inflate" in caplog.text) == xzver


@pytest.mark.trio
async def test_fake_over_reopens_before_anything_was_yielded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            _compressing_fake(fake, xzver=True)
            fake.garble = {"XZVER 1-10": "junk"}
            async with _fake_connect(fake) as client:
                assert client.compression == "XZVER"
                await client.group("g")
                lines = [x async for piece in client.over(1, 10) for x in piece]
                assert lines == [_overview(n) for n in range(1, 11)]
                assert client.compression is None
            assert fake.received[-2:] == ["OVER 1-10", "QUIT"]
            assert "XZVER data does not inflate" in caplog.text


@pytest.mark.trio
async def test_fake_over_garbage_after_some_pieces() -> None:
    """Pieces were yielded: they are void, CompressionError, and the client is usable."""
    articles = 20_000
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            _compressing_fake(fake, xfeature="c", articles=articles)
            fake.garble = {f"OVER 1-{articles}": "half"}
            async with _fake_connect(fake) as client:
                await client.group("g")
                got: list[bytes] = []

                async def read_all() -> None:
                    async for piece in client.over(1, articles):
                        got.extend(piece)

                with pytest.raises(CompressionError) as caught:
                    await read_all()
                assert caught.value.scheme == "GZIP"
                assert got  # some pieces came before the garbage
                assert client.compression is None
                lines = [x async for piece in client.over(1, articles) for x in piece]
                assert lines == [_overview(n) for n in range(1, articles + 1)]


@pytest.mark.trio
async def test_fake_pipeline_with_nothing_offered_asks_list_extensions_once() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with running_fake() as fake:
            fake.groups["g"] = (1, 1)
            async with _fake_connect(fake) as client:
                assert client.compression is None
            assert fake.received.count("LIST EXTENSIONS") == 1


def _deflate(deflater: Any, data: bytes) -> bytes:
    out: bytes = deflater.compress(data) + deflater.flush(zlib.Z_SYNC_FLUSH)
    return out


async def _expect_line(stream: trio.abc.Stream, line: bytes) -> None:
    assert await stream.receive_some(len(line)) == line


def test_server_urls() -> None:
    url = ServerURL.parse("nntps://me:p%40ss@news.example.com")
    assert (url.host, url.port, url.tls, url.user, url.password) == (
        "news.example.com", 563, True, "me", "p@ss",
    )  # fmt: skip
    assert "p@ss" not in repr(url)
    plain = ServerURL.parse("nntp://127.0.0.1:1190?starttls=1")
    assert (plain.port, plain.tls, plain.starttls, plain.user) == (1190, False, True, None)
    assert ServerURL.parse("nntp://h").port == 119
    bad_urls = ("http://h", "nntp://", "nntps://h?starttls=1", "nntp://user@h", "nntp://h:99999")
    for bad in (*bad_urls, "nntp://h:0", "nntp://[::1", "nntp://h:x"):
        with pytest.raises(ConfigError) as refused:
            ServerURL.parse(bad)
        assert refused.value.key == "nntp"  # the setting (UIDX_NNTP), no "nntp url"


@pytest.mark.parametrize(
    ("spelt", "on"),
    [
        *((s, True) for s in ("1", "true", "True", "TRUE", "yes", "Yes", "on", "ON")),
        *((s, False) for s in ("0", "false", "False", "no", "NO", "off", "Off")),
    ],
)
def test_starttls_takes_the_usual_boolean_spellings(spelt: str, on: bool) -> None:
    assert ServerURL.parse(f"nntp://u:p@h?starttls={spelt}").starttls is on
    assert not ServerURL.parse("nntp://u:p@h").starttls
    if not on:  # nntps:// with starttls off is plain nntps://
        assert ServerURL.parse(f"nntps://h?starttls={spelt}") == ServerURL.parse("nntps://h")


@pytest.mark.parametrize("spelt", ["maybe", "", "2", "tru", "enabled"])
def test_a_starttls_that_is_no_boolean_is_refused_naming_it(spelt: str) -> None:
    # Taken as off, it sent the password in plaintext without a word.
    with pytest.raises(ConfigError) as refused:
        ServerURL.parse(f"nntp://u:S3cretPass@h?starttls={spelt}")
    assert refused.value.key == "nntp"
    assert f"starttls={spelt!r}" in str(refused.value)
    assert "S3cretPass" not in str(refused.value)


def test_port_0_is_refused_not_taken_for_the_default() -> None:
    with pytest.raises(ConfigError) as refused:
        ServerURL.parse("nntp://h:0")
    assert str(refused.value) == "nntp: nntp://h:0: port 0 is not in 1..65535"
    assert ServerURL.parse("nntp://h:").port == 119  # empty: the default


@pytest.mark.parametrize(
    "url",
    [
        "nntps://alice:S3cretPass@:563",  # no host
        "http://alice:S3cretPass@h",
        "nntp://alice:S3cretPass@h:99999",
        "nntp://alice:S3cretPass@h:0",
        "nntp://alice:S3cretPass@h?starttls=maybe",
        "nntps://alice:S3cretPass@h?starttls=1",
        "nntp://alice:S3cret/Pass@h",  # unencoded /: Python's port error quotes 'S3cret'
        "nntp://alice:S3cret@Pass@[::1",
    ],
)
def test_a_bad_url_is_quoted_without_its_password(url: str) -> None:
    with pytest.raises(ConfigError) as refused:
        ServerURL.parse(url)
    said = str(refused.value)
    assert said.startswith("nntp: ")
    assert "S3cret" not in said
    assert "Pass" not in said
    assert "alice:***@" in said


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nntps://alice:S3cretPass@h:563", "nntps://alice:***@h:563"),
        ("nntp://alice:p@ss@h?starttls=1", "nntp://alice:***@h?starttls=1"),
        ("nntp://alice:a://b@h", "nntp://alice:***@h"),
        ("nntp://alice@h", "nntp://alice@h"),
        ("nntp://h:119", "nntp://h:119"),
    ],
)
def test_masked_hides_the_password_and_keeps_the_rest(url: str, shown: str) -> None:
    assert masked(url) == shown


@pytest.mark.parametrize(
    ("what", "reason"),
    [
        ("missing", "cannot be read: No such file or directory"),
        ("folder", "cannot be read: Is a directory"),
        ("not-pem", "no PEM CA certificate in it"),
    ],
)
def test_a_bad_ca_file_is_a_config_error_naming_the_key_and_path(
    tmp_path: Path, what: str, reason: str
) -> None:
    path = tmp_path / what
    if what == "folder":
        path.mkdir()
    elif what == "not-pem":
        path.write_text("not a certificate\n")
    with pytest.raises(ConfigError) as refused:
        tls_context(str(path))
    assert refused.value.key == "nntp_ca_file"
    assert str(refused.value).startswith(f"nntp_ca_file: {path}: {reason}")


# -- against INN2 (tests/nntp_fixtures.py) ------------------------------------


def _check_posted(group: str, count: int, first: int, seed: int, lines: list[bytes]) -> None:
    posted = list(generate_articles(group, count, seed))
    assert len(lines) == count
    for number, (line, article) in enumerate(zip(lines, posted, strict=True), start=first):
        fields = line.split(b"\t")
        assert int(fields[0]) == number
        assert fields[1].decode() == article.subject
        assert fields[2].decode() == article.poster
        assert fields[4].decode() == article.message_id


async def _text_slices(
    client: NNTPClient, *, depth: int = 4, xover: bool = False
) -> list[tuple[tuple[int, int], list[bytes]]]:
    """over_text_pipelined over SLICES, each slice's blocks split back into lines."""
    return [
        (piece, _text_lines(text))
        async for piece, text in client.over_text_pipelined(SLICES, depth=depth, xover=xover)
    ]


def _text_lines(text: OverviewText) -> list[bytes]:
    """A slice's text blocks split back into lines, checked against its line count."""
    joined = b"".join(text.blocks)
    assert joined.endswith(b"\n") or not joined
    lines = joined.split(b"\n")[:-1]
    assert len(lines) == text.lines
    return lines


async def _over_all(client: NNTPClient, first: int, last: int, step: int) -> list[bytes]:
    slices = [(n, min(n + step - 1, last)) for n in range(first, last + 1, step)]
    return [x async for _, lines in client.over_pipelined(slices) for x in lines]


async def _over_all_as_text(client: NNTPClient, first: int, last: int, step: int) -> list[bytes]:
    """The lines of over_text_pipelined, checked against each slice's count."""
    slices = [(n, min(n + step - 1, last)) for n in range(first, last + 1, step)]
    return [x async for _, text in client.over_text_pipelined(slices) for x in _text_lines(text)]


@pytest.mark.trio
async def test_inn_plain_pipelined_over_equals_posted(news_server: NewsServer) -> None:
    with trio.fail_after(INN_DEADLINE_SECONDS):
        async with connect(news_server.url(), compress=False) as client:
            assert not client.encrypted
            assert client.compression is None
            count, low, high = await client.group(news_server.group)
            assert (count, low, high) == (news_server.articles, 1, news_server.articles)
            lines = await _over_all(client, low, high, 5_000)
            as_text = await _over_all_as_text(client, low, high, 5_000)
        _check_posted(news_server.group, news_server.articles, 1, news_server.seed, lines)
        assert as_text == lines


@pytest.mark.trio
async def test_inn_high_article_numbers(news_server: NewsServer) -> None:
    with trio.fail_after(INN_DEADLINE_SECONDS):
        async with connect(news_server.url(), compress=False) as client:
            _, low, high = await client.group(news_server.high_group)
            assert (low, high) == (
                news_server.high_first,
                news_server.high_first + news_server.high_articles - 1,
            )
            lines = await _over_all(client, low, high, 500)
            # Past the last article: 423, no lines.
            assert [x async for p in client.over(high + 1, high + 10) for x in p] == []
        _check_posted(
            news_server.high_group,
            news_server.high_articles,
            news_server.high_first,
            news_server.seed,
            lines,
        )


@pytest.mark.parametrize("how", ["nntps", "starttls"])
@pytest.mark.trio
async def test_inn_tls(news_server: NewsServer, how: str) -> None:
    url = news_server.url(tls=how == "nntps", starttls=how == "starttls")
    with trio.fail_after(INN_DEADLINE_SECONDS):
        async with connect(url, ca_file=news_server.ca_file, compress=False) as client:
            assert client.encrypted
            _, low, high = await client.group(news_server.high_group)
            lines = await _over_all(client, low, high, 1_000)
        _check_posted(
            news_server.high_group,
            news_server.high_articles,
            news_server.high_first,
            news_server.seed,
            lines,
        )


@pytest.mark.parametrize("spelt", ["on", "True", "YES"])
@pytest.mark.trio
async def test_inn_starttls_spelt_otherwise_encrypts_before_the_login(
    news_server: NewsServer, spelt: str
) -> None:
    # `?starttls=on` was taken as off: the login went out in plaintext.
    url = news_server.url(starttls=True).replace("?starttls=1", f"?starttls={spelt}")
    with trio.fail_after(INN_DEADLINE_SECONDS):
        async with connect(url, ca_file=news_server.ca_file, compress=False) as client:
            assert client.encrypted
            assert (await client.group(news_server.group))[0] == news_server.articles


@pytest.mark.parametrize("how", ["nntps", "starttls"])
@pytest.mark.trio
async def test_inn_tls_verifies_the_certificate(news_server: NewsServer, how: str) -> None:
    url = news_server.url(tls=how == "nntps", starttls=how == "starttls")
    with trio.fail_after(INN_DEADLINE_SECONDS), pytest.raises(ConnectionLost, match="CERTIFICATE"):
        async with connect(url):  # the system CAs do not know the test certificate
            pass  # pragma: no cover


@pytest.mark.trio
async def test_inn_authinfo(news_server: NewsServer) -> None:
    with trio.fail_after(INN_DEADLINE_SECONDS):
        async with connect(news_server.url(auth=False)) as client:
            with pytest.raises(AuthRequired):
                await client.group(news_server.group)
        bad = news_server.url(auth=False).replace("nntp://", "nntp://uidx:wrong@")
        with pytest.raises(AuthRequired, match="481"):
            async with connect(bad):
                pass  # pragma: no cover


@pytest.mark.trio
async def test_inn_compress_deflate(news_server: NewsServer) -> None:
    with trio.fail_after(INN_DEADLINE_SECONDS):
        async with connect(news_server.url()) as client:
            assert client.compression == "DEFLATE"  # INN 2.7 offers COMPRESS DEFLATE
            _, low, high = await client.group(news_server.group)
            lines = await _over_all(client, low, high, 10_000)
            as_text = await _over_all_as_text(client, low, high, 7_000)
        _check_posted(news_server.group, news_server.articles, 1, news_server.seed, lines)
        assert as_text == lines


@pytest.mark.trio
async def test_inn_body_by_message_id(news_server: NewsServer) -> None:
    posted = list(generate_articles(news_server.high_group, 3, news_server.seed))
    with trio.fail_after(INN_DEADLINE_SECONDS):
        async with connect(news_server.url()) as client:
            for article in posted:
                assert await client.body(article.message_id) == article.body
            with pytest.raises(NoSuchArticle):
                await client.body("<never-posted@uidx.test>")
            assert len(await client.date()) == 14
            fields = await client.overview_format()
            assert fields[:2] == [b"Subject:", b"From:"]
