# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""A merged file's figures, compiled: its chunks' arrays in, (segments, bytes, distinct) out;
and an upload's catalog files made with them.

Theory of operation
-------------------
This is the compiled twin of `merge._figures` (core/merge.py), the
deliberate oracle pair: the pure code stays as the reference and the
fallback, and tests/test_fastmerge.py checks that both give the same
figures for generated releases, the real corpus and any chunks.

A catalog build asks every file it merges how many segments it has and
how many bytes they hold (the release's completion and size). The pure
code answers with Python's sum over the chunks' arrays (an int object per
segment) and, where a number is in two chunks (a repost or a post check's
re-send in a later batch), with a dict of the segments, the first chunk's
winning. Here the arrays are read as C arrays: the sizes summed, and, when
the chunks' spans overlap, every (number, place) sorted so that the first
chunk's segment of each number is the one counted. No Python object is made
per segment. A chunk whose arrays are not arrays of C unsigned ints
(typecode "I", as every FileChunk's are) makes it answer None, and the
caller runs the pure code. No state lives here between calls.

`files_built` makes an upload's catalog files (merge._files_built, its oracle):
each file's figures as above, its CatalogFile and Segments set field by field
as their __init__ would, and the figures summed, with no Python call per file.
"""

from cpython.array cimport array
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject_GenericSetAttr
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport qsort


cdef int _ascending(const void *a, const void *b) noexcept nogil:
    cdef uint64_t x = (<const uint64_t *>a)[0]
    cdef uint64_t y = (<const uint64_t *>b)[0]
    return (x > y) - (x < y)


def figures(list chunks):
    """(segments, bytes, distinct) of a merged file's chunks (FileChunks, in the order
    merged), as `merge._figures` gives them, or None (see above)."""
    cdef Py_ssize_t n = len(chunks), i, j, total = 0, spanned = 0, seq, count
    cdef uint64_t size_all = 0, size_first = 0
    cdef array numbers, sizes
    cdef uint64_t *spans
    cdef uint64_t *keys
    cdef uint32_t *found
    cdef uint32_t *sized
    cdef uint32_t *weights
    cdef bint distinct
    arrays = []
    for chunk in chunks:
        numbers = chunk.numbers
        sizes = chunk.sizes
        if numbers.ob_descr.typecode != b"I" or sizes.ob_descr.typecode != b"I":
            return None
        if len(numbers) != len(sizes):
            return None
        arrays.append((numbers, sizes))
        total += len(numbers)
    if total >= 1 << 32:
        return None  # a place no longer fits beside its number
    for numbers, sizes in arrays:
        sized = sizes.data.as_uints
        for j in range(len(sizes)):
            size_all += sized[j]
    if n == 1:
        return total, size_all, True
    # The chunks' spans (first, last), sorted: apart, no number can be in two.
    spans = <uint64_t *>PyMem_Malloc(max(n, 1) * sizeof(uint64_t))
    if spans == NULL:
        raise MemoryError()
    try:
        for numbers, _ in arrays:
            if len(numbers):
                found = numbers.data.as_uints
                spans[spanned] = (<uint64_t>found[0] << 32) | found[len(numbers) - 1]
                spanned += 1
        qsort(spans, spanned, sizeof(uint64_t), _ascending)
        distinct = True
        for i in range(spanned - 1):
            if (spans[i] & 0xFFFFFFFF) >= (spans[i + 1] >> 32):
                distinct = False
                break
    finally:
        PyMem_Free(spans)
    if distinct:
        return total, size_all, True
    # Every (number, place in merge order), sorted: the first of each number is the
    # first chunk's segment of it, the one a merged file keeps; and the sizes in
    # merge order, to look a place up. Both filled in one pass.
    keys = <uint64_t *>PyMem_Malloc(max(total, 1) * sizeof(uint64_t))
    weights = <uint32_t *>PyMem_Malloc(max(total, 1) * sizeof(uint32_t))
    try:
        if keys == NULL or weights == NULL:
            raise MemoryError()
        seq = 0
        for numbers, sizes in arrays:
            found = numbers.data.as_uints
            sized = sizes.data.as_uints
            for j in range(len(numbers)):
                keys[seq] = (<uint64_t>found[j] << 32) | <uint64_t>seq
                weights[seq] = sized[j]
                seq += 1
        qsort(keys, total, sizeof(uint64_t), _ascending)
        count = 0
        for i in range(total):
            if i == 0 or (keys[i] >> 32) != (keys[i - 1] >> 32):
                count += 1
                size_first += weights[keys[i] & 0xFFFFFFFF]
    finally:
        PyMem_Free(weights)
        PyMem_Free(keys)
    if count == total:
        return total, size_all, True
    return count, size_first, False


# --- a merged upload's files (merge._files_built) ---------------------------------------

def files_built(list files, object catalog_file, object segments):
    """(files, segments seen, bytes, earliest date) of an upload's merged files (merge._File,
    in file order), as `merge._files_built` gives them: each file a `catalog_file`
    (CatalogFile) whose segments are a `segments` (merge.Segments) of the file and its
    figures; or None where a file's figures are (see `figures`).

    The objects are made as their classes' __init__ would make them, each field set
    once (CatalogFile is a frozen attrs class without validators or converters; Segments
    sets its four slots), without a Python call per file."""
    cdef list built = []
    cdef Py_ssize_t seen = 0
    cdef object size = 0
    cdef object posted = 0
    cdef object found, f, made, held, date
    for f in files:
        found = figures(f.chunks)
        if found is None:
            return None
        held = segments.__new__(segments)
        PyObject_GenericSetAttr(held, "_file", f)
        PyObject_GenericSetAttr(held, "_made", None)
        PyObject_GenericSetAttr(held, "_distinct", found[2])
        PyObject_GenericSetAttr(held, "_count", found[0])
        made = catalog_file.__new__(catalog_file)
        date = f.posted
        PyObject_GenericSetAttr(made, "name", f.name)
        PyObject_GenericSetAttr(made, "subject", f.subject)
        PyObject_GenericSetAttr(made, "index", f.index)
        PyObject_GenericSetAttr(made, "total_segments", f.total_segments)
        PyObject_GenericSetAttr(made, "posted", date)
        PyObject_GenericSetAttr(made, "segments", held)
        built.append(made)
        seen += <Py_ssize_t>found[0]
        size += found[1]
        if date and (not posted or date < posted):
            posted = date
    return built, seen, size, posted
