"""scripts/bench-probe: probes against a private INN2, their speed and what they find.

- Uploads with real bodies (usenet_indexer/testing/obfuscated.py: real
  PAR2 sets from par2cmdline, real zip and 7z floods, yEnc-encoded, with
  the subjects and obfuscation modes of Nyuu, NewsUP and ngPost, and plain
  ones) are posted to a private INN2 (scripts/newsd).
- Speed, in this process, alternating: a bare loop of BODY over the
  segments a probe reads, on one connection, against the prober's work on
  the same segments (BODY, then core/probing.py's examine: yEnc with CRC,
  PAR2 packets with MD5s, NFO, archive headers). Best of --repeat.
- What they find: `uidx standalone` indexes the group on a private
  PostgreSQL with probes on, until every candidate is done; then the
  catalog is scored against the uploads' truth: obfuscated uploads under
  their real name, their data files named, plain uploads unchanged, floods
  dropped.

The last line printed is one JSON object: {"bench": "probe", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import psycopg
import trio

from usenet_indexer.core.probing import examine
from usenet_indexer.nntp.client import connect
from usenet_indexer.testing.newsd_private import private_news_server
from usenet_indexer.testing.obfuscated import KINDS, Built, build
from usenet_indexer.testing.postgres import running_server
from usenet_indexer.testing.processes import free_port

GROUP = "alt.binaries.uidx.probebench"
UIDX = [sys.executable, "-m", "usenet_indexer"]


def probed_segments(uploads: list[Built]) -> list[tuple[str, str]]:
    """(message-id, posted file name) of the segment a probe of each upload reads:
    the par2 index's first, else the archive's."""
    found = []
    for upload in uploads:
        firsts = [a for a in upload.articles if a.subject.endswith("(1/1)") or "(1/" in a.subject]
        par2 = [a for a in firsts if ".par2" in a.subject and ".vol" not in a.subject]
        chosen = (par2 or firsts)[0]
        name = chosen.subject.split('"')[1]
        found.append((chosen.message_id.strip("<>"), name))
    return found


async def time_loops(url: str, segments: list[tuple[str, str]], repeat: int) -> dict[str, float]:
    bare: list[float] = []
    probe: list[float] = []
    decode: list[float] = []
    async with connect(url) as client:
        for _ in range(repeat):
            started = time.perf_counter()
            for message_id, _name in segments:
                await client.body(f"<{message_id}>")
            bare.append(time.perf_counter() - started)
            started = time.perf_counter()
            decoding = 0.0
            for message_id, name in segments:
                body = await client.body(f"<{message_id}>")
                at = time.perf_counter()
                examine(body, name, "")
                decoding += time.perf_counter() - at
            probe.append(time.perf_counter() - started)
            decode.append(decoding)
    n = len(segments)
    return {
        "bare_bodies_per_second": round(n / min(bare), 1),
        "probes_per_second_per_connection": round(n / min(probe), 1),
        "ratio": round(min(bare) / min(probe), 3),
        "decode_ms_per_probe": round(1000 * min(decode) / n, 3),
    }


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql).fetchall())


def settled(url: str) -> bool:
    (left, candidates, pending, ranges) = rows(
        url,
        "SELECT (SELECT count(*) FROM probe_candidates WHERE state IN ('new', 'probing')),"
        " (SELECT count(*) FROM probe_candidates), (SELECT count(*) FROM catalog_pending),"
        " (SELECT count(*) FROM ranges WHERE state <> 'done')",
    )[0]
    return left == 0 and candidates != 0 and pending == 0 and ranges == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--each", type=int, default=15, help="uploads of each kind")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="uidx-probebench-")))
        # Two hours apart: NewsUP's uploads all come under its default From.
        start = int(time.time()) - 7200 * args.each
        uploads = [
            build(folder / "files", kind, n, seed=3, posted=start + 7200 * n)
            for kind in KINDS
            for n in range(args.each)
        ]
        news = stack.enter_context(
            private_news_server([GROUP], prefix="uidx-newsd-probebench-", start_timeout_seconds=600)
        )
        for upload in uploads:
            news.post_articles(GROUP, upload.articles)
        print(f"bench-probe: {len(uploads)} uploads posted", file=sys.stderr, flush=True)
        speed = trio.run(time_loops, news.url(), probed_segments(uploads), args.repeat)
        print(f"bench-probe: speed {speed}", file=sys.stderr, flush=True)
        server = stack.enter_context(running_server())
        url = stack.enter_context(server.fresh_database())
        env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
        env.update(
            DATABASE_URL=url, UIDX_HOME=str(folder / "home"),
            UIDX_NNTP=f"{news.url()}?connections=4", UIDX_LISTEN=f"127.0.0.1:{free_port()}",
            UIDX_CATALOG_BUILD_SECONDS="0.5", UIDX_CATALOG_QUIET_SECONDS="0",
            UIDX_PROBE_SHARE="0.25", UIDX_IDLE_SECONDS="0.5",
        )  # fmt: skip
        subprocess.run([*UIDX, "groups", "add", GROUP], env=env, check=True, capture_output=True)
        ((low, high),) = rows(url, f"SELECT low, high FROM groups WHERE name = '{GROUP}'")
        subprocess.run(
            [*UIDX, "ranges", "plan", GROUP, "--from", str(low), "--to", str(high)],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        log = open(folder / "standalone.log", "wb")  # noqa: SIM115 (closed by the stack)
        stack.callback(log.close)
        process = subprocess.Popen([*UIDX, "standalone", "--processes", "1"], env=env, stderr=log)
        started = time.monotonic()
        try:
            while not settled(url):
                if time.monotonic() - started > args.timeout or process.poll() is not None:
                    raise SystemExit(f"not settled; see {folder / 'standalone.log'}")
                time.sleep(1.0)  # a benchmark's poll, not a test's wait
            seconds = time.monotonic() - started
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
        names = {str(r[0]) for r in rows(url, "SELECT name FROM catalog")}
        export = folder / "catalog.jsonl"
        subprocess.run([*UIDX, "catalog", "export", "--out", str(export)], env=env, check=True)
        files = {
            r["name"]: {f["name"] for f in r["files"]}
            for r in map(json.loads, export.read_text().splitlines())
            if not r["dropped"]
        }
        outcomes = {str(o): int(str(n)) for o, n in rows(
            url, "SELECT coalesce(outcome, 'none'), count(*) FROM probe_candidates GROUP BY 1"
        )}  # fmt: skip
    obfuscated = [u for u in uploads if u.kind in ("nyuu", "newsup", "ngpost")]
    plain = [u for u in uploads if u.kind == "plain"]
    floods = [u for u in uploads if u.flood]
    figures = {
        "renamed": round(sum(u.real_name in names for u in obfuscated) / len(obfuscated), 4),
        "files_named": round(
            sum(set(u.data_files) <= files.get(u.real_name, set()) for u in obfuscated)
            / len(obfuscated),
            4,
        ),
        "plain_unchanged": round(sum(u.real_name in names for u in plain) / len(plain), 4),
        "floods_dropped": round(sum(u.real_name not in names for u in floods) / len(floods), 4),
    }
    print(json.dumps({"bench": "probe", "uploads": len(uploads), **speed, **figures,
                      "outcomes": outcomes, "pipeline_seconds": round(seconds, 1)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
