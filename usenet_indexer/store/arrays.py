"""Array parameters made whole: a list of keys, numbers or texts in PostgreSQL's binary
array form, built by C-level joins instead of psycopg's loop over the elements.

psycopg dumps a Python list one element at a time in Python: ~0.2 us an element
in the binary format (`%b`), 0.6-1.8 us in the text format (`%s`: a text or a
bytea element is escaped). The catalog build sends lists of tens of thousands
of release keys, posters and times to nearly every statement it runs; at 10M
articles that dumping was ~13% of the coordinator's CPU (py-spy, GIL samples).
`keys([...])` makes 10,000 16-byte keys in ~0.3 ms where psycopg took 2.4 ms
(binary) or 159 ms (text).

A value here goes as `%s` or `%b` alike (its dumper is binary). The
connections of `open_pool` know these types (`adapters`); another
connection refuses them ("cannot adapt type"), loudly.

The layout (PostgreSQL's array_send): ndim, a flags word (1: it has NULLs), the
element type's oid, then per dimension its length and lower bound (1), then
each element as its byte length and its bytes (-1 and none: NULL). An empty
array has ndim 0 and nothing after the oid. Keys and texts are never NULL here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from itertools import chain, repeat
from typing import Any, ClassVar

import attrs
from psycopg import adapters as default_adapters
from psycopg.adapt import AdaptersMap, Dumper
from psycopg.pq import Format
from psycopg.types.string import BytesBinaryDumper

_INT4 = struct.Struct(">i")
_LENGTH_INT8 = struct.Struct(">iq")
_LENGTH_INT4 = struct.Struct(">ii")
_NULL = _INT4.pack(-1)
# Element and array type oids (pg_type).
_BYTEA, _BYTEA_ARRAY = 17, 1001
_INT8, _INT8_ARRAY = 20, 1016
_INT4_OID, _INT4_ARRAY = 23, 1007
_TEXT, _TEXT_ARRAY = 25, 1009


@attrs.frozen
class Array:
    """A one-dimensional array parameter, already in PostgreSQL's binary form."""

    oid: int
    data: bytes


def _header(element_oid: int, length: int, *, nulls: bool = False) -> bytes:
    if length == 0:
        return struct.pack(">iii", 0, 0, element_oid)
    return struct.pack(">iiiii", 1, int(nulls), element_oid, length, 1)


def keys(values: Iterable[bytes]) -> Array:
    """A bytea[] of `values` (release keys: mostly all of one length, which is one join)."""
    items = values if isinstance(values, list | tuple) else list(values)
    sizes = set(map(len, items))
    if len(sizes) == 1:
        prefix = _INT4.pack(sizes.pop())
        body = prefix + prefix.join(items)
    else:
        body = b"".join(
            chain.from_iterable(zip(map(_INT4.pack, map(len, items)), items, strict=True))
        )
    return Array(_BYTEA_ARRAY, _header(_BYTEA, len(items)) + body)


def int8s(values: Iterable[int | None]) -> Array:
    """An int8[] of `values`, None a NULL (ValueError: one does not fit in 64 bits)."""
    return _numbers(values, _LENGTH_INT8, _INT8, _INT8_ARRAY, "int8[]")


def int4s(values: Iterable[int | None]) -> Array:
    """An int4[] of `values`, None a NULL (ValueError: one does not fit in 32 bits)."""
    return _numbers(values, _LENGTH_INT4, _INT4_OID, _INT4_ARRAY, "int4[]")


def _numbers(
    values: Iterable[int | None],
    length_and_value: struct.Struct,
    element_oid: int,
    array_oid: int,
    name: str,
) -> Array:
    """An array of fixed-width integers, each element its width then its value."""
    items = values if isinstance(values, list | tuple) else list(values)
    width = length_and_value.size - _INT4.size
    nulls = None in items
    try:
        if nulls:
            body = b"".join(_NULL if v is None else length_and_value.pack(width, v) for v in items)
        else:
            body = b"".join(map(length_and_value.pack, repeat(width, len(items)), items))
    except struct.error as error:
        raise ValueError(f"an {name} element does not fit: {error}") from error
    return Array(array_oid, _header(element_oid, len(items), nulls=nulls) + body)


def texts(values: Iterable[str]) -> Array:
    """A text[] of `values`, each in UTF-8 (the connections' client encoding)."""
    encoded = [value.encode() for value in values]
    body = b"".join(
        chain.from_iterable(zip(map(_INT4.pack, map(len, encoded)), encoded, strict=True))
    )
    return Array(_TEXT_ARRAY, _header(_TEXT, len(encoded)) + body)


class _ArrayDumper(Dumper):
    """Dumps an Array as it is. Its class oid stays 0, so that it is not registered by
    oid: COPY's dumpers for bytea[] and the others stay psycopg's."""

    format: ClassVar[Format] = Format.BINARY  # type: ignore[misc]

    def dump(self, obj: Any) -> bytes:
        assert isinstance(obj, Array)
        return obj.data

    def upgrade(self, obj: Any, format: Any) -> Dumper:
        dumper = _ArrayDumper(Array)
        dumper.oid = obj.oid
        return dumper

    def get_key(self, obj: Any, format: Any) -> Any:
        return (Array, obj.oid)


def adapters() -> AdaptersMap:
    """psycopg's default adapters and the dumper of Array (for `connect(context=...)`).

    A bytea that COPY writes (`Copy.set_types`, dumpers by oid) goes through psycopg's
    own bytes dumper, compiled where psycopg's C extension is installed: by oid,
    psycopg's defaults name the DB-API `Binary` wrapper's dumper, a Python method
    per value (release keys and fragments at every batch, row sources at every
    build: ~0.4 us a value, about a third of formatting a stored batch's COPY rows).
    """
    made = AdaptersMap(default_adapters)
    made.register_dumper(Array, _ArrayDumper)
    made.register_dumper(None, BytesBinaryDumper)
    return made
