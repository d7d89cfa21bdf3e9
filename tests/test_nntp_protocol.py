"""The sans-IO NNTP protocol: every reply fed whole, byte by byte and with trailing data."""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Sequence
from functools import partial

import attrs
import pytest
from chunkers import CHUNKERS, Chunker, bytewise, whole
from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.nntp import protocol as p
from usenet_indexer.nntp.errors import (
    IncompleteResponse,
    LineTooLong,
    LocalProtocolError,
    MalformedResponse,
    RemoteProtocolError,
)
from usenet_indexer.nntp.replies import GroupStatus, ServerCapabilities, parse_date


def normalized(events: list[p.Event]) -> list[p.Event]:
    """DataLines pieces joined: how replies are cut into pieces depends on the reads."""
    out: list[p.Event] = []
    for event in events:
        if isinstance(event, p.DataLines) and out and isinstance(out[-1], p.DataLines):
            out[-1] = p.DataLines(out[-1].lines + event.lines)
        elif isinstance(event, p.DataText) and out and isinstance(out[-1], p.DataText):
            out[-1] = p.DataText(out[-1].text + event.text, out[-1].lines + event.lines)
        else:
            out.append(event)
    return out


def run(
    commands: Sequence[p.Command], data: bytes, chunker: Chunker, *, greeting: bool = True
) -> tuple[p.NNTPConnection, list[p.Event]]:
    """A connection past its greeting, `commands` sent, `data` fed; the events it gave."""
    conn = p.NNTPConnection(max_line_bytes=1000)
    if greeting:
        conn.receive_data(b"200 ready\r\n")
        assert isinstance(conn.next_event(), p.Response)
    for command in commands:
        conn.send(command)
    events: list[p.Event] = []
    for piece in chunker(data) if data else []:
        conn.receive_data(piece)
        while not isinstance(event := conn.next_event(), p.Sentinel):
            events.append(event)
            if isinstance(event, p.ConnectionClosed):
                break
    return conn, normalized(events)


def check(commands: Sequence[p.Command], data: bytes, expected: list[p.Event]) -> None:
    """The h11 `tr` idea: whole, byte by byte, in threes, and followed by the next reply's start."""
    for chunker in CHUNKERS:
        _, events = run(commands, data, chunker)
        assert events == expected, chunker.__name__
        conn, events = run([*commands, p.Date()], data + b"11", chunker)
        assert events == expected, f"{chunker.__name__} with trailing data"
        assert conn.next_event() is p.NEED_DATA
        assert conn.pending == 1


def test_greeting_is_the_first_event() -> None:
    for code in (200, 201, 400, 502):
        conn = p.NNTPConnection()
        for byte in bytewise(f"{code} server says hi\r\n".encode()):
            assert conn.next_event() is p.NEED_DATA
            conn.receive_data(byte)
        event = conn.next_event()
        assert isinstance(event, p.Response)
        assert (event.code, event.text, event.command) == (code, "server says hi", p.Greeting())
        assert conn.pending == 0


@pytest.mark.parametrize(
    ("command", "reply"),
    [
        (p.Group("alt.binaries.test"), b"211 5 10 14 alt.binaries.test"),
        (p.Group("alt.binaries.test"), b"411 no such group"),
        (p.Group("alt.binaries.test"), b"480 authentication required"),
        (p.Group("alt.binaries.test"), b"502 too many connections"),
        (p.Date(), b"111 20261130112233"),
        (p.ModeReader(), b"200 reader mode"),
        (p.AuthInfoUser("me"), b"381 password please"),
        (p.AuthInfoPass("secret words"), b"281 welcome"),
        (p.Over(1, 10), b"420 no current article"),
        (p.Over(1, 10), b"423 no articles in that range"),
        (p.XOver(1, 10), b"423 no articles in that range"),
        (p.Body("<a@b>"), b"430 no such article"),
        (p.Quit(), b"205 bye"),
        (p.Capabilities(), b"500 what?"),
    ],
)
def test_single_line_replies(command: p.Command, reply: bytes) -> None:
    code, text = int(reply[:3]), reply[4:].decode()
    check([command], reply + b"\r\n", [p.Response(code, text, command)])


def test_over_multiline_with_dot_unstuffing() -> None:
    data = (
        b"224 overview follows\r\n"
        b"1\tsubject one\tposter\r\n"
        b"..2\tstuffed: starts with a dot\r\n"
        b"...\r\n"
        b"3\tlast\r\n"
        b".\r\n"
    )
    command = p.Over(1, 3)
    expected: list[p.Event] = [
        p.Response(224, "overview follows", command, multiline=True),
        p.DataLines(
            [b"1\tsubject one\tposter", b".2\tstuffed: starts with a dot", b"..", b"3\tlast"]
        ),
        p.DataEnd(),
    ]
    check([command], data, expected)


def as_text(events: list[p.Event]) -> list[p.Event]:
    """The events an OVER sent with `text` gives where this one gave `events` (CRs dropped)."""
    out: list[p.Event] = []
    for event in events:
        if isinstance(event, p.Response):
            command = event.command
            if isinstance(command, p.Over):
                command = attrs.evolve(command, text=True)
            out.append(attrs.evolve(event, command=command))
        elif isinstance(event, p.DataLines):
            text = b"".join(line.replace(b"\r", b"") + b"\n" for line in event.lines)
            out.append(p.DataText(text, len(event.lines)))
        else:
            out.append(event)
    return out


OVER_REPLIES = [
    # Dot-stuffed lines, a line of dots, CR before LF.
    b"224 overview follows\r\n1\tsubject one\tposter\r\n..2\tstuffed\r\n...\r\n3\tlast\r\n.\r\n",
    # Bare LF line ends, a CR inside a line, a terminator without CR.
    b"224 ok\n1\ta\rb\n2\tb\r\r\n.\n",
    # The first line stuffed; an empty line.
    b"224 ok\r\n..1\tdot\r\n\r\n2\tx\r\n.\r\n",
    b"224 none\r\n.\r\n",
    b"423 no articles in that range\r\n",
]


@pytest.mark.parametrize("reply", OVER_REPLIES)
def test_over_as_text_gives_the_lines_as_blocks(reply: bytes) -> None:
    _, events = run([p.Over(1, 3)], reply, whole)
    assert any(isinstance(e, p.Response) for e in events)
    check([p.Over(1, 3, text=True)], reply, as_text(events))


@settings(max_examples=300, deadline=1000)
@given(
    lines=st.lists(
        st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
        max_size=30,
    ),
    cuts=st.lists(st.integers(min_value=1, max_value=50), max_size=20),
    crlf=st.booleans(),
)
def test_over_as_text_is_the_lines_however_the_data_is_cut(
    lines: list[bytes], cuts: list[int], crlf: bool
) -> None:
    end = b"\r\n" if crlf else b"\n"
    body = b"".join((b"." + x if x.startswith(b".") else x) + end for x in lines)
    data = b"224 ok\r\n" + body + b"." + end + b"211 1 1 1 g\r\n"

    def chunker(data: bytes) -> list[bytes]:
        pieces, at = [], 0
        for size in cuts:
            pieces.append(data[at : at + size])
            at += size
        return [piece for piece in [*pieces, data[at:]] if piece]

    command = p.Over(1, 9, text=True)
    _, events = run([command, p.Group("g")], data, chunker)
    text = [p.DataText(b"".join(x + b"\n" for x in lines), len(lines))] if lines else []
    assert events[1:-1] == [*text, p.DataEnd()]
    assert isinstance(events[-1], p.Response)
    assert events[-1].code == 211


@pytest.mark.parametrize("chunker", CHUNKERS)
@pytest.mark.parametrize("text", [False, True])
def test_the_longest_over_line_is_taken_and_one_byte_more_dropped_and_counted(
    chunker: Chunker, text: bool
) -> None:
    # max_line_bytes is 1000 (run): a line of 999 bytes and its CR is the longest,
    # also when it starts with a dot (one byte more on the wire: stuffed).
    for longest in (b"1\t" + b"x" * 997, b".1\t" + b"x" * 996):
        data = b"224 ok\r\n" + (b"." if longest[:1] == b"." else b"") + longest + b"\r\n.\r\n"
        _, events = run([p.Over(1, 2, text=text)], data, chunker)
        expected_end: list[p.Event] = [p.DataLines([longest]), p.DataEnd()]
        assert events[1:] == (as_text(expected_end) if text else expected_end)
    over = b"2\t" + b"x" * 998
    data = b"224 ok\r\n1\ta\r\n" + over + b"\r\n3\tb\r\n.\r\n"
    _, events = run([p.Over(1, 3, text=text)], data, chunker)
    expected: list[p.Event] = [p.DataLines([b"1\ta", b"3\tb"]), p.DataEnd(overlong=1)]
    assert events[1:] == (as_text(expected) if text else expected)


def test_a_reply_of_overlong_lines_only_is_empty_with_its_count() -> None:
    command = p.XOver(1, 2)
    data = b"224 ok\r\n" + b"1" * 1001 + b"\r\n" + b"2" * 5000 + b"\n.\r\n"
    check([command], data, [p.Response(224, "ok", command, True), p.DataEnd(overlong=2)])


def test_empty_multiline_reply() -> None:
    command = p.Over(5, 6)
    check([command], b"224 none\r\n.\r\n", [p.Response(224, "none", command, True), p.DataEnd()])


def test_body_and_article_and_list_are_multiline() -> None:
    for command, code in (
        (p.Body("<x@y>"), 222),
        (p.Article("<x@y>"), 220),
        (p.Head("<x@y>"), 221),
    ):
        data = f"{code} 0 <x@y>\r\nline one\r\n\r\n.\r\n".encode()
        expected: list[p.Event] = [
            p.Response(code, "0 <x@y>", command, True),
            p.DataLines([b"line one", b""]),
            p.DataEnd(),
        ]
        check([command], data, expected)
    fmt = p.ListOverviewFmt()
    check(
        [fmt],
        b"215 order of fields\r\nSubject:\r\nFrom:\r\n.\r\n",
        [
            p.Response(215, "order of fields", fmt, True),
            p.DataLines([b"Subject:", b"From:"]),
            p.DataEnd(),
        ],
    )


def test_capabilities_reply_and_parsing() -> None:
    command = p.Capabilities()
    data = b"101 list\r\nVERSION 2\r\nREADER\r\nCOMPRESS DEFLATE\r\nauthinfo USER\r\nOVER\r\n.\r\n"
    _, events = run([command], data, whole)
    assert events[0] == p.Response(101, "list", command, True)
    lines = events[1]
    assert isinstance(lines, p.DataLines)
    caps = ServerCapabilities.from_lines(lines.lines)
    assert caps.version == 2
    assert caps.has("READER")
    assert caps.has("COMPRESS", "deflate")
    assert not caps.has("COMPRESS", "GZIP")
    assert caps.has("AUTHINFO", "USER")
    assert not caps.has("STARTTLS")
    assert events[2] == p.DataEnd()


def test_a_multiline_code_only_for_its_command() -> None:
    # 224 answers OVER with data; to GROUP it is just a (strange) single line.
    command = p.Group("g")
    check([command], b"224 hm\r\n", [p.Response(224, "hm", command)])


def test_pipelined_replies_match_commands_in_order() -> None:
    commands: list[p.Command] = [p.Over(1, 2), p.Over(3, 4), p.Group("g"), p.Over(5, 6), p.Date()]
    data = (
        b"224 a\r\n1\tx\r\n2\ty\r\n.\r\n"
        b"423 empty\r\n"
        b"211 2 1 2 g\r\n"
        b"224 b\r\n5\tz\r\n.\r\n"
        b"111 20260101000000\r\n"
    )
    expected: list[p.Event] = [
        p.Response(224, "a", commands[0], True),
        p.DataLines([b"1\tx", b"2\ty"]),
        p.DataEnd(),
        p.Response(423, "empty", commands[1]),
        p.Response(211, "2 1 2 g", commands[2]),
        p.Response(224, "b", commands[3], True),
        p.DataLines([b"5\tz"]),
        p.DataEnd(),
        p.Response(111, "20260101000000", commands[4]),
    ]
    check(commands, data, expected)


def test_bare_lf_lines_are_accepted() -> None:
    command = p.Over(1, 1)
    check(
        [command],
        b"224 ok\n1\tx\n.\n",
        [p.Response(224, "ok", command, True), p.DataLines([b"1\tx"]), p.DataEnd()],
    )


def test_data_pieces_stream_as_they_arrive() -> None:
    conn = p.NNTPConnection()
    conn.receive_data(b"200 hi\r\n")
    conn.next_event()
    conn.send(p.Over(1, 100_000))
    conn.receive_data(b"224 ok\r\n1\ta\r\n2\tb")
    assert isinstance(conn.next_event(), p.Response)
    assert conn.next_event() == p.DataLines([b"1\ta"])
    assert conn.next_event() is p.NEED_DATA
    conn.receive_data(b"\r\n3\tc\r\n")
    assert conn.next_event() == p.DataLines([b"2\tb", b"3\tc"])


NOT_OVERVIEW: list[tuple[p.Command, bytes]] = [
    (p.Body("<a@b>"), b"222 0 <a@b>"),
    (p.Capabilities(), b"101 list"),
    (p.ListOverviewFmt(), b"215 fields"),
]


@pytest.mark.parametrize("chunker", CHUNKERS)
@pytest.mark.parametrize(("command", "status"), NOT_OVERVIEW)
def test_a_data_line_over_the_cap_breaks_any_reply_but_overs(
    chunker: Chunker, command: p.Command, status: bytes
) -> None:
    data = status + b"\r\n" + b"x" * 1001 + b"\r\n.\r\n"
    with pytest.raises(LineTooLong, match="longer than 1000 bytes"):
        run([command], data, chunker)


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_a_status_line_over_the_cap(chunker: Chunker) -> None:
    with pytest.raises(LineTooLong, match="1000"):
        run([p.Group("g")], b"211 " + b"9" * 2000 + b"\r\n", chunker)


def test_a_status_line_over_the_cap_after_an_over_reply() -> None:
    data = b"224 ok\r\n1\tx\r\n.\r\n211 " + b"9" * 2000 + b"\r\n"
    with pytest.raises(LineTooLong, match="1000"):
        run([p.Over(1, 1), p.Group("g")], data, whole)


@pytest.mark.parametrize(("command", "status"), NOT_OVERVIEW)
def test_a_line_without_end_is_refused_at_the_cap(command: p.Command, status: bytes) -> None:
    conn, _ = run([command], status + b"\r\n" + b"y" * 1000, whole)
    conn.receive_data(b"y")
    with pytest.raises(LineTooLong):
        conn.next_event()


def test_an_overlong_over_line_is_dropped_as_it_arrives() -> None:
    """Memory stays bounded: 16 MiB of one line in 64 KiB reads is never held."""
    conn, _ = run([p.Over(1, 3)], b"224 ok\r\n1\ta\r\n", whole)
    piece = b"2\t" + b"y" * (64 * 1024 - 2)
    tracemalloc.start()
    try:
        for _ in range(256):
            conn.receive_data(piece)
            assert conn.next_event() is p.NEED_DATA
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 512 * 1024
    conn.receive_data(b"\r\n3\tb\r\n.\r\n")
    assert conn.next_event() == p.DataLines([b"3\tb"])
    assert conn.next_event() == p.DataEnd(overlong=1)


def test_eof_inside_an_overlong_over_line() -> None:
    conn, _ = run([p.Over(1, 2)], b"224 ok\r\n" + b"y" * 5000, whole)
    conn.receive_data(b"")
    with pytest.raises(IncompleteResponse):
        conn.next_event()


# An OVER reply whose overlong lines (the cap is 1000) come right before a
# dot-stuffed line, another overlong line and the "." that ends the reply.
OVERLONG = b"2\t" + b"s" * 1200
OVERLONG_CR = b"4\t" + b"t" * 1500 + b"\r"
OVERLONG_REPLY = (
    b"224 ok\r\n1\ta\r\n"
    + OVERLONG
    + b"\r\n..3\tstuffed\r\n"
    + OVERLONG_CR
    + b"\n.\r\n211 1 1 1 g\r\n"
)


def _overlong_events(text: bool) -> list[p.Event]:
    lines: list[p.Event] = [p.DataLines([b"1\ta", b".3\tstuffed"])]
    return [*(as_text(lines) if text else lines), p.DataEnd(overlong=2)]


def _split(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]  # cuts within 1..len(data) - 1
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@pytest.mark.parametrize("text", [False, True])
def test_after_an_overlong_line_dots_are_read_wherever_the_reads_split(text: bool) -> None:
    """Every cut into two reads, and every pair of cuts around the last line ends."""
    commands: list[p.Command] = [p.Over(1, 4, text=text), p.Group("g")]
    tail = OVERLONG_REPLY.index(b"4\t") + 990  # 10 bytes before the second line's cap
    cuts = [[at] for at in range(1, len(OVERLONG_REPLY))]
    end = len(OVERLONG_REPLY)
    cuts += [[a, b] for a in range(tail, end) for b in range(a + 1, min(a + 40, end))]
    for at in cuts:
        _, events = run(commands, OVERLONG_REPLY, partial(_split, cuts=at))
        assert events[1:-1] == _overlong_events(text), at
        assert events[-1] == p.Response(211, "1 1 1 g", commands[1]), at


@settings(max_examples=300, deadline=2000)
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=len(OVERLONG_REPLY) - 1), max_size=40),
    text=st.booleans(),
)
def test_after_an_overlong_line_dots_are_read_however_the_reads_split(
    cuts: list[int], text: bool
) -> None:
    commands: list[p.Command] = [p.Over(1, 4, text=text), p.Group("g")]
    _, events = run(commands, OVERLONG_REPLY, partial(_split, cuts=cuts))
    assert events[1:] == [*_overlong_events(text), p.Response(211, "1 1 1 g", commands[1])]


@pytest.mark.parametrize(
    "line",
    [b"hello", b"2x1 no", b"21", b"2111 four digits", b"099 low", b"\xff\xfe\r", b"211\tx"],
)
def test_malformed_status_lines(line: bytes) -> None:
    with pytest.raises(MalformedResponse):
        run([p.Group("g")], line + b"\r\n", whole)


def test_a_bad_greeting() -> None:
    with pytest.raises(MalformedResponse):
        run([], b"SSH-2.0-OpenSSH\r\n", whole, greeting=False)


def test_an_unsolicited_reply() -> None:
    with pytest.raises(MalformedResponse, match="unsolicited"):
        run([], b"205 bye\r\n", whole)


def test_errors_stick() -> None:
    conn = p.NNTPConnection()
    conn.receive_data(b"oops\r\n200 ok\r\n")
    for _ in range(2):
        with pytest.raises(MalformedResponse):
            conn.next_event()
    with pytest.raises(LocalProtocolError):
        conn.send(p.Date())


def test_eof_between_replies_and_inside_them() -> None:
    conn, _ = run([], b"", whole)
    conn.receive_data(b"")
    assert conn.next_event() == p.ConnectionClosed()
    conn, _ = run([p.Over(1, 2)], b"224 ok\r\n1\tx\r\n", whole)
    conn.receive_data(b"")
    with pytest.raises(IncompleteResponse):
        conn.next_event()
    conn, _ = run([p.Group("g")], b"211 1", whole)
    conn.receive_data(b"")
    with pytest.raises(IncompleteResponse):
        conn.next_event()


@pytest.mark.parametrize(
    "command",
    [
        p.Group("a\r\nQUIT"),
        p.Group("two words"),
        p.Group(""),
        p.AuthInfoUser("me\nyou"),
        p.AuthInfoPass("pass\rword"),
        p.Body("no-brackets@x"),
        p.Body("<a b@x>"),
        p.Over(-1, 5),
        p.Over(10, 5),
        p.Group("g" * 600),
        p.Compress("DE FLATE"),
    ],
)
def test_our_mistakes_are_local_errors(command: p.Command) -> None:
    conn = p.NNTPConnection()
    with pytest.raises(LocalProtocolError):
        conn.send(command)
    assert conn.pending == 1  # nothing was queued


def test_command_bytes() -> None:
    conn = p.NNTPConnection()
    assert conn.send(p.Over(4_294_967_296, 4_294_967_300)) == b"OVER 4294967296-4294967300\r\n"
    assert conn.send(p.XOver(7)) == b"XOVER 7-\r\n"
    assert conn.send(p.AuthInfoPass("with space")) == b"AUTHINFO PASS with space\r\n"
    assert conn.send(p.Compress()) == b"COMPRESS DEFLATE\r\n"
    assert "with space" not in repr(p.AuthInfoPass("with space"))


@pytest.mark.parametrize(("command", "code"), [(p.StartTLS(), 382), (p.Compress(), 206)])
def test_switching_replies_pause_until_resume(command: p.Command, code: int) -> None:
    conn, events = run([command], f"{code} go ahead\r\n".encode() + b"\x16\x03new layer", whole)
    assert events == [p.Response(code, "go ahead", command)]
    assert conn.next_event() is p.PAUSED
    with pytest.raises(LocalProtocolError):
        conn.send(p.Date())
    assert conn.resume() == b"\x16\x03new layer"
    conn.send(p.Date())
    conn.receive_data(b"111 20260101000000\r\n")
    assert isinstance(conn.next_event(), p.Response)


def test_no_pipelining_past_a_switch() -> None:
    conn = p.NNTPConnection()
    conn.send(p.StartTLS())
    with pytest.raises(LocalProtocolError, match="pipeline"):
        conn.send(p.Date())


def test_a_refused_switch_does_not_pause() -> None:
    command = p.Compress()
    for chunker in CHUNKERS:
        conn, events = run([command], b"403 not now\r\n", chunker)
        assert events == [p.Response(403, "not now", command)]
        assert conn.next_event() is p.NEED_DATA
        conn.send(p.Date())


def test_group_status_and_date() -> None:
    status = GroupStatus.from_text("5 4294967300 4294967304 alt.binaries.big")
    assert (status.count, status.low, status.high) == (5, 4_294_967_300, 4_294_967_304)
    top = GroupStatus.from_text(f"1 {2**63 - 1} {2**63 - 1} g")
    assert (top.low, top.high) == (2**63 - 1, 2**63 - 1)
    past = (f"1 1 {2**63} g", f"1 {2**64} {2**64} g", f"{2**63} 1 2 g")
    for bad in ("", "1 2 alt", "x 1 2 g", "1 -2 3 g", "1 ² 3 g", *past):
        with pytest.raises(MalformedResponse):
            GroupStatus.from_text(bad)
    assert parse_date("20261130112233") == "20261130112233"
    with pytest.raises(MalformedResponse):
        parse_date("2026-11-30")


@settings(max_examples=400, deadline=1000)
@given(
    data=st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from([b"\r\n", b".\r\n", b"224 x\r\n", b"211 1 1 1 g\r\n", b"..", b"\n"]),
        ),
        max_size=30,
    ),
    eof=st.booleans(),
)
def test_arbitrary_bytes_raise_only_remote_errors(data: list[bytes], eof: bool) -> None:
    conn = p.NNTPConnection(max_line_bytes=64)
    for command in (p.Over(1, 5), p.Group("g"), p.Capabilities(), p.Body("<a@b>")):
        conn.send(command)
    try:
        for piece in [*data, b""] if eof else data:
            conn.receive_data(piece)
            for _ in range(1000):
                event = conn.next_event()
                if event in (p.NEED_DATA, p.PAUSED) or isinstance(event, p.ConnectionClosed):
                    break
    except RemoteProtocolError:
        pass
