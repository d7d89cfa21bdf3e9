"""`uidx db dump` and `uidx db restore` (store/backup.py), run as the real program against
real PostgreSQL: the embedded cluster of a home, and DATABASE_URL's database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import httpx
import orjson
import psycopg
import pytest
import trio
from test_cli_errors import EXIT_CONFIG, EXIT_ERROR, uidx
from test_newznab import store_generated

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.store.migrate import load_migrations
from usenet_indexer.store.pgcluster import Cluster
from usenet_indexer.store.pool import open_pool
from usenet_indexer.testing.postgres import scratch_dir
from usenet_indexer.testing.processes import child_env

# Far above what each step needs (a cluster's initdb and start: a few seconds).
DEADLINE_SECONDS = 120

# What `uidx status --json` must show alike before the dump and after the restore
# (the rest is the clock's and the processes' of the moment).
KEPT = ("groups", "ranges", "parked_ranges", "releases", "spool", "probes")


def status(env: dict[str, str]) -> dict[str, Any]:
    done = uidx("status", "--json", env=env)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = orjson.loads(done.stdout)
    return {key: found[key] for key in KEPT} | {"nodes": [n["name"] for n in found["nodes"]]}


async def what_users_see(settings: Settings, url: str, key: str, token: str) -> dict[str, Any]:
    """The newest feed, a search's guids, the first release's NZB, and a node's lease call,
    from a coordinator serving the database at `url`."""
    with open_pool(url, settings) as pool:
        stores = Stores.from_pool(pool)
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(partial(serve, settings, stores))
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
                feed = await client.get("/api", params={"t": "search", "apikey": key})
                guids = [i.findtext("guid") for i in ET.fromstring(feed.content).iter("item")]
                word = (
                    ET.fromstring(feed.content).findtext("./channel/item/title", "").split(".")[0]
                )
                found = await client.get("/api", params={"t": "search", "apikey": key, "q": word})
                nzb = await client.get("/api", params={"t": "get", "apikey": key, "id": guids[0]})
                lease = await client.post(
                    "/api/v1/node/lease", headers={"Authorization": f"Bearer {token}"}
                )
                stranger = await client.post(
                    "/api/v1/node/lease", headers={"Authorization": "Bearer not-a-token"}
                )
            nursery.cancel_scope.cancel()
    assert feed.status_code == found.status_code == nzb.status_code == 200
    return {
        "newest": guids,
        "searched": [i.findtext("guid") for i in ET.fromstring(found.content).iter("item")],
        "nzb": nzb.content,
        "lease": lease.status_code,
        "stranger": stranger.status_code,
    }


async def run(function: Callable[..., Any], *args: Any) -> Any:
    """`function(*args)` in a worker thread (a command, a database hop)."""
    return await trio.to_thread.run_sync(partial(function, *args))


@pytest.fixture
def homes() -> Iterator[tuple[Path, Path]]:
    """Two uidx homes a cluster run as another user (as root) can reach; their embedded
    clusters stopped at the end."""
    with scratch_dir() as folder:
        first, second = folder / "old", folder / "new"
        try:
            yield first, second
        finally:
            for home in (first, second):
                Cluster(home / "postgres").stop(mode="immediate")


@pytest.mark.trio
async def test_a_dump_restored_into_a_new_home_serves_the_same_catalog_users_and_nodes(
    homes: tuple[Path, Path], tmp_path: Path
) -> None:
    """The embedded cluster's database dumped, a new home made (its first `uidx status`
    migrates the empty database, as any command would: pg_restore then failed on the
    tables it found) and the dump restored there: `uidx status` shows the same groups,
    ranges and catalog; a newznab key finds the same releases and NZBs; a node's token
    still leases; restoring again over the restored data is refused in one line."""
    old, new = homes
    env_old, env_new = child_env(UIDX_HOME=str(old)), child_env(UIDX_HOME=str(new))
    with trio.fail_after(DEADLINE_SECONDS * 3):
        assert (await run(partial(uidx, "db", "start", env=env_old))).returncode == 0
        settings = Settings(home=old, listen="127.0.0.1:0")
        old_url = Cluster(old / "postgres").url()
        assert (await run(partial(uidx, "db", "migrate", env=env_old))).returncode == 0
        with open_pool(old_url, settings) as pool:
            stores = Stores.from_pool(pool)
            assert await run(store_generated, stores, 8_000, 5) > 10
            key = stores.users.create("sonarr")
            token = stores.nodes.create("edge-1")
        before = await run(status, env_old)
        seen = await what_users_see(settings, old_url, key, token)
        assert seen["lease"] == 204  # nothing left to lease; a token it knows
        assert seen["stranger"] == 401

        dump = tmp_path / "uidx.dump"
        dumped = await run(partial(uidx, "db", "dump", dump, env=env_old))
        assert dumped.returncode == 0, dumped.stderr
        said = dumped.stderr.splitlines()
        assert "uidx db dump: dumping table public.catalog (" in dumped.stderr
        assert said[-1].startswith("uidx db dump: ")
        assert f"(schema at {load_migrations()[-1].name}) written to {dump}" in said[-1]

        assert (await run(partial(uidx, "status", env=env_new))).returncode == 0
        restored = await run(partial(uidx, "db", "restore", dump, env=env_new))
        assert restored.returncode == 0, restored.stderr
        assert "dropping the empty uidx schema" in restored.stderr
        assert "uidx db restore: restoring table public.catalog\n" in restored.stderr
        assert restored.stderr.splitlines()[-1].startswith(
            f"uidx db restore: {dumped.stderr.count('dumping table')} tables restored from {dump}"
        )

        assert await run(status, env_new) == before
        settings_new = Settings(home=new, listen="127.0.0.1:0")
        new_url = Cluster(new / "postgres").url()
        assert await what_users_see(settings_new, new_url, key, token) == seen

        again = await run(partial(uidx, "db", "restore", dump, env=env_new))
        assert again.returncode == EXIT_ERROR
        (line,) = again.stderr.splitlines()
        assert line.startswith(
            f"uidx db restore: the embedded PostgreSQL in {new / 'postgres'} is not empty ("
        )
        assert line.endswith(
            " holds data): restore into an empty database (a new UIDX_HOME, or a new database"
            " for DATABASE_URL)"
        )


def test_a_dump_of_database_url_restores_into_another_after_refusing_what_it_must(
    stores: Stores, pg_url: str, pg_empty_url: str, tmp_path: Path
) -> None:
    """DATABASE_URL's database dumped and restored into another (migrated by `uidx status`
    first). Before anything changes, a restore is refused in one line while another
    session uses the database, and for a file that is no dump; a dump of a database a
    newer uidx migrated is refused (exit 78) without touching the database."""
    store_generated(stores, 4_000, 3)
    source, target = child_env(DATABASE_URL=pg_url), child_env(DATABASE_URL=pg_empty_url)
    for env in (source, target):
        env["UIDX_HOME"] = str(tmp_path / "home")
    before = status(source)
    dump = tmp_path / "uidx.dump"
    assert uidx("db", "dump", dump, env=source).returncode == 0
    assert uidx("status", env=target).returncode == 0  # migrates the empty database

    with psycopg.connect(pg_empty_url) as other:
        busy = uidx("db", "restore", dump, env=target)
        other.rollback()
    assert busy.returncode == EXIT_ERROR
    assert busy.stderr.splitlines()[-1].endswith(
        "is in use by 1 other sessions (a coordinator, a prefetcher, a command?): stop them,"
        " then restore"
    )
    not_a_dump = tmp_path / "notes.txt"
    not_a_dump.write_text("not a dump\n")
    wrong = uidx("db", "restore", not_a_dump, env=target)
    assert wrong.returncode == EXIT_ERROR
    assert wrong.stderr.splitlines() == [
        f"uidx db restore: {not_a_dump} is not a dump of `uidx db dump` (pg_dump's custom"
        " format begins with PGDMP)"
    ]

    done = uidx("db", "restore", dump, env=target)
    assert done.returncode == 0, done.stderr
    assert status(target) == before

    newer = "9033_from_a_newer_uidx.sql"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (9033, %s)", (newer,))
    newer_dump = tmp_path / "newer.dump"
    assert uidx("db", "dump", newer_dump, env=source).returncode == 0
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    refused = uidx("db", "restore", newer_dump, env=target)
    assert refused.returncode == EXIT_CONFIG
    assert refused.stderr.splitlines() == [
        f"uidx db restore: the dump {newer_dump} was migrated by a newer uidx: its migration"
        f" {newer} is not one this uidx knows (its last is {load_migrations()[-1].name});"
        " upgrade uidx to the version that applied it (coordinators and prefetchers are"
        " upgraded together)"
    ]
    with psycopg.connect(pg_empty_url) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)
