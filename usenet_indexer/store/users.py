"""Users of the newznab API, their API keys (kept as SHA-256 hashes, never as keys), their
role (a user or an operator, who may see the whole status page), their login sessions,
their daily use and limits, and the failed downloads they reported.

An API key is 32 random bytes, like a node token, so a plain hash is enough
to keep a stolen table from giving keys away. Node tokens and API keys live
in different tables: one is never taken for the other. A session token is
32 random bytes too, kept hashed in `sessions` with its expiry, so every
coordinator process knows every session.

Daily limits: each newznab request or NZB download (and each search on the
status page) is counted per user and UTC day in `api_usage` by one upsert, which refuses to count past the
user's limit (its own, else the settings'), so that several coordinator
processes share one count and a limit is never overshot by a race.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime

import attrs
import psycopg
import psycopg.sql
from psycopg_pool import ConnectionPool

from usenet_indexer.core.newznab import Usage
from usenet_indexer.errors import UidxError
from usenet_indexer.store.nodes import TOKEN_BYTES, token_hash

_CREATE = "INSERT INTO api_users (name, key_hash, role) VALUES (%s, %s, %s)"
# A live key's user, its request counted, in one statement (no row: no such live key).
_SEEN_KEY = """
    UPDATE api_users SET requests = requests + 1, last_seen = now()
    WHERE key_hash = %s AND revoked_at IS NULL
    RETURNING id, name, role
"""
_OPEN_SESSION = (
    "INSERT INTO sessions (token_hash, user_id, expires_at)"
    " VALUES (%s, %s, now() + make_interval(secs => %s))"
)
_EXPIRED = "DELETE FROM sessions WHERE expires_at < now()"
_BY_SESSION = (
    "SELECT u.id, u.name, u.role FROM sessions s JOIN api_users u ON u.id = s.user_id"
    " WHERE s.token_hash = %s AND s.expires_at > now() AND u.revoked_at IS NULL"
)
_END_SESSION = "DELETE FROM sessions WHERE token_hash = %s"
_REVOKE = "UPDATE api_users SET revoked_at = now() WHERE name = %s AND revoked_at IS NULL"
_NEW_KEY = "UPDATE api_users SET key_hash = %s WHERE name = %s AND revoked_at IS NULL RETURNING id"
# Logged in with the old key (whoever has it): out with it.
_END_SESSIONS_OF = "DELETE FROM sessions WHERE user_id = %s"
_LIST = """
    SELECT u.name, u.role = 'operator', u.created_at, u.revoked_at, u.requests, u.last_seen,
           u.requests_per_day, u.grabs_per_day,
           coalesce(d.requests, 0), coalesce(d.grabs, 0)
    FROM api_users u
    LEFT JOIN api_usage d ON d.user_id = u.id AND d.day = (now() AT TIME ZONE 'UTC')::date
    ORDER BY u.name, u.id
"""
# One count of a request (or an NZB download: the grabs column), refused past the
# user's limit (its own, else the default; 0: none): no row comes back then, and
# nothing is counted. A day's first request makes the row, counted as 1.
_TAKE = """
    WITH caps AS (
        SELECT coalesce(requests_per_day, %(requests)s) AS requests,
               coalesce(grabs_per_day, %(grabs)s) AS grabs
        FROM api_users WHERE id = %(user)s
    )
    INSERT INTO api_usage AS u (user_id, day, requests, grabs)
    VALUES (%(user)s, %(day)s, {first})
    ON CONFLICT (user_id, day) DO UPDATE SET {column} = u.{column} + 1
        WHERE (SELECT {column} FROM caps) = 0 OR u.{column} < (SELECT {column} FROM caps)
    RETURNING u.requests, u.grabs, (SELECT requests FROM caps), (SELECT grabs FROM caps)
"""
_TAKE_REQUEST = _TAKE.format(first="1, 0", column="requests")
_TAKE_GRAB = _TAKE.format(first="0, 1", column="grabs")
_LIMITS = "UPDATE api_users SET {} WHERE name = %s AND revoked_at IS NULL"
_LIMITS_OF = """
    SELECT coalesce(requests_per_day, %(requests)s), coalesce(grabs_per_day, %(grabs)s)
    FROM api_users WHERE id = %(user)s
"""
_LIMIT_COLUMNS = ("requests_per_day", "grabs_per_day")
_FAILED = """
    INSERT INTO download_failures AS f (guid, user_id, corrupt) VALUES (%s, %s, %s)
    ON CONFLICT (guid, user_id) DO UPDATE
        SET reports = f.reports + 1, corrupt = f.corrupt OR excluded.corrupt, last_at = now()
"""
_FAILURES = "SELECT guid, count(*) FROM download_failures WHERE guid = ANY(%s) GROUP BY guid"


class UserExists(UidxError):
    """A live API user of that name exists already."""


class UnknownUser(UidxError):
    """No API user of that name (or it is revoked already)."""


@attrs.frozen
class ApiUser:
    """Who a key or a session belongs to."""

    id: int
    name: str
    operator: bool

    @classmethod
    def from_row(cls, row: tuple[int, str, str]) -> ApiUser:
        return cls(row[0], row[1], row[2] == "operator")


@attrs.frozen
class UserRow:
    """An API user as `uidx users list` shows it."""

    name: str
    operator: bool
    created_at: datetime
    revoked_at: datetime | None
    requests: int
    last_seen: datetime | None
    requests_per_day: int | None = None  # its own limit (None: the settings')
    grabs_per_day: int | None = None
    requests_today: int = 0  # this UTC day's
    grabs_today: int = 0


@attrs.frozen
class DailyLimits:
    """The settings' daily limits per key (0: none); a user's own win.

    Attributes:
        requests: newznab requests (api_requests_per_day).
        grabs: NZB downloads (api_grabs_per_day).
    """

    requests: int = 0
    grabs: int = 0


@attrs.define(eq=False)
class UserStore:
    """Creates, lists, revokes and authenticates newznab API users."""

    pool: ConnectionPool

    def create(self, name: str, *, operator: bool = False) -> str:
        """Create a user (an operator: who may see the whole status page); returns its API
        key, which is shown once and never stored.

        A revoked user's name can be given again: the user made is a new one (its own
        id, key, limits and counts); the revoked one stays revoked, with its history.

        Raises:
            UserExists: a live user has the name.
        """
        with self.creating(name, operator=operator) as key:
            return key

    @contextlib.contextmanager
    def creating(self, name: str, *, operator: bool = False) -> Iterator[str]:
        """Create a user, committed when the block ends, rolled back when it raises.

        The block gets the API key, to show it before the user exists: a key
        that could not be shown leaves no user that no one can use.

        Raises:
            UserExists: a live user has the name.
        """
        key = secrets.token_hex(TOKEN_BYTES // 2)
        with self.pool.connection() as conn, conn.transaction():
            try:
                conn.execute(_CREATE, (name, token_hash(key), "operator" if operator else "user"))
            except psycopg.errors.UniqueViolation as error:
                raise UserExists(f"an API user named {name!r} exists already") from error
            yield key

    @contextlib.contextmanager
    def replacing_key(self, name: str) -> Iterator[str]:
        """A new API key for a live user (`uidx users rotate`: the old one leaked),
        committed when the block ends, rolled back when it raises (the block shows the key
        first, as `creating` does). The old key stops working and the user's login
        sessions end; its role, limits and counts stay.

        Raises:
            UnknownUser: no live user of that name.
        """
        key = secrets.token_hex(TOKEN_BYTES // 2)
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(_NEW_KEY, (token_hash(key), name)).fetchone()
            if row is None:
                raise UnknownUser(f"no API user named {name!r} (or it is revoked)")
            conn.execute(_END_SESSIONS_OF, (row[0],))
            yield key

    def authenticate(self, key: str) -> ApiUser | None:
        """The user whose key this is (its request counted), or None."""
        # Every API request starts here: one statement finds and counts (a SELECT, then an
        # UPDATE took a round trip more: 0.33 against 0.28 ms). psycopg's pipeline mode
        # was slower still on the unix socket (0.42 ms): its bookkeeping costs more than
        # the round trips it saves.
        with self.pool.connection() as conn, conn.transaction():
            # A request count lost in a crash is no loss: not worth an fsync per request.
            conn.execute("SET LOCAL synchronous_commit TO off")
            row = conn.execute(_SEEN_KEY, (token_hash(key),)).fetchone()
        return None if row is None else ApiUser.from_row(row)

    def open_session(self, user: ApiUser, ttl_seconds: float) -> str:
        """A new login session of `user` for `ttl_seconds`; returns its token (kept hashed).

        Expired sessions are deleted here: logins are rare, and each deletes what has
        expired since the last (by the index on expires_at).
        """
        token = secrets.token_urlsafe(TOKEN_BYTES)
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(_EXPIRED)
            conn.execute(_OPEN_SESSION, (token_hash(token), user.id, ttl_seconds))
        return token

    def session(self, token: str) -> ApiUser | None:
        """The user of a live session (not expired, the user not revoked), or None."""
        with self.pool.connection() as conn:
            row = conn.execute(_BY_SESSION, (token_hash(token),)).fetchone()
        return None if row is None else ApiUser.from_row(row)

    def end_session(self, token: str) -> None:
        """Log a session out (nothing happens for an unknown token)."""
        with self.pool.connection() as conn:
            conn.execute(_END_SESSION, (token_hash(token),))

    def revoke(self, name: str) -> None:
        """Revoke a user's key.

        Raises:
            UnknownUser: no such user, or revoked already.
        """
        with self.pool.connection() as conn:
            if conn.execute(_REVOKE, (name,)).rowcount == 0:
                raise UnknownUser(f"no API user named {name!r} (or it is revoked already)")

    def list(self) -> list[UserRow]:
        """Every user, by name, with its limits and this UTC day's use."""
        with self.pool.connection() as conn:
            return [UserRow(*row) for row in conn.execute(_LIST).fetchall()]

    def take(self, user_id: int, *, grab: bool, defaults: DailyLimits, day: date) -> Usage | None:
        """Count one request (`grab`: one NZB download) of a user on `day`.

        Args:
            user_id: the user (`ApiUser.id`).
            grab: an NZB download (else any other request).
            defaults: the limits of a user without its own.
            day: the UTC day it counts in.

        Returns:
            The day's use with this one counted; None when the limit was reached
            (nothing counted).
        """
        statement = _TAKE_GRAB if grab else _TAKE_REQUEST
        params = {"user": user_id, "day": day, "requests": defaults.requests,
                  "grabs": defaults.grabs}  # fmt: skip
        with self.pool.connection() as conn, conn.transaction():
            # A count lost in a crash is no loss: not worth an fsync per request.
            conn.execute("SET LOCAL synchronous_commit TO off")
            row = conn.execute(statement, params).fetchone()
        return None if row is None else Usage(day, *row)

    def limits_of(self, user_id: int, defaults: DailyLimits) -> DailyLimits:
        """The daily limits a user's use is counted against: its own, else `defaults`
        (0: none); `defaults` for a user that is not there."""
        params = {"user": user_id, "requests": defaults.requests, "grabs": defaults.grabs}
        with self.pool.connection() as conn:
            row = conn.execute(_LIMITS_OF, params).fetchone()
        return defaults if row is None else DailyLimits(*row)

    def set_limits(self, name: str, limits: Mapping[str, int | None]) -> None:
        """Set a user's own daily limits: `requests_per_day`, `grabs_per_day` (None: the
        settings' again; 0: none); a limit not named stays as it is.

        Raises:
            UnknownUser: no live user of that name.
            ValueError: a name that is no limit, or a negative limit.
        """
        if not limits or set(limits) - set(_LIMIT_COLUMNS):
            raise ValueError(f"limits are {', '.join(_LIMIT_COLUMNS)}")
        if any(value is not None and value < 0 for value in limits.values()):
            raise ValueError("a limit is 0 (none) or more")
        columns = sorted(limits)
        assignments = psycopg.sql.SQL(", ").join(
            psycopg.sql.SQL("{} = %s").format(psycopg.sql.Identifier(c)) for c in columns
        )
        statement = psycopg.sql.SQL(_LIMITS).format(assignments)
        with self.pool.connection() as conn:
            updated = conn.execute(statement, [*(limits[c] for c in columns), name]).rowcount
        if updated == 0:
            raise UnknownUser(f"no API user named {name!r} (or it is revoked)")

    def report_failure(self, guid: str, user_id: int, *, corrupt: bool = False) -> None:
        """Record a user's report of a failed download of release `guid` (once per
        release and user; a repeat is counted in `reports`)."""
        with self.pool.connection() as conn:
            conn.execute(_FAILED, (guid, user_id, corrupt))

    def failures(self, guids: Sequence[str]) -> dict[str, int]:
        """How many users reported a failed download of each of `guids` (those with none
        are absent)."""
        if not guids:
            return {}
        with self.pool.connection() as conn:
            rows = conn.execute(_FAILURES, (list(guids),)).fetchall()
        return {str(guid): int(count) for guid, count in rows}
