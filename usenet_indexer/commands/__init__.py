"""One module per `uidx` subcommand: `add_parser(subparsers)` and `run(args)`.

Argument types the subcommands share live here.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    return _at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    return _at_least(text, 0)


def _at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
    return value
