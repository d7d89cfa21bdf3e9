"""The pure core: overview lines in, releases out; no I/O, no clock (checked by tests/test_purity.py)."""
