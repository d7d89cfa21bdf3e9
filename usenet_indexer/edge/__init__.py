"""`uidx edge`: lease a range, stream its chunks, index them, post batches, finish.

Theory of operation
-------------------
The edge is a thin trio shell around the pure RangeIndexer:

    worker.run        lease -> RangeRunner -> next lease; idles on 204
    range_runner      one range: a stream reader task (frames, inflate in a
                      worker thread), the indexing loop, a poster task and a
                      heartbeat task, joined by unbuffered memory channels
    client            the node API over httpx: bearer token, retries with
                      capped exponential backoff, 409 as LeaseLostError
    chunks            pure helpers: inflating a chunk payload with a cap,
                      what one frame contributes to the indexer
    options, events   the worker's settings and what it reports as it goes
    builds            catalog builds the coordinator offers, merged beside the ranges
    stopping          a stop as a cancellation
    process           one worker process: its switch interval, GC policy,
                      signals and trio.run (imported only in a worker)

Memory stays bounded by construction: at most one chunk inflating ahead of
the one being indexed, one batch in flight and one waiting behind it.
"""

# Sans-IO modules of this package (tests/test_purity.py checks them).
PURE_MODULES = ("chunks",)
