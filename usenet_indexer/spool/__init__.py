"""The header spool: what it misses, where its chunks are, and the dumps read into it.

plan.py     pure: which chunks are missing, in which order, clipped to the server;
            the OVER slices of a chunk
store.py    SpoolStore: the one interface of the folder and the S3 spool; open_spool
files.py    spool chunk files written atomically (temporary name, fsync, rename)
s3.py       the spool in an S3 bucket (conditional PUTs, presigned GETs)
dumps.py    overview dumps read in blocks of whole lines (plain, gzip, zlib)
leftovers.py  pure: which chunks stored but never indexed no stream will ever read
"""

# Sans-IO modules of this package (tests/test_purity.py checks them).
PURE_MODULES = ("plan", "leftovers")
