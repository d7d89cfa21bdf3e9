"""A private PostgreSQL cluster that uidx runs itself when no DATABASE_URL is set.

Theory of operation
-------------------
The cluster lives in one folder (`<uidx home>/postgres`), made and run with
the system's PostgreSQL server binaries (`pg_config --bindir`, else the
newest `/usr/lib/postgresql/*/bin` of Debian):

    <data folder>/            owned by the server's user, mode 0700
        pgdata/               the cluster (initdb); postgresql.conf includes uidx.conf
        pgdata/uidx.conf      our settings, rewritten at every start
        socket/               the unix socket (the only way in: no TCP at all)
        postgresql.log        the server's log
        owner                 who stops the server (store/clusterowner.py)

Who runs the server: initdb, pg_ctl and postgres refuse to run as root. As
root, uidx runs them through `runuser` as an unprivileged user: the owner of
an existing cluster, else the `postgres` system user (Debian's package makes
it), else a `uidx` system user made with `useradd --system`. Not as root,
they run as the current user.

Who may connect: initdb makes the database superuser `uidx` (the same name
whoever runs the server, so a URL never depends on it) with `trust` for
socket connections and no TCP. The access control is the file system: the
socket folder is 0700, owned by the server's user, so only that user and
root (which is what uidx runs as in that case) can reach the socket. This is
what Debian's `peer` authentication gives, without mapping root to a role.

A socket path must fit in 107 bytes (sockaddr_un); a deep data folder gets
its socket in `/tmp/uidx-pg-<hash of the data folder>` instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import math
import os
import pwd
import re
import shutil
import stat
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import attrs
import psycopg
from psycopg import conninfo, errors, sql

from usenet_indexer.errors import ConfigError, DatabaseError

logger = logging.getLogger(__name__)

# The database superuser initdb makes, and the database uidx works in.
SUPERUSER = "uidx"
DATABASE = "uidx"
# The socket file is named after the port; the socket folder is private, so
# the usual port cannot clash with another server's.
PORT = 5432
SOCKET_FILE = f".s.PGSQL.{PORT}"
# sockaddr_un.sun_path is 108 bytes including the terminating NUL.
SOCKET_PATH_MAX = 107
# Where a socket goes when the data folder is too deep for one: /tmp itself
# (not $TMPDIR, which may be deep as well).
SHORT_SOCKET_ROOT = Path("/tmp")
# The tools a cluster needs; psql is optional (only `uidx db psql`).
SERVER_TOOLS = ("initdb", "pg_ctl", "postgres")
DEBIAN_BINDIRS = Path("/usr/lib/postgresql")
# Users to run the server as when uidx runs as root, in order of preference;
# the last one is made when none exists.
SERVER_USERS = ("postgres", "uidx")
# initdb of a small cluster takes 1-3 s; a slow disk may take much longer.
INITDB_TIMEOUT_SECONDS = 120.0
# pg_ctl status and --version answer at once; anything longer is a hang.
QUICK_TIMEOUT_SECONDS = 30.0
INSTALL_HINT = "install them with `apt-get install -y postgresql` (Debian, Ubuntu)"

StopMode = Literal["smart", "fast", "immediate"]
State = Literal["running", "stopped", "uninitialized"]

# Server settings for a small machine (2 cores, a few GB) that bulk-loads
# batches by COPY. Timeouts per session are the store's business, not these.
SETTINGS: tuple[tuple[str, str], ...] = (
    ("listen_addresses", ""),  # unix socket only
    ("port", str(PORT)),
    ("unix_socket_permissions", "0700"),
    ("max_connections", "100"),
    ("shared_buffers", "256MB"),
    ("work_mem", "16MB"),
    ("maintenance_work_mem", "256MB"),
    # Bulk COPY fills the default 1GB of WAL fast: fewer forced checkpoints.
    ("max_wal_size", "2GB"),
    # Two cores: one helper per query leaves a core for the other sessions.
    ("max_parallel_workers_per_gather", "1"),
    # JIT costs 50-100 ms per query and pays off only on long analytic ones.
    ("jit", "off"),
    ("timezone", "UTC"),
    ("log_timezone", "UTC"),
    ("log_line_prefix", "%m [%p] %q%u@%d "),
)
# A cluster for tests only: its data may be lost on a crash, so nothing waits
# for the disk (CREATE DATABASE per test becomes several times faster).
THROWAWAY_SETTINGS: tuple[tuple[str, str], ...] = (
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
)


@attrs.frozen
class Binaries:
    """One installation of the PostgreSQL server binaries."""

    bindir: Path
    major: str  # "15"; the data folder's PG_VERSION must match it

    def tool(self, name: str) -> Path:
        """The path of one program of this installation.

        Args:
            name: the program, e.g. "pg_ctl".

        Returns:
            Its path (it may not exist for optional tools such as psql).
        """
        return self.bindir / name


@attrs.frozen
class ServerUser:
    """The unprivileged account the server runs as when uidx runs as root."""

    name: str
    uid: int
    gid: int

    @classmethod
    def from_passwd(cls, entry: pwd.struct_passwd) -> ServerUser:
        return cls(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid)


@attrs.frozen
class ClusterStatus:
    """What `Cluster.status` found."""

    state: State
    pid: int | None
    data_dir: Path
    socket_dir: Path
    data_version: str | None  # the PG_VERSION of the cluster, None before init
    bindir: Path | None  # the binaries that run it, None when none are needed yet

    @property
    def running(self) -> bool:
        return self.state == "running"


def _absolute(path: Path | str) -> Path:
    return Path(path).absolute()


@attrs.frozen
class Cluster:
    """A private PostgreSQL cluster in one folder, reached through a unix socket.

    Building one does no I/O; `init`, `start`, `stop` and `status` run the
    server's binaries.

    Attributes:
        data_dir: the folder of the cluster (made by `init` when missing).
        durable: False for test clusters: no fsync at all (see THROWAWAY_SETTINGS).
        bindir: the server binaries to use; None finds them (see `find_binaries`).
    """

    data_dir: Path = attrs.field(converter=_absolute)
    durable: bool = True
    bindir: Path | None = attrs.field(default=None, converter=attrs.converters.optional(_absolute))

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "postgresql.log"

    @property
    def socket_dir(self) -> Path:
        """The folder of the unix socket: inside the data folder when the path fits."""
        inside = self.data_dir / "socket"
        if len(os.fsencode(inside / SOCKET_FILE)) <= SOCKET_PATH_MAX:
            return inside
        digest = hashlib.sha256(os.fsencode(self.data_dir)).hexdigest()[:16]
        return SHORT_SOCKET_ROOT / f"uidx-pg-{digest}"

    @property
    def initialized(self) -> bool:
        return (self.pgdata / "PG_VERSION").is_file()

    def url(self, dbname: str = DATABASE) -> str:
        """The libpq conninfo string of one database of this cluster.

        Args:
            dbname: the database.

        Returns:
            A conninfo string for psycopg (host is the socket folder).
        """
        return conninfo.make_conninfo(
            "", host=str(self.socket_dir), port=PORT, user=SUPERUSER, dbname=dbname
        )

    def psql_args(self, dbname: str = DATABASE) -> list[str]:
        """The command line of psql on one database of this cluster.

        Args:
            dbname: the database.

        Returns:
            argv, the program first (the binaries' psql, else psql on PATH).

        Raises:
            ConfigError: no PostgreSQL binaries are installed.
            DatabaseError: the binaries do not match the cluster's version.
        """
        psql = self._binaries().tool("psql")
        program = str(psql) if psql.exists() else "psql"
        return [program, "-h", str(self.socket_dir), "-p", str(PORT), "-U", SUPERUSER, dbname]

    def tool(self, name: str) -> str:
        """A client program of the binaries that run this cluster (pg_dump, pg_restore):
        of the cluster's own version, else the one on PATH.

        Raises:
            ConfigError: no PostgreSQL binaries are installed.
            DatabaseError: the binaries do not match the cluster's version.
        """
        program = self._binaries().tool(name)
        return str(program) if program.exists() else name

    def init(self) -> bool:
        """Make the cluster with initdb unless it exists.

        Returns:
            True when it was made now, False when it existed.

        Raises:
            ConfigError: no PostgreSQL binaries are installed.
            DatabaseError: initdb failed, or (as root) the server's user cannot
                reach the data folder.
        """
        if self.initialized:
            return False
        binaries = self._binaries()
        user = _user_for_new_cluster(self.data_dir)
        if user is not None:
            _check_reachable(user, self.data_dir)
        _make_private_dir(self.data_dir, user)
        argv: list[str | Path] = [
            binaries.tool("initdb"),
            "--pgdata",
            self.pgdata,
            "--username",
            SUPERUSER,
            "--auth-local=trust",  # the socket folder's 0700 is the gate, see the module doc
            "--auth-host=reject",  # no TCP listener anyway
            "--encoding=UTF8",
            # Byte order sorting: fast, and the same on every machine.
            "--locale=C",
        ]
        if not self.durable:
            argv.append("--no-sync")
        _check(_run(argv, user=user, cwd=self.data_dir, timeout=INITDB_TIMEOUT_SECONDS), "initdb")
        with (self.pgdata / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# uidx writes its settings there at every start.\n")
            conf.write("include_if_exists = 'uidx.conf'\n")
        logger.info("made a PostgreSQL %s cluster in %s", binaries.major, self.pgdata)
        return True

    def start(self, timeout_seconds: float = 60.0) -> None:
        """Make the cluster if needed, start it and make the `uidx` database.

        Idempotent: a running cluster is fine. Returns when the server accepts
        connections (pg_ctl waits for that, up to the timeout).

        Args:
            timeout_seconds: how long the server may take to accept connections.

        Raises:
            ConfigError: no PostgreSQL binaries are installed.
            DatabaseError: the server did not start in time (the message has
                the end of its log), or the database could not be made.
        """
        with self._starting():
            self.init()
            binaries = self._binaries()
            if not self._status(binaries).running:
                self._start_server(binaries, timeout_seconds)
            self._ensure_database(timeout_seconds)

    def init_once(self) -> bool:
        """`init`, one process at a time per cluster (as `start`): a daemon making the
        data folder of a new home while a command starts its cluster does not run
        initdb beside the command's.

        Raises:
            as `init`.
        """
        with self._starting():
            return self.init()

    @contextlib.contextmanager
    def _starting(self) -> Iterator[None]:
        # One start at a time per cluster, across processes: on first use an
        # operator command and the coordinator may start it together, and two
        # initdb runs (or pg_ctl starts) in one folder fail each other. The lock
        # is on the folder above the data folder (it exists, or is made as init
        # would), held until the server answers; a later starter finds it running.
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def stop(self, mode: StopMode = "fast", timeout_seconds: float = 60.0) -> None:
        """Stop the server; a stopped or uninitialized cluster is fine.

        Args:
            mode: pg_ctl's shutdown mode: "fast" rolls back open sessions,
                "smart" waits for them, "immediate" does not even checkpoint.
            timeout_seconds: how long the shutdown may take.

        Raises:
            DatabaseError: the server did not stop in time.
        """
        if not self.initialized:
            return
        binaries = self._binaries()
        if not self._status(binaries).running:
            return
        result = self._pg_ctl(binaries, "stop", "--mode", mode, wait_seconds=timeout_seconds)
        if result.returncode != 0 and self._status(binaries).running:
            _check(result, "pg_ctl stop")
        if not self.socket_dir.is_relative_to(self.data_dir):
            # A socket folder in /tmp would outlive the data folder; start makes it again.
            with contextlib.suppress(OSError):
                self.socket_dir.rmdir()

    def status(self) -> ClusterStatus:
        """Whether the cluster exists and runs.

        Returns:
            The status; `pid` is the postmaster's when it runs.

        Raises:
            ConfigError: the cluster exists but no PostgreSQL binaries are installed.
            DatabaseError: pg_ctl could not tell.
        """
        if not self.initialized:
            return ClusterStatus("uninitialized", None, self.data_dir, self.socket_dir, None, None)
        return self._status(self._binaries())

    def _status(self, binaries: Binaries) -> ClusterStatus:
        result = self._pg_ctl(binaries, "status")
        # pg_ctl status: 0 running, 3 not running; anything else is trouble.
        if result.returncode not in (0, 3):
            _check(result, "pg_ctl status")
        pid = re.search(r"PID: (\d+)", result.stdout)
        return ClusterStatus(
            state="running" if result.returncode == 0 else "stopped",
            pid=int(pid.group(1)) if pid and result.returncode == 0 else None,
            data_dir=self.data_dir,
            socket_dir=self.socket_dir,
            data_version=self._data_version(),
            bindir=binaries.bindir,
        )

    def _start_server(self, binaries: Binaries, timeout_seconds: float) -> None:
        user = self._server_user()
        _make_socket_dir(self.socket_dir, user)
        self._write_settings(user)
        result = self._pg_ctl(
            binaries, "start", "--log", str(self.log_file), wait_seconds=timeout_seconds
        )
        # Another process may have started it meanwhile: that is fine too.
        if result.returncode != 0 and not self._status(binaries).running:
            raise DatabaseError(
                f"PostgreSQL in {self.pgdata} did not start: {_output(result)}\n"
                f"the end of {self.log_file}:\n{_tail(self.log_file)}"
            )
        logger.info("PostgreSQL runs in %s (socket in %s)", self.pgdata, self.socket_dir)

    def _pg_ctl(
        self, binaries: Binaries, action: str, *options: str, wait_seconds: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        # With wait_seconds, pg_ctl itself waits (bounded) until the server
        # accepts connections or is gone; our timeout only catches a hang.
        argv = [str(binaries.tool("pg_ctl")), action, "--pgdata", str(self.pgdata), *options]
        if wait_seconds is not None:
            argv += ["--wait", "--timeout", str(math.ceil(wait_seconds)), "--silent"]
        return _run(
            argv,
            user=self._server_user(),
            cwd=self.data_dir,
            timeout=(wait_seconds or 0.0) + QUICK_TIMEOUT_SECONDS,
        )

    def _write_settings(self, user: ServerUser | None) -> None:
        settings = (
            *SETTINGS,
            ("unix_socket_directories", str(self.socket_dir)),
            *(() if self.durable else THROWAWAY_SETTINGS),
        )
        text = (
            "# Written by uidx at every start; edit postgresql.auto.conf (ALTER SYSTEM) instead.\n"
        )
        text += "".join(f"{key} = {_conf_quote(value)}\n" for key, value in settings)
        # Written whole and renamed, so the server never reads half a file.
        temporary = self.pgdata / ".uidx.conf.tmp"
        temporary.write_text(text, encoding="utf-8")
        if user is not None:
            os.chown(temporary, user.uid, user.gid)
        temporary.replace(self.pgdata / "uidx.conf")

    def _ensure_database(self, timeout_seconds: float) -> None:
        try:
            with psycopg.connect(
                self.url("postgres"), autocommit=True, connect_timeout=math.ceil(timeout_seconds)
            ) as conn:
                found = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
                ).fetchone()
                if found is None:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        except errors.DuplicateDatabase:
            pass  # made by a concurrent start
        except psycopg.Error as error:
            raise DatabaseError(
                f"cannot make database {DATABASE} in {self.pgdata}: {error}"
            ) from error

    def _data_version(self) -> str | None:
        try:
            return (self.pgdata / "PG_VERSION").read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None

    def _binaries(self) -> Binaries:
        want = self._data_version()
        if self.bindir is None:
            return find_binaries(want)
        binaries = _probe(self.bindir)
        if binaries is None:
            raise _missing_binaries(f"{self.bindir} has no PostgreSQL server binaries")
        if want is not None and binaries.major != want:
            raise _wrong_version(self.pgdata, want, [binaries])
        return binaries

    def _server_user(self) -> ServerUser | None:
        # Once made, the cluster runs as the owner of its folder.
        if os.geteuid() != 0:
            return None
        owner = self.pgdata.stat().st_uid
        if owner == 0:
            raise DatabaseError(f"{self.pgdata} belongs to root; PostgreSQL refuses to run as root")
        return _user_of(owner, self.pgdata)


def find_binaries(want_major: str | None = None) -> Binaries:
    """Find the PostgreSQL server binaries.

    Args:
        want_major: the major version a cluster needs (its PG_VERSION), or None
            for the first found: `pg_config --bindir`, then the newest of
            /usr/lib/postgresql/*/bin.

    Returns:
        The binaries.

    Raises:
        ConfigError: none are installed.
        DatabaseError: none of the wanted version are installed.
    """
    found = [b for b in map(_probe, candidate_bindirs()) if b is not None]
    if not found:
        raise _missing_binaries(
            "found neither through `pg_config --bindir` nor in /usr/lib/postgresql/*/bin"
        )
    if want_major is None:
        return found[0]
    for binaries in found:
        if binaries.major == want_major:
            return binaries
    raise _wrong_version(None, want_major, found)


def client_tool(name: str) -> str:
    """A PostgreSQL client program (pg_dump, pg_restore) for DATABASE_URL's server: of
    the binaries `candidate_bindirs` finds first (pg_config's, else Debian's newest: a
    newer pg_dump reads an older server, not the reverse), else the one on PATH."""
    for folder in candidate_bindirs():
        if os.access(folder / name, os.X_OK):
            return str(folder / name)
    return name


def candidate_bindirs() -> list[Path]:
    """Folders that may hold the server binaries, best first, without duplicates.

    Returns:
        `pg_config --bindir` (when pg_config is installed), then Debian's
        /usr/lib/postgresql/*/bin, newest version first.
    """
    folders: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        try:
            result = subprocess.run(
                [pg_config, "--bindir"],
                capture_output=True,
                text=True,
                timeout=QUICK_TIMEOUT_SECONDS,
                check=True,
            )
            folders.append(Path(result.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            logger.debug("pg_config --bindir failed", exc_info=True)
    folders.extend(sorted(DEBIAN_BINDIRS.glob("*/bin"), key=_version_key, reverse=True))
    unique: dict[Path, None] = {}
    for folder in folders:
        unique.setdefault(folder.resolve(), None)
    return list(unique)


def database_url(settings_url: str | None, home: Path) -> tuple[str, Cluster | None]:
    """The database to use: DATABASE_URL when set, else the embedded cluster's.

    Args:
        settings_url: DATABASE_URL ("" counts as not set).
        home: the uidx home folder; the embedded cluster is in `home/postgres`.

    Returns:
        The URL or conninfo for psycopg, and the embedded cluster to start
        before connecting (None when DATABASE_URL is used).

    Raises:
        ConfigError: DATABASE_URL cannot be read as a URL or conninfo.
    """
    if settings_url:
        try:
            conninfo.conninfo_to_dict(settings_url)
        except psycopg.ProgrammingError as error:
            raise ConfigError(
                "database_url",
                "DATABASE_URL is neither a postgresql:// URL nor a conninfo: "
                + " ".join(str(error).split()),
            ) from None
        return settings_url, None
    cluster = Cluster(home / "postgres")
    return cluster.url(), cluster


def _probe(bindir: Path) -> Binaries | None:
    # None unless every server tool is there and pg_ctl tells its version.
    if not all(os.access(bindir / tool, os.X_OK) for tool in SERVER_TOOLS):
        return None
    try:
        result = subprocess.run(
            [bindir / "pg_ctl", "--version"],
            capture_output=True,
            text=True,
            timeout=QUICK_TIMEOUT_SECONDS,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # "pg_ctl (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"; 9.6 had two-part majors.
    match = re.search(r"\(PostgreSQL\) (\d+)(?:\.(\d+))?", result.stdout)
    if match is None:
        return None
    major = match.group(1) if int(match.group(1)) >= 10 else f"{match.group(1)}.{match.group(2)}"
    return Binaries(bindir=bindir, major=major)


def _version_key(bindir: Path) -> tuple[int, ...]:
    # /usr/lib/postgresql/15/bin -> (15,); names that are not versions sort first.
    try:
        return tuple(int(part) for part in bindir.parent.name.split("."))
    except ValueError:
        return (-1,)


def _missing_binaries(where: str) -> ConfigError:
    return ConfigError(
        "DATABASE_URL",
        "not set, and the embedded PostgreSQL needs the server binaries "
        f"({', '.join(SERVER_TOOLS)}): {where}; {INSTALL_HINT}, or set DATABASE_URL",
    )


def _wrong_version(pgdata: Path | None, want: str, found: Sequence[Binaries]) -> DatabaseError:
    versions = ", ".join(f"{b.major} ({b.bindir})" for b in found)
    return DatabaseError(
        f"the cluster {pgdata or ''} was made by PostgreSQL {want}, and only binaries of "
        f"{versions} are installed: install postgresql-{want} "
        f"(apt-get install -y postgresql-{want}) or upgrade the cluster with pg_upgrade"
    )


def _user_for_new_cluster(data_dir: Path) -> ServerUser | None:
    # Not root: the server runs as we do. Root: the owner of a data folder
    # someone prepared, else postgres, else a uidx system user made now.
    if os.geteuid() != 0:
        return None
    try:
        owner = data_dir.stat().st_uid
    except FileNotFoundError:
        owner = 0
    if owner != 0:
        return _user_of(owner, data_dir)
    for name in SERVER_USERS:
        try:
            return ServerUser.from_passwd(pwd.getpwnam(name))
        except KeyError:
            continue
    return _make_system_user(SERVER_USERS[-1])


def _user_of(uid: int, folder: Path) -> ServerUser:
    try:
        return ServerUser.from_passwd(pwd.getpwuid(uid))
    except KeyError:
        raise DatabaseError(
            f"{folder} belongs to uid {uid}, which has no account: chown it to postgres"
        ) from None


def _make_system_user(name: str) -> ServerUser:
    # A system account without a home or a login shell: it only runs the server.
    argv = ["useradd", "--system", "--user-group", "--no-create-home"]
    argv += ["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name]
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=QUICK_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise DatabaseError(
            f"cannot make the system user {name} to run PostgreSQL: {error}"
        ) from error
    if result.returncode != 0:
        raise DatabaseError(
            f"cannot make the system user {name} to run PostgreSQL: {_output(result)}"
        )
    logger.info("made the system user %s to run PostgreSQL (it refuses to run as root)", name)
    return ServerUser.from_passwd(pwd.getpwnam(name))


def _make_private_dir(path: Path, user: ServerUser | None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if user is not None:
        os.chown(path, user.uid, user.gid)
    path.chmod(0o700)


def _make_socket_dir(path: Path, user: ServerUser | None) -> None:
    # The socket folder is the only gate to a trust-authenticated server:
    # it must be ours, a real folder (not a link someone planted in /tmp), 0700.
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    allowed = {os.geteuid()} | ({user.uid} if user is not None else set())
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in allowed:
        raise DatabaseError(f"{path} is not a folder of ours; remove it to start PostgreSQL")
    if user is not None:
        os.chown(path, user.uid, user.gid)
    path.chmod(0o700)


def _check_reachable(user: ServerUser, data_dir: Path) -> None:
    # Checked before making anything: access(2) as that user checks every
    # folder on the way (e.g. /root is 0700). Folders made later are 0755.
    # The data folder itself does not count: it is made ours below.
    existing = next(folder for folder in data_dir.parents if folder.exists())
    result = _run(["test", "-x", existing], user=user, cwd=Path("/"))
    if result.returncode != 0:
        raise DatabaseError(
            f"PostgreSQL runs as the user {user.name} (it refuses root), and {user.name} "
            f"cannot reach {data_dir}: a folder above it is closed to others. Put the uidx "
            "home where other users can pass, e.g. UIDX_HOME=/var/lib/uidx"
        )


def _run(
    argv: Sequence[str | Path],
    *,
    user: ServerUser | None,
    cwd: Path,
    timeout: float = QUICK_TIMEOUT_SECONDS,
) -> subprocess.CompletedProcess[str]:
    # cwd matters: initdb and pg_ctl fail when they cannot read the folder they
    # start in, and root's current folder is often closed to the server's user.
    command = [*_as_user(user), *map(str, argv)]
    logger.debug("running %s", command)
    try:
        return subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise DatabaseError(f"{Path(argv[0]).name} failed: {error}") from error


def _as_user(user: ServerUser | None) -> list[str]:
    if user is None:
        return []
    if shutil.which("runuser") is not None:
        return ["runuser", "-u", user.name, "--"]
    return ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--init-groups", "--"]


def _check(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        raise DatabaseError(f"{what} failed (exit {result.returncode}): {_output(result)}")


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return (result.stderr.strip() or result.stdout.strip() or "no output")[-2000:]


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError as error:
        return f"(cannot read it: {error})"


def _conf_quote(value: str) -> str:
    # postgresql.conf strings are single-quoted with '' for a quote.
    escaped = value.replace("'", "''")
    return f"'{escaped}'"
