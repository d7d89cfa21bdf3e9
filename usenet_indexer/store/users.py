"""Users of the newznab API, their API keys (kept as SHA-256 hashes, never as keys), their
role (a user or an operator, who may see the whole status page) and their login sessions.

An API key is 32 random bytes, like a node token, so a plain hash is enough
to keep a stolen table from giving keys away. Node tokens and API keys live
in different tables: one is never taken for the other. A session token is
32 random bytes too, kept hashed in `sessions` with its expiry, so every
coordinator process knows every session.
"""

from __future__ import annotations

import secrets
from datetime import datetime

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.errors import UidxError
from usenet_indexer.store.nodes import TOKEN_BYTES, token_hash

_CREATE = "INSERT INTO api_users (name, key_hash, role) VALUES (%s, %s, %s)"
_BY_HASH = "SELECT id, name, role FROM api_users WHERE key_hash = %s AND revoked_at IS NULL"
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
_SEEN = "UPDATE api_users SET requests = requests + 1, last_seen = now() WHERE id = %s"
_REVOKE = "UPDATE api_users SET revoked_at = now() WHERE name = %s AND revoked_at IS NULL"
_LIST = (
    "SELECT name, role = 'operator', created_at, revoked_at, requests, last_seen"
    " FROM api_users ORDER BY name"
)


class UserExists(UidxError):
    """An API user of that name exists already."""


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


@attrs.define(eq=False)
class UserStore:
    """Creates, lists, revokes and authenticates newznab API users."""

    pool: ConnectionPool

    def create(self, name: str, *, operator: bool = False) -> str:
        """Create a user (an operator: who may see the whole status page); returns its API
        key, which is shown once and never stored.

        Raises:
            UserExists: a user of that name exists.
        """
        key = secrets.token_hex(TOKEN_BYTES // 2)
        try:
            with self.pool.connection() as conn:
                conn.execute(_CREATE, (name, token_hash(key), "operator" if operator else "user"))
        except psycopg.errors.UniqueViolation as error:
            raise UserExists(f"an API user named {name!r} exists already") from error
        return key

    def authenticate(self, key: str) -> ApiUser | None:
        """The user whose key this is (its request counted), or None."""
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(_BY_HASH, (token_hash(key),)).fetchone()
            if row is None:
                return None
            # A request count lost in a crash is no loss: not worth an fsync per request.
            conn.execute("SET LOCAL synchronous_commit TO off")
            conn.execute(_SEEN, (row[0],))
        return ApiUser.from_row(row)

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
        """Every user, by name."""
        with self.pool.connection() as conn:
            return [UserRow(*row) for row in conn.execute(_LIST).fetchall()]
