"""Users of the newznab API and their API keys (kept as SHA-256 hashes, never as keys).

An API key is 32 random bytes, like a node token, so a plain hash is enough
to keep a stolen table from giving keys away. Node tokens and API keys live
in different tables: one is never taken for the other.
"""

from __future__ import annotations

import secrets
from datetime import datetime

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.errors import UidxError
from usenet_indexer.store.nodes import TOKEN_BYTES, token_hash

_CREATE = "INSERT INTO api_users (name, key_hash) VALUES (%s, %s)"
_BY_HASH = "SELECT id, name FROM api_users WHERE key_hash = %s AND revoked_at IS NULL"
_SEEN = "UPDATE api_users SET requests = requests + 1, last_seen = now() WHERE id = %s"
_REVOKE = "UPDATE api_users SET revoked_at = now() WHERE name = %s AND revoked_at IS NULL"
_LIST = "SELECT name, created_at, revoked_at, requests, last_seen FROM api_users ORDER BY name"


class UserExists(UidxError):
    """An API user of that name exists already."""


class UnknownUser(UidxError):
    """No API user of that name (or it is revoked already)."""


@attrs.frozen
class UserRow:
    """An API user as `uidx users list` shows it."""

    name: str
    created_at: datetime
    revoked_at: datetime | None
    requests: int
    last_seen: datetime | None


@attrs.define(eq=False)
class UserStore:
    """Creates, lists, revokes and authenticates newznab API users."""

    pool: ConnectionPool

    def create(self, name: str) -> str:
        """Create a user; returns its API key, which is shown once and never stored.

        Raises:
            UserExists: a user of that name exists.
        """
        key = secrets.token_hex(TOKEN_BYTES // 2)
        try:
            with self.pool.connection() as conn:
                conn.execute(_CREATE, (name, token_hash(key)))
        except psycopg.errors.UniqueViolation as error:
            raise UserExists(f"an API user named {name!r} exists already") from error
        return key

    def authenticate(self, key: str) -> str | None:
        """The name of the user whose key this is (its request counted), or None."""
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(_BY_HASH, (token_hash(key),)).fetchone()
            if row is None:
                return None
            # A request count lost in a crash is no loss: not worth an fsync per request.
            conn.execute("SET LOCAL synchronous_commit TO off")
            conn.execute(_SEEN, (row[0],))
        return str(row[1])

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
