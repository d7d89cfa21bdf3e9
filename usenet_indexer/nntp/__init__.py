"""NNTP: the sans-IO protocol core (protocol.py, replies.py, compressed.py), the
trio client (client.py) and their errors (errors.py)."""

# Sans-IO modules of this package (tests/test_purity.py checks them).
PURE_MODULES = ("protocol", "replies", "compressed")
