"""PostgreSQL for tests: one server per test session, one fresh database per test.

Theory of operation
-------------------
`running_server()` gives the session its server: the one at
$UIDX_TEST_DATABASE_URL when that is set (its user needs CREATEDB), else a
private throwaway cluster (`pgcluster.Cluster`, no fsync) in a temporary
folder, which also works as root. It then makes one template database with
uidx's migrations applied. `PgServer.fresh_database()` clones that template
for one test (CREATE DATABASE ... TEMPLATE is a file copy: milliseconds,
where migrating each database would cost far more) and drops the clone
afterwards, closing any connection the test left open.

Database names carry a random tag of the session, so two test runs can share
an external server without meeting.

tests/pg_fixtures.py turns these into pytest fixtures.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import psycopg
from psycopg import conninfo, sql
from psycopg.rows import TupleRow

from usenet_indexer.store.migrate import migrate
from usenet_indexer.store.pgcluster import Cluster

# The server to use instead of a private cluster, e.g. in CI with a service.
URL_VARIABLE = "UIDX_TEST_DATABASE_URL"
# Where private clusters go, first usable first. Memory (/dev/shm) makes a
# database per test cost ~15 ms instead of 0.3-0.6 s of file creation on the
# disk of a small VM. Either is reachable by the server's user when running
# as root (pytest's own temporary folders are 0700 root) and short enough to
# leave room for the socket's path.
CLUSTER_ROOTS = (Path("/dev/shm"), Path("/tmp"))
# From PostgreSQL 15 on, CREATE DATABASE copies by WAL-logging every block
# unless told STRATEGY FILE_COPY, the only way before 15; for small databases
# on a cluster without fsync the file copy takes half the time (15 vs 30 ms).
STRATEGY_SINCE = 150000


@attrs.define(eq=False)
class PgServer:
    """A server that hands out fresh databases; one per test session."""

    admin: psycopg.Connection[TupleRow]  # autocommit, for CREATE/DROP DATABASE
    url: str  # the admin connection's conninfo
    tag: str  # random, in every database name of this session
    _numbers: Iterator[int] = attrs.field(factory=lambda: itertools.count(1))

    @property
    def template(self) -> str:
        return f"uidx_template_{self.tag}"

    def url_of(self, dbname: str) -> str:
        """The conninfo of one database of this server.

        Args:
            dbname: the database.

        Returns:
            The server's conninfo with that database.
        """
        return conninfo.make_conninfo(self.url, dbname=dbname)

    @contextlib.contextmanager
    def fresh_database(self, *, migrated: bool = True) -> Iterator[str]:
        """A new database for one test, dropped afterwards.

        Args:
            migrated: True for a copy of the migrated template; False for an
                empty database (to test migrations themselves).

        Yields:
            Its conninfo.
        """
        name = f"test_{self.tag}_{next(self._numbers)}"
        template = self.template if migrated else "template0"
        self._create(name, template)
        try:
            yield self.url_of(name)
        finally:
            self._drop(name)

    def make_template(self) -> None:
        """Make the session's template database and apply the migrations to it."""
        self._create(self.template, "template0")
        with psycopg.connect(self.url_of(self.template), autocommit=True) as conn:
            migrate(conn)
        # Nobody may connect to it from now on: a clone needs it unused. (Its
        # owner may clone it without IS_TEMPLATE, which would also block DROP.)
        self.admin.execute(
            sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(
                sql.Identifier(self.template)
            )
        )

    def drop_template(self) -> None:
        """Drop the session's template database."""
        self._drop(self.template)

    def _create(self, name: str, template: str) -> None:
        query = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)
        )
        if self.admin.info.server_version >= STRATEGY_SINCE:
            query += sql.SQL(" STRATEGY FILE_COPY")
        self.admin.execute(query)

    def _drop(self, name: str) -> None:
        # FORCE: a test that leaked a connection must not fail the next one.
        self.admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextlib.contextmanager
def running_server(url: str | None = None) -> Iterator[PgServer]:
    """The session's server, with its migrated template made.

    Args:
        url: the server to use; None takes $UIDX_TEST_DATABASE_URL, and
            without it starts a private cluster for as long as this lasts.

    Yields:
        The server.
    """
    url = url or os.environ.get(URL_VARIABLE) or None
    with contextlib.ExitStack() as stack:
        if url is None:
            url = stack.enter_context(private_cluster()).url("postgres")
        admin = stack.enter_context(psycopg.connect(url, autocommit=True))
        server = PgServer(admin=admin, url=url, tag=secrets.token_hex(4))
        try:
            server.make_template()
            yield server
        finally:
            server.drop_template()


@contextlib.contextmanager
def private_cluster(root: Path | None = None, *, durable: bool = False) -> Iterator[Cluster]:
    """A throwaway cluster in a new temporary folder, running while this lasts.

    Args:
        root: where the temporary folder goes (as root, the server's user
            must be able to reach it); None for `scratch_root()`.
        durable: keep what it acknowledged through a `-m immediate` stop (the
            throwaway settings, without it, acknowledge a commit before its
            WAL is written): for tests that stop PostgreSQL on purpose.

    Yields:
        The started cluster; it is stopped and its folder removed afterwards.
    """
    with scratch_dir(root) as folder:
        cluster = Cluster(folder / "postgres", durable=durable)
        try:
            cluster.start()
            yield cluster
        finally:
            # Immediate: the data is thrown away, no checkpoint is worth waiting for.
            cluster.stop(mode="immediate")


@contextlib.contextmanager
def scratch_dir(root: Path | None = None) -> Iterator[Path]:
    """A new temporary folder that a server run as another user can reach.

    Args:
        root: where it goes; None for `scratch_root()`.

    Yields:
        The folder (mode 0755); it is removed afterwards.
    """
    folder = Path(tempfile.mkdtemp(prefix="uidx-test-pg-", dir=root or scratch_root()))
    # mkdtemp makes it 0700; as root the server's user must pass it.
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def scratch_root() -> Path:
    """The first of CLUSTER_ROOTS that is a folder we may write in.

    Returns:
        /dev/shm on Linux, else /tmp.
    """
    for root in CLUSTER_ROOTS:
        if root.is_dir() and os.access(root, os.W_OK | os.X_OK):
            return root
    return CLUSTER_ROOTS[-1]
