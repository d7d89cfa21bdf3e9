"""Fakes and generators the tests share (the way `trio.testing` ships with trio)."""
