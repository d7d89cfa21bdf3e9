"""Edge nodes and their bearer tokens (kept as SHA-256 hashes, never as tokens)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
from collections.abc import Iterator
from typing import Any

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.errors import UidxError
from usenet_indexer.store.ranges import PLANNED_CHANNEL

# 32 random bytes: a token cannot be guessed, so a plain hash (no salt, no
# slow KDF) is enough to keep a stolen table from giving tokens away.
TOKEN_BYTES = 32

_CREATE = "INSERT INTO nodes (name, token_hash) VALUES (%s, %s) RETURNING id"
_BY_HASH = "SELECT id, token_hash FROM nodes WHERE token_hash = %s AND revoked_at IS NULL"
# A new token for the live node of a name (made if there is none); its old token stops
# working. Only a live node's name is unique (migration 0035): a revoked one stays so.
_ROTATE = """
    INSERT INTO nodes (name, token_hash) VALUES (%s, %s)
    ON CONFLICT (name) WHERE revoked_at IS NULL
    DO UPDATE SET token_hash = excluded.token_hash, stops = nodes.stops + 1
"""
_SEEN = "UPDATE nodes SET last_seen = now() WHERE id = %s"
# FOR UPDATE first: a lease taking the node's row FOR KEY SHARE (store/ranges.py) waits
# for the revoke, then sees it, so nothing is leased to a node once it is revoked.
_REVOKE_LOCK = "SELECT id FROM nodes WHERE name = %s AND revoked_at IS NULL FOR UPDATE"
_REVOKE = "UPDATE nodes SET revoked_at = now() WHERE id = %s"
# A stop counted too (store/ranges.py's `look`): a lease call the old token holds open
# leases nothing more, not even the ranges given back here.
_NEW_TOKEN = "UPDATE nodes SET token_hash = %s, stops = stops + 1 WHERE id = %s"
# A revoked node's leases are given back with its token: its edges can neither index
# them nor give them back any more (every call is 401), and a batch of it still on its
# way in finds the range no longer held (the fence's holder) and stores nothing.
_GIVE_BACK = """
    UPDATE ranges SET state = 'planned', holder = NULL, deadline = NULL
    WHERE holder = %s AND state = 'leased'
    RETURNING group_id
"""
# Waiting lease calls hear of them (coordinator/landings.py), as of a plan.
_NOTIFY_PLANNED = "SELECT pg_notify(%s, %s)"
_LIST = """
    SELECT n.name, n.created_at, n.revoked_at, n.last_seen,
           (SELECT count(*) FROM ranges r WHERE r.holder = n.id AND r.state = 'leased')
    FROM nodes n ORDER BY n.name, n.id
"""


class NodeExists(UidxError):
    """A live node of that name exists already."""


class UnknownNode(UidxError):
    """No live node of that name."""


@attrs.frozen
class NodeRow:
    """A node as `uidx nodes list` shows it."""

    name: str
    created_at: object
    revoked_at: object
    last_seen: object
    leases: int


def token_hash(token: str) -> bytes:
    """The stored form of a token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@attrs.define(eq=False)
class NodeStore:
    """Creates, revokes and authenticates edge nodes."""

    pool: ConnectionPool

    def create(self, name: str) -> str:
        """Create a node; returns its token, which is shown once and never stored.

        A revoked node's name can be given again: the node made is a new one (its own
        id and token); the revoked one stays revoked.

        Raises:
            NodeExists: a live node has the name.
        """
        with self.creating(name) as token:
            return token

    @contextlib.contextmanager
    def creating(self, name: str) -> Iterator[str]:
        """Create a node, committed when the block ends, rolled back when it raises.

        The block gets the token, to show it before the node exists: a token
        that could not be shown leaves no node that no one can use.

        Raises:
            NodeExists: a live node has the name.
        """
        token = secrets.token_urlsafe(TOKEN_BYTES)
        with self.pool.connection() as conn, conn.transaction():
            try:
                conn.execute(_CREATE, (name, token_hash(token)))
            except psycopg.errors.UniqueViolation as error:
                raise NodeExists(f"a node named {name!r} exists already") from error
            yield token

    def rotate(self, name: str) -> str:
        """A new token for the live node `name`, created if there is none (a revoked
        node of that name stays revoked: a new node is made, as `create` makes it).

        `uidx standalone` gives its own edges a fresh token on every start.
        """
        token = secrets.token_urlsafe(TOKEN_BYTES)
        with self.pool.connection() as conn:
            conn.execute(_ROTATE, (name, token_hash(token)))
        return token

    def authenticate(self, token: str) -> int | None:
        """The id of the node the token belongs to; None for an unknown or revoked token."""
        digest = token_hash(token)
        with self.pool.connection() as conn:
            row = conn.execute(_BY_HASH, (digest,)).fetchone()
            if row is None or not hmac.compare_digest(bytes(row[1]), digest):
                return None
            conn.execute(_SEEN, (row[0],))
        node_id: int = row[0]
        return node_id

    @contextlib.contextmanager
    def replacing_token(self, name: str) -> Iterator[str]:
        """A new token for a live node (`uidx nodes rotate`: the old one leaked), committed
        when the block ends, rolled back when it raises (the block shows the token first,
        as `creating` does).

        The old token stops working, and the ranges the node holds are given back as a
        revoke does (its edges with the old token can neither index them nor give them
        back any more); the node keeps its name and history.

        Raises:
            UnknownNode: no live node of that name.
        """
        token = secrets.token_urlsafe(TOKEN_BYTES)
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(_REVOKE_LOCK, (name,)).fetchone()
            if row is None:
                raise UnknownNode(f"no live node named {name!r}")
            conn.execute(_NEW_TOKEN, (token_hash(token), row[0]))
            self._give_back(conn, row[0])
            yield token

    def revoke(self, name: str) -> bool:
        """Revoke a node's token and give back the ranges it holds (planned again, from
        their resume points, for the next lease); False when there is no such live node."""
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(_REVOKE_LOCK, (name,)).fetchone()
            if row is None:
                return False
            conn.execute(_REVOKE, (row[0],))
            self._give_back(conn, row[0])
        return True

    @staticmethod
    def _give_back(conn: psycopg.Connection[Any], node_id: int) -> None:
        given = conn.execute(_GIVE_BACK, (node_id,)).fetchall()
        for group_id in sorted({int(g[0]) for g in given}):
            conn.execute(_NOTIFY_PLANNED, (PLANNED_CHANNEL, str(group_id)))

    def list(self) -> list[NodeRow]:
        with self.pool.connection() as conn:
            return [NodeRow(*row) for row in conn.execute(_LIST).fetchall()]
