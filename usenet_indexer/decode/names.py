"""File names out of untrusted bytes: decoded, with NULs and control characters replaced."""

from __future__ import annotations

import re

# C0 controls (NUL among them), DEL and the C1 controls: none belongs in a
# file name, and a name is shown, logged and stored as text.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
REPLACEMENT = "\ufffd"


def clean_name(raw: bytes, encoding: str = "utf-8") -> str:
    """`raw` decoded (undecodable bytes and control characters as U+FFFD)."""
    return clean_text(raw.decode(encoding, "replace"))


def clean_text(text: str) -> str:
    """`text` with its control characters replaced by U+FFFD."""
    return _CONTROLS.sub(REPLACEMENT, text)
