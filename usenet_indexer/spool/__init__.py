"""The header spool: what it misses, its files, and the dumps read into it.

plan.py     pure: which chunks are missing, in which order, clipped to the server;
            the OVER slices of a chunk
files.py    spool chunk files written atomically (temporary name, fsync, rename)
dumps.py    overview dumps read in blocks of whole lines (plain, gzip, zlib)
"""

# Sans-IO modules of this package (tests/test_purity.py checks them).
PURE_MODULES = ("plan",)
