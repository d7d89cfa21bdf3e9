"""A private INN2 news server for the tests (`scripts/newsd start|stop|post`).

Theory of operation
-------------------
Debian's `inn2` package gives the binaries; everything else lives under one
folder: a private inn.conf (found through the INNCONF environment variable)
whose paths all point inside it, the active file with the test groups (a
group may start at any number up to 2^31 - 1), an empty history, articles in
one sparse CNFS buffer file, a self-signed certificate, and the logs. Three processes run
as the `news` user, listening on 127.0.0.1 only:

- innd on the feeder port (the injector's TAKETHIS goes there);
- nnrpd -D on the reader port (plain, and STARTTLS with the certificate);
- nnrpd -D -S on the NNTPS port (TLS on connect).

`start` prints the ports as one JSON object (also written to newsd.json in
the folder); `stop` ends the processes it started; `post` feeds generated
articles with pipelined TAKETHIS (MODE STREAM, RFC 4644): ~20k articles/s
here, against ~2-3k/s for POST on the reader port. Two kinds of articles:
simple ones, all of one date, that tests compare with what the server
returns (`generate_articles`), and, with `post --days D`, those of uidx's
generator (testing/generator.py: interleaved uploads, floods, reposts, junk)
dated over the last D days as a real group's are (`realistic_articles`; the
demo posts these). innd takes any past date (`artcutoff: 0` and `innd -c 0`),
and a Date up to a day ahead of its clock, so the dates end at `--end`
(default: now).

Installing (one install at a time on the machine: testing.install):
apt-get install inn2 with a policy-rc.d that stops Debian from
starting the system innd on port 119; inn2's postinst fails on a host name
without a domain, so `domain:` is set in /etc/news/inn.conf and dpkg is
re-run. Every process is started by Popen as `news` (no runuser in between).

This module is a tool for tests, not library code: it prints, runs
subprocesses and reads the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from usenet_indexer.errors import UidxError
from usenet_indexer.synth.generator import GeneratorConfig, OverviewGenerator
from usenet_indexer.testing.install import apt_get_install, install_once
from usenet_indexer.testing.processes import free_port

INN_BIN = Path("/usr/lib/news/bin")
SYSTEM_ETC = Path("/etc/news")
HOST = "127.0.0.1"
NEWS_USER = "news"
# The largest article number INN2 2.7 stores (its article numbers are signed 32-bit).
INN_MAX_ARTICLE = 2**31 - 1
# TAKETHIS commands sent before the replies to the previous batch are read:
# 1000 posts ~20k articles/s here (500: ~19k); innd buffers its ~40-byte
# replies, so a larger window only grows its output buffer.
TAKETHIS_WINDOW = 1000
START_TIMEOUT_SECONDS = 30.0
# The article buffer: 4 GiB holds ~8M generated articles (~500 B each); it is a
# sparse file, so only what is posted takes disk space. CNFS wraps when full.
CNFS_BUFFER_KIB = 4 * 1024 * 1024
SECONDS_PER_DAY = 86_400


class NewsdError(UidxError):
    """The private INN2 cannot be started, fed or stopped (the message says why)."""


class CannotInstall(NewsdError):
    """INN2 is missing and cannot be installed here (exit status 2: tests skip, CI fails)."""


# -- installing -------------------------------------------------------------


def ensure_inn2() -> None:
    """Installs Debian's inn2 when innd is missing, without leaving a system innd running.

    One install at a time (testing.install): two newsd starting at once on a
    machine without INN2 install it once.
    """
    install_once(_inn2_present, _install_inn2)


def _inn2_present() -> bool:
    return (INN_BIN / "innd").exists() and (INN_BIN / "nnrpd").exists()


def _install_inn2() -> None:
    if os.geteuid() != 0:
        raise CannotInstall("INN2 is not installed; as root run: apt-get install -y inn2")
    policy = Path("/usr/sbin/policy-rc.d")
    added_policy = not policy.exists()
    if added_policy:
        # Tells invoke-rc.d not to start the system innd on port 119.
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        installed = apt_get_install("inn2", env=env)
        if installed.returncode != 0:
            _finish_configure(env, installed.stdout + installed.stderr)
    finally:
        if added_policy:
            policy.unlink()
    _stop_system_innd()


def _finish_configure(env: dict[str, str], output: str) -> None:
    """inn2's postinst fails when the host name has no domain: give it one and retry."""
    conf = SYSTEM_ETC / "inn.conf"
    if not conf.exists():
        raise CannotInstall(f"apt-get install -y inn2 failed:\n{output[-2000:]}")
    text = conf.read_text()
    if "\ndomain:" not in text:
        conf.write_text(text.replace("\n#domain:", "\ndomain: localdomain\n#domain:", 1))
    done = subprocess.run(
        ["dpkg", "--configure", "-a"], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise NewsdError(f"dpkg --configure inn2 failed:\n{(done.stdout + done.stderr)[-2000:]}")


def _stop_system_innd() -> None:
    pid_file = Path("/run/news/innd.pid")
    if pid_file.exists():
        subprocess.run([str(INN_BIN / "ctlinnd"), "-t", "10", "shutdown", "newsd"], check=False)


# -- configuration ----------------------------------------------------------


@attrs.frozen
class GroupSpec:
    name: str
    first: int = 1

    @classmethod
    def parse(cls, text: str) -> GroupSpec:
        name, _, first = text.partition(":")
        spec = cls(name.strip(), int(first) if first else 1)
        if not 1 <= spec.first <= INN_MAX_ARTICLE:
            raise NewsdError(f"{text}: INN2 numbers articles 1 .. {INN_MAX_ARTICLE}")
        return spec


@attrs.frozen
class Layout:
    root: Path

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def db(self) -> Path:
        return self.root / "db"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def inn_conf(self) -> Path:
        return self.etc / "inn.conf"

    @property
    def state_file(self) -> Path:
        return self.root / "newsd.json"

    def env(self) -> dict[str, str]:
        return {**os.environ, "INNCONF": str(self.inn_conf), "HOME": str(self.root)}


def _inn_conf(layout: Layout, feeder_port: int) -> str:
    overrides = {
        "pathhost": "newsd.test",
        "domain": "newsd.test",
        "server": HOST,
        "port": str(feeder_port),
        "bindaddress": HOST,
        "bindaddress6": "none",
        "nnrpdpostport": str(feeder_port),
        # 0: no cut-off (the default, 10, refuses articles posted over 10 days
        # ago: the realistic ones go back weeks); innd's `-c 0` says it again.
        # innd also refuses a Date over a day ahead of its clock (tried: 25 h
        # is 439); the generated dates end at --end.
        "artcutoff": "0",
        "maxartsize": "0",
        "localmaxartsize": "0",
        "nnrpdloadlimit": "0",  # a busy test machine must not make nnrpd refuse
        "maxconnections": "0",
        "pgpverify": "false",
        "doinnwatch": "false",
        "logipaddr": "false",
        "logartsize": "false",
        "incominglogfrequency": "100000",
        "status": "0",
        "timer": "0",
        "wipcheck": "0",
        "hiscachesize": "4096",
        "msgidcachesize": "200000",
        "overcachesize": "512",
        "patharchive": str(layout.spool / "archive"),
        "patharticles": str(layout.spool / "articles"),
        "pathdb": str(layout.db),
        "pathetc": str(layout.etc),
        "pathfilter": str(layout.etc / "filter"),
        "pathhttp": str(layout.root / "http"),
        "pathincoming": str(layout.spool / "incoming"),
        "pathlog": str(layout.root / "log"),
        "pathoutgoing": str(layout.spool / "outgoing"),
        "pathoverview": str(layout.spool / "overview"),
        "pathrun": str(layout.run),
        "pathspool": str(layout.spool),
        "pathtmp": str(layout.spool / "incoming" / "tmp"),
        "tlscertfile": str(layout.etc / "tls" / "cert.pem"),
        "tlskeyfile": str(layout.etc / "tls" / "key.pem"),
        "tlscafile": str(layout.etc / "tls" / "cert.pem"),
    }
    lines = []
    for raw in (SYSTEM_ETC / "inn.conf").read_text().splitlines():
        key = raw.split(":", 1)[0].strip()
        if raw.startswith("#") or ":" not in raw or key in overrides:
            continue
        lines.append(raw)
    lines += [f"{key}: {value}" for key, value in overrides.items()]
    return "\n".join(lines) + "\n"


def _readers_conf(layout: Layout, user: str | None) -> str:
    if user is None:
        return (
            'auth "local" {\n    hosts: "127.0.0.1, localhost"\n    default: "<local>"\n}\n'
            'access "local" {\n    users: "<local>"\n    newsgroups: "*"\n    access: RPA\n}\n'
        )
    # Without AUTHINFO the client has no identity: every command but
    # CAPABILITIES, AUTHINFO, STARTTLS and QUIT is answered 480.
    return (
        f'auth "local" {{\n    hosts: "127.0.0.1, localhost"\n'
        f'    auth: "ckpasswd -f {layout.etc / "passwd"}"\n}}\n'
        f'access "local" {{\n    users: "{user}"\n    newsgroups: "*"\n    access: RPA\n}}\n'
    )


def _write_config(layout: Layout, args: argparse.Namespace, groups: list[GroupSpec]) -> None:
    for sub in ("etc/tls", "db", "run", "log", "http", "spool/articles", "spool/overview"):
        (layout.root / sub).mkdir(parents=True, exist_ok=True)
    for sub in ("incoming/tmp", "incoming/bad", "outgoing", "archive"):
        (layout.spool / sub).mkdir(parents=True, exist_ok=True)
    for item in SYSTEM_ETC.iterdir():
        if item.is_file():
            shutil.copy(item, layout.etc / item.name)
    layout.inn_conf.write_text(_inn_conf(layout, args.feeder_port))
    (layout.etc / "readers.conf").write_text(_readers_conf(layout, args.user))
    (layout.etc / "incoming.conf").write_text(
        'streaming: true\nmax-connections: 16\npeer ME {\n  hostname: "localhost, 127.0.0.1"\n}\n'
    )
    (layout.etc / "newsfeeds").write_text("ME:*::\n")
    _write_storage(layout)
    all_groups = [GroupSpec("control"), GroupSpec("control.cancel"), GroupSpec("junk"), *groups]
    (layout.db / "active").write_text(
        "".join(f"{g.name} {g.first - 1:010d} {g.first:010d} y\n" for g in all_groups)
    )
    (layout.db / "active.times").write_text("")
    (layout.db / "newsgroups").write_text("".join(f"{g.name}\tTest group\n" for g in groups))
    (layout.db / "history").write_text("")
    if args.user is not None:
        hashed = subprocess.run(
            ["openssl", "passwd", "-6", "-stdin"],
            input=args.password,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        (layout.etc / "passwd").write_text(f"{args.user}:{hashed}\n")
    _make_certificate(layout.etc / "tls")


def _write_storage(layout: Layout) -> None:
    """CNFS: one preallocated buffer file, no file per article (timehash posts ~2x slower)."""
    buffer = layout.spool / "cnfs.buf"
    with buffer.open("wb") as out:
        out.truncate(CNFS_BUFFER_KIB * 1024)  # sparse: costs no disk until written
    (layout.etc / "cycbuff.conf").write_text(
        f"cycbuff:ONE:{buffer}:{CNFS_BUFFER_KIB}\nmetacycbuff:SPOOL:ONE\n"
    )
    (layout.etc / "storage.conf").write_text(
        "method cnfs {\n    newsgroups: *\n    class: 0\n    options: SPOOL\n}\n"
    )


def _make_certificate(folder: Path) -> None:
    """A self-signed certificate for 127.0.0.1 and localhost; it is its own CA file."""
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
            "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem"),
            "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext", "basicConstraints=critical,CA:TRUE",
        ],
        capture_output=True,
        check=True,
    )  # fmt: skip
    (folder / "key.pem").chmod(0o600)


# -- running ----------------------------------------------------------------


def _as_news() -> dict[str, Any]:
    """Popen arguments that run a command as `news` when we are root.

    Popen switches user itself: runuser would stay in between, and on SIGTERM
    it waits 2 s before it lets go, which made every stop take seconds.
    """
    if os.geteuid() != 0:
        return {}
    return {"user": NEWS_USER, "group": NEWS_USER, "extra_groups": []}


def _chown_tree(root: Path) -> None:
    if os.geteuid() != 0:
        return
    entry = pwd.getpwnam(NEWS_USER)
    for path in [root, *root.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def _spawn(layout: Layout, name: str, command: list[str]) -> int:
    log = (layout.root / "log" / f"{name}.out").open("ab")
    process = subprocess.Popen(
        command,
        env=layout.env(),
        **_as_news(),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # the server outlives `newsd start`
    )
    return process.pid


def _wait_greeting(port: int, deadline: float) -> None:
    last = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((HOST, port), timeout=2) as conn:
                last = conn.recv(512).decode("latin-1")
                if last[:3] in ("200", "201"):
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.1)
    raise NewsdError(f"nothing greets on {HOST}:{port} (last: {last.strip()!r})")


def _wait_tls_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((HOST, port), timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise NewsdError(f"the NNTPS port {HOST}:{port} does not accept connections")


def start(args: argparse.Namespace) -> dict[str, object]:
    """Configures and starts the private INN2; returns what `start` prints."""
    ensure_inn2()
    layout = Layout(Path(args.dir).resolve())
    if layout.state_file.exists():
        raise NewsdError(f"{layout.state_file} exists: run `newsd stop {layout.root}` first")
    if (args.user is None) != (args.password is None):
        raise NewsdError("--user and --password go together")
    groups = [GroupSpec.parse(g) for g in args.groups.split(",") if g.strip()]
    args.port = args.port or free_port()
    args.tls_port = args.tls_port or free_port()
    args.feeder_port = args.feeder_port or free_port()
    _write_config(layout, args, groups)
    _chown_tree(layout.root)
    makedbz = subprocess.run(
        [str(INN_BIN / "makedbz"), "-i", "-o", "-s", "1000000"],
        env=layout.env(),
        **_as_news(),
        cwd=layout.db,
        capture_output=True,
        text=True,
    )
    if makedbz.returncode != 0:
        raise NewsdError(f"makedbz failed: {makedbz.stderr.strip()}")
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    pids = {
        # -c 0: no artcutoff (as in inn.conf; either one alone refuses old articles).
        "innd": _spawn(layout, "innd", [str(INN_BIN / "innd"), "-f", "-c", "0"]),
        "nnrpd": _spawn(
            layout,
            "nnrpd",
            [str(INN_BIN / "nnrpd"), "-D", "-f", "-n", "-b", HOST, "-p", str(args.port)],
        ),
        "nnrpd_tls": _spawn(
            layout,
            "nnrpd-tls",
            [str(INN_BIN / "nnrpd"), "-D", "-f", "-n", "-S", "-b", HOST, "-p", str(args.tls_port)],
        ),
    }
    state: dict[str, object] = {
        "host": HOST,
        "port": args.port,
        "tls_port": args.tls_port,
        "feeder_port": args.feeder_port,
        "ca_file": str(layout.etc / "tls" / "cert.pem"),
        "user": args.user,
        "password": args.password,
        "groups": {g.name: g.first for g in groups},
        "pids": pids,
        "dir": str(layout.root),
    }
    layout.state_file.write_text(json.dumps(state, indent=1))
    try:
        _wait_greeting(args.feeder_port, deadline)
        _wait_greeting(args.port, deadline)
        _wait_tls_port(args.tls_port, deadline)
    except NewsdError:
        stop(layout.root)
        logs = "".join(
            f"\n--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
            for p in sorted((layout.root / "log").glob("*"))
            if p.is_file()
        )
        raise NewsdError(f"INN2 did not start under {layout.root}{logs}") from None
    return state


def stop(root: Path) -> bool:
    """Stops what `start` started under root; False when nothing was running there."""
    layout = Layout(root.resolve())
    if not layout.state_file.exists():
        return False
    state = json.loads(layout.state_file.read_text())
    subprocess.run(
        [str(INN_BIN / "ctlinnd"), "-t", "5", "shutdown", "newsd stop"],
        env=layout.env(),
        **_as_news(),
        capture_output=True,
        check=False,
    )
    _end_groups([int(pid) for pid in state["pids"].values()])
    layout.state_file.unlink()
    return True


def _end_groups(pids: list[int]) -> None:
    """TERM the process groups `start` made (one per server process), KILL them after 5 s."""
    for sig, wait_seconds in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
        alive = [pid for pid in pids if _signal_group(pid, sig)]
        deadline = time.monotonic() + wait_seconds
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [pid for pid in alive if _signal_group(pid, 0)]
        if not alive:
            return
        pids = alive


def _signal_group(pid: int, sig: int) -> bool:
    """Signals the group; False when it is gone."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    return True


# -- articles ---------------------------------------------------------------


@attrs.frozen
class PostedArticle:
    """One generated article: what its overview line must say."""

    message_id: str
    subject: str
    poster: str
    date: str
    body: bytes
    # The Newsgroups header when it is not just the group posted to (a crosspost).
    newsgroups: str | None = None
    references: str = ""

    def wire(self, group: str) -> bytes:
        """The article as TAKETHIS sends it (CRLF lines, dot-stuffed, "." ended)."""
        lines = self.body.count(b"\n")
        references = f"References: {self.references}\r\n" if self.references else ""
        head = (
            f"Path: newsd.test!not-for-mail\r\n"
            f"From: {self.poster}\r\n"
            f"Newsgroups: {self.newsgroups or group}\r\n"
            f"Subject: {self.subject}\r\n"
            f"Message-ID: {self.message_id}\r\n"
            f"Date: {self.date}\r\n"
            f"{references}"
            f"Lines: {lines}\r\n"
            f"\r\n"
        ).encode()
        body = self.body.replace(b"\r\n.", b"\r\n..")
        if body.startswith(b"."):
            body = b"." + body
        return head + body + b".\r\n"


_WORDS = ("Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India",
          "Juliett", "Kilo", "Lima", "Mike", "November", "Oscar", "Papa", "Quebec", "Romeo",
          "Sierra", "Tango", "Uniform", "Victor", "Whiskey")  # fmt: skip
_POSTERS = ("Yenc@power-post.org (Yenc-PP-GUI)", "poster <poster@example.com>", "ngPost@ngPost.com")


def generate_articles(group: str, count: int, seed: int) -> Iterator[PostedArticle]:
    """`count` articles in upload order: files of 1-40 segments, releases of 1-12 files.

    The same (group, count, seed) always gives the same articles, so a test
    can compare what the server returns with what was posted.
    """
    rng = random.Random(f"{group}/{seed}")
    made = 0
    date = "Mon, 30 Nov 2026 10:00:00 +0000"
    while made < count:
        release = ".".join(rng.sample(_WORDS, 3)) + f".{rng.randrange(1900, 2030)}"
        poster = rng.choice(_POSTERS)
        files = rng.randint(1, 12)
        for index in range(1, files + 1):
            segments = rng.randint(1, 40)
            name = f"{release}.part{index:02d}.rar"
            for k in range(1, segments + 1):
                if made == count:
                    return
                subject = f'[{index}/{files}] - "{name}" yEnc ({k}/{segments})'
                body = _body(rng, k, name)
                message_id = f"<{seed}.{made}.{rng.getrandbits(40):010x}@newsd.{group}>"
                yield PostedArticle(message_id, subject, poster, date, body)
                made += 1


def _body(rng: random.Random, part: int, name: str) -> bytes:
    # A few lines that look like yEnc; one starts with a dot, to be stuffed.
    body = f"=ybegin part={part} line=128 size=1000 name={name}\r\n".encode()
    body += b"." + rng.randbytes(30).hex().encode() + b"\r\n"
    return body + b"=yend\r\n"


def realistic_articles(
    group: str, count: int, seed: int, *, days: float, end: int
) -> Iterator[PostedArticle]:
    """`count` articles of uidx's generator, dated over the `days` days before `end`.

    The generator (testing/generator.py) writes overview lines of a busy
    binary group; each becomes an article with that line's subject, poster,
    Date, message-id, References and, for a crosspost, its Xref's groups as
    Newsgroups (innd files it in the groups it carries). What a server makes
    itself is left to innd: article numbers (so the generator leaves no
    gaps), byte and line counts (the bodies are a few lines, not the
    generated sizes) and the overview (so no malformed lines).

    Args:
        group: the group posted to (the generator's group).
        count: how many articles.
        seed: the generator's seed; the same arguments give the same articles.
        days: the span of their dates; the first is `days` before `end`.
        end: unix time the dates stop short of (innd refuses a Date over a
            day ahead of its clock).

    Yields:
        The articles in posting order, their dates rising.
    """
    span = round(days * SECONDS_PER_DAY)
    config = GeneratorConfig(
        articles=count,
        seed=seed,
        group=group,
        start_time=end - span,
        seconds_per_article=span / count if count else 0.0,
        malformed_fraction=0.0,
        gap_probability=0.0,
    )
    rng = random.Random(f"{group}/{seed}/bodies")
    for line in OverviewGenerator(config).lines():
        _number, subject, poster, date, message_id, references, _b, _l, xref = line.decode().split(
            "\t"
        )
        groups = [entry.rpartition(":")[0] for entry in xref.split(" ")[2:]]
        yield PostedArticle(
            message_id,
            subject,
            poster,
            date,
            _body(rng, 1, "demo"),
            newsgroups=",".join(groups) if groups != [group] else None,
            references=references,
        )


def post(
    root: Path,
    group: str,
    count: int,
    seed: int,
    *,
    days: float | None = None,
    end: int | None = None,
) -> dict[str, object]:
    """Feeds `count` generated articles to innd with pipelined TAKETHIS.

    Args:
        root: the folder `start` ran in.
        group: the group posted to.
        count: how many articles.
        seed: their seed.
        days: None: `generate_articles` (all of one date); else
            `realistic_articles` dated over the `days` days before `end`.
        end: unix time the realistic dates end at (None: now).

    Returns:
        What `post` prints: group, articles, seconds, articles_per_second,
        first_date and last_date (the Date of the first and last article).
    """
    if days is None:
        articles = generate_articles(group, count, seed)
    else:
        end = int(time.time()) if end is None else end
        articles = realistic_articles(group, count, seed, days=days, end=end)
    return post_articles(root, group, articles)


def post_articles(root: Path, group: str, articles: Iterable[PostedArticle]) -> dict[str, object]:
    """Feeds `articles` to innd with pipelined TAKETHIS (see `post`; tests post their own)."""
    state = json.loads((root.resolve() / "newsd.json").read_text())
    first_date = last_date = None
    count = 0
    started = time.monotonic()
    with socket.create_connection((HOST, int(state["feeder_port"])), timeout=60) as conn:
        reader = conn.makefile("rb")
        _expect(reader, (200,), "greeting")
        conn.sendall(b"MODE STREAM\r\n")
        _expect(reader, (203,), "MODE STREAM")
        in_flight = 0
        batch: list[bytes] = []
        for article in articles:
            count += 1
            first_date, last_date = first_date or article.date, article.date
            batch.append(b"TAKETHIS " + article.message_id.encode() + b"\r\n" + article.wire(group))
            if len(batch) == TAKETHIS_WINDOW:
                conn.sendall(b"".join(batch))
                _read_takethis(reader, in_flight)
                in_flight, batch = len(batch), []
        conn.sendall(b"".join(batch))
        _read_takethis(reader, in_flight + len(batch))
        conn.sendall(b"QUIT\r\n")
    seconds = time.monotonic() - started
    return {"group": group, "articles": count, "seconds": round(seconds, 3),
            "articles_per_second": round(count / seconds) if seconds else None,
            "first_date": first_date, "last_date": last_date}  # fmt: skip


def _expect(reader: object, codes: Sequence[int], what: str) -> bytes:
    line: bytes = reader.readline()  # type: ignore[attr-defined]
    if not line[:3].isdigit() or int(line[:3]) not in codes:
        raise NewsdError(f"{what}: innd answered {line!r}")
    return line


def _read_takethis(reader: object, replies: int) -> None:
    for _ in range(replies):
        _expect(reader, (239,), "TAKETHIS")


# -- the command line -------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="newsd", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="configure and start a private INN2 under DIR")
    p_start.add_argument("dir")
    p_start.add_argument("--port", type=int, default=0, help="reader port (plain, STARTTLS)")
    p_start.add_argument("--tls-port", type=int, default=0, help="NNTPS port (TLS on connect)")
    p_start.add_argument("--feeder-port", type=int, default=0, help="innd's port (TAKETHIS)")
    p_start.add_argument("--groups", default="alt.binaries.test", help="g1,g2:first,...")
    p_start.add_argument("--user")
    p_start.add_argument("--password")
    p_stop = sub.add_parser("stop", help="stop the INN2 running under DIR")
    p_stop.add_argument("dir")
    p_post = sub.add_parser("post", help="post generated articles with TAKETHIS")
    p_post.add_argument("dir")
    p_post.add_argument("--group", required=True)
    p_post.add_argument("--articles", type=int, required=True)
    p_post.add_argument("--seed", type=int, default=0)
    p_post.add_argument(
        "--days",
        type=float,
        help="post uidx's realistic generated group (testing/generator.py) dated over the "
        "last DAYS days, instead of simple articles all of one date",
    )
    p_post.add_argument(
        "--end", type=int, help="with --days: unix time the dates end at (default: now)"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            print(json.dumps(start(args)))
        elif args.command == "stop":
            if not stop(Path(args.dir)):
                print(f"newsd: nothing runs under {args.dir}", file=sys.stderr)
        else:
            done = post(
                Path(args.dir), args.group, args.articles, args.seed, days=args.days, end=args.end
            )
            print(json.dumps(done))
    except CannotInstall as exc:
        print(f"newsd: {exc}", file=sys.stderr)
        return 2
    except (NewsdError, subprocess.CalledProcessError, OSError) as exc:
        print(f"newsd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
