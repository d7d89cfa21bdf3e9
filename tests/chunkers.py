"""Ways to cut a byte stream into the pieces a sans-IO parser is fed: whole, one
byte at a time, and in threes (the protocol tests feed every response all three)."""

from __future__ import annotations

from collections.abc import Callable

Chunker = Callable[[bytes], list[bytes]]


def whole(data: bytes) -> list[bytes]:
    return [data]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def in_threes(data: bytes) -> list[bytes]:
    return [data[i : i + 3] for i in range(0, len(data), 3)]


CHUNKERS: list[Chunker] = [whole, bytewise, in_threes]
