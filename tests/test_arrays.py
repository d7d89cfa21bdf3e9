"""Array parameters made whole (store/arrays.py) read back by a real PostgreSQL as the
values they were made from; psycopg's own arrays (COPY's) stay as they were."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import TupleRow

from usenet_indexer.store import arrays

INT8 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
INT4 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
# Text PostgreSQL takes: any code point but NUL and the lone surrogates.
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture
def conn(pg_empty_url: str) -> Iterator[psycopg.Connection[TupleRow]]:
    with psycopg.connect(pg_empty_url, autocommit=True, context=arrays.adapters()) as opened:
        yield opened


def _read(conn: psycopg.Connection[TupleRow], sql: str, value: arrays.Array) -> list[object]:
    row = conn.execute(sql, (value,)).fetchone()
    assert row is not None
    return [bytes(v) if isinstance(v, memoryview) else v for v in row[0]]


@FUZZ
@given(st.lists(st.binary(min_size=16, max_size=16), max_size=300) | st.lists(st.binary()))
def test_keys_of_one_length_or_of_any_lengths_are_read_back_as_sent(
    conn: psycopg.Connection[TupleRow], keys: list[bytes]
) -> None:
    assert _read(conn, "SELECT %s::bytea[]", arrays.keys(keys)) == keys
    assert _read(conn, "SELECT %b", arrays.keys(iter(keys))) == keys


@FUZZ
@given(st.lists(INT8 | st.none()), st.lists(INT4 | st.none()), st.lists(TEXT))
def test_numbers_nulls_and_texts_are_read_back_as_sent(
    conn: psycopg.Connection[TupleRow], int8s: list[int | None], int4s: list[int | None],
    texts: list[str],
) -> None:  # fmt: skip
    assert _read(conn, "SELECT %s::int8[]", arrays.int8s(int8s)) == int8s
    assert _read(conn, "SELECT %s::int4[]", arrays.int4s(int4s)) == int4s
    assert _read(conn, "SELECT %s::text[]", arrays.texts(texts)) == texts


def test_arrays_of_one_statement_line_up_element_by_element(
    conn: psycopg.Connection[TupleRow],
) -> None:
    keys = [bytes([n]) * 16 for n in range(5)]
    rows = conn.execute(
        "SELECT k, v, t FROM unnest(%b::bytea[], %s::int8[], %s::text[]) AS u(k, v, t)",
        (arrays.keys(keys), arrays.int8s(range(5)), arrays.texts(map(str, range(5)))),
    ).fetchall()
    assert [(bytes(k), v, t) for k, v, t in rows] == [(k, n, str(n)) for n, k in enumerate(keys)]


def test_a_number_that_does_not_fit_is_a_value_error_naming_the_type() -> None:
    with pytest.raises(ValueError, match=r"int8\[\]"):
        arrays.int8s([2**63])
    with pytest.raises(ValueError, match=r"int4\[\]"):
        arrays.int4s([1, None, -(2**31) - 1])


def test_copy_still_writes_psycopgs_own_arrays(conn: psycopg.Connection[TupleRow]) -> None:
    """The dumper is not registered by oid: COPY's bytea[] and int8[] stay psycopg's."""
    conn.execute("CREATE TABLE t (a bytea[], b int8[])")
    with conn.cursor().copy("COPY t FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["bytea[]", "int8[]"])
        copy.write_row(([b"ab", b""], [1, None]))
    assert conn.execute("SELECT a, b FROM t").fetchone() == ([b"ab", b""], [1, None])


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=3000) | st.none(),
            st.lists(st.binary(max_size=40), max_size=5),
            st.sampled_from([bytes, bytearray, memoryview]),
        ),
        max_size=40,
    )
)
def test_copy_writes_any_bytea_as_sent(
    conn: psycopg.Connection[TupleRow],
    rows: list[tuple[bytes | None, list[bytes], type[bytes] | type[bytearray] | type[memoryview]]],
) -> None:
    """A bytea and a bytea[] that COPY writes by their types (as the batch store writes
    keys and fragments, and the catalog its rows' sources) are read back as sent, in
    any of Python's byte buffers, empty, with NULs, or NULL."""
    conn.execute("CREATE TEMPORARY TABLE t (n int4, a bytea, b bytea[])")
    with conn.cursor().copy("COPY t FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "bytea", "bytea[]"])
        for n, (value, values, kind) in enumerate(rows):
            copy.write_row((n, None if value is None else kind(value), [kind(v) for v in values]))
    stored = [
        (None if a is None else bytes(a), [bytes(v) for v in b])
        for a, b in conn.execute("SELECT a, b FROM t ORDER BY n").fetchall()
    ]
    conn.execute("DROP TABLE t")
    assert stored == [(value, values) for value, values, _ in rows]


def test_a_connection_without_the_adapters_refuses_an_array(pg_empty_url: str) -> None:
    with psycopg.connect(pg_empty_url) as plain, pytest.raises(psycopg.ProgrammingError):
        plain.execute("SELECT %s::bytea[]", (arrays.keys([b"k"]),))
