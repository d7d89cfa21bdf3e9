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

`segments_json` writes a merged file's segments as orjson writes their list
(`[[k,"id",bytes],...]`, the oracle: `merge._File.segments` dumped by orjson)
from its chunks' arrays and "\n"-joined ids, for `uidx index`'s JSON lines
(merge.Segments.json_text): no tuple, int or str per segment. It answers None
where the list would not be the chunks' segments one after another (numbers
that do not ascend across the chunks) or orjson would escape an id.
"""

from cpython.array cimport array
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyObject_GenericSetAttr
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport qsort
from libc.string cimport memchr, memcpy
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize


cdef int _ascending(const void *a, const void *b) noexcept nogil:
    cdef uint64_t x = (<const uint64_t *>a)[0]
    cdef uint64_t y = (<const uint64_t *>b)[0]
    return (x > y) - (x < y)


def figures(list chunks):
    """(segments, bytes, distinct) of a merged file's chunks (FileChunks, in the order
    merged), as `merge._figures` gives them, or None (see above)."""
    return _figures(chunks)


cdef object _figures(list chunks):
    # `figures`, which files_built calls without a Python call.
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
            if (spans[i] & 0xFFFFFFFFULL) >= (spans[i + 1] >> 32):
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
                size_first += weights[keys[i] & 0xFFFFFFFFULL]
    finally:
        PyMem_Free(weights)
        PyMem_Free(keys)
    if count == total:
        return total, size_all, True
    return count, size_first, False


# --- a merged upload's files (merge._files_built) ---------------------------------------

cdef extern from *:
    """
    /* object.__new__(cls): the base type's tp_new called as C (its checks, then
       the class's tp_alloc), not looked up and called as a method. */
    static PyObject *uidx_object_new(PyObject *cls) {
        PyObject *none = PyTuple_New(0), *made;
        if (none == NULL)
            return NULL;
        made = PyBaseObject_Type.tp_new((PyTypeObject *)cls, none, NULL);
        Py_DECREF(none);
        return made;
    }
    """
    object uidx_object_new(object cls)

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
        found = _figures(f.chunks)
        if found is None:
            return None
        held = uidx_object_new(segments)
        PyObject_GenericSetAttr(held, "_file", f)
        PyObject_GenericSetAttr(held, "_made", None)
        PyObject_GenericSetAttr(held, "_distinct", found[2])
        PyObject_GenericSetAttr(held, "_count", found[0])
        made = uidx_object_new(catalog_file)
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


# --- a merged file's segments as JSON (merge.Segments.json_text) -----------------------

cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object)
    void *PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    # The text is made in a bytes object of room enough, then cut to its length in
    # place (the only reference: _PyBytes_Resize reallocates it) rather than copied.
    PyObject *_new_bytes "PyBytes_FromStringAndSize"(const char *, Py_ssize_t)
    char *_bytes_data "PyBytes_AS_STRING"(PyObject *)
    int _PyBytes_Resize(PyObject **, Py_ssize_t)
    void Py_XDECREF(PyObject *)


cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* From s[start:n], where the id there ends: at the first "\\n", else at n; *bad
       set when a byte before that is one orjson does not write as it is in a string
       (below 0x20, '"' or '\\\\'). Sixteen bytes at a time where SSE2 is (a byte c is
       below 0x20 where min(c, 0x1F) is c), then byte by byte. */
    static Py_ssize_t uidx_id_end(const unsigned char *s, Py_ssize_t start, Py_ssize_t n,
                                  int *bad) {
        Py_ssize_t i = start;
    #if defined(__SSE2__)
        const __m128i newline = _mm_set1_epi8('\\n'), quote = _mm_set1_epi8('"');
        const __m128i backslash = _mm_set1_epi8('\\\\'), control = _mm_set1_epi8(0x1F);
        while (i + 16 <= n) {
            __m128i c = _mm_loadu_si128((const __m128i *)(s + i));
            unsigned stop = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(c, newline));
            unsigned wrong = (unsigned)_mm_movemask_epi8(_mm_or_si128(
                _mm_cmpeq_epi8(_mm_min_epu8(c, control), c),
                _mm_or_si128(_mm_cmpeq_epi8(c, quote), _mm_cmpeq_epi8(c, backslash))));
            if (stop) {
                if (wrong & ((stop & (0u - stop)) - 1u))
                    *bad = 1;
                return i + __builtin_ctz(stop);
            }
            if (wrong)
                *bad = 1;
            i += 16;
        }
    #endif
        for (; i < n; i++) {
            if (s[i] == '\\n')
                break;
            if (s[i] < 0x20 || s[i] == '"' || s[i] == '\\\\')
                *bad = 1;
        }
        return i;
    }
    """
    Py_ssize_t uidx_id_end(const unsigned char *s, Py_ssize_t start, Py_ssize_t n, int *bad) nogil


cdef inline Py_ssize_t _decimal(char *out, uint32_t value) noexcept nogil:
    # value in decimal at out: its length.
    cdef char digits[10]
    cdef Py_ssize_t n = 0, i
    while True:
        digits[n] = <char>(48 + value % 10)
        n += 1
        value //= 10
        if value == 0:
            break
    for i in range(n):
        out[i] = digits[n - 1 - i]
    return n


def segments_json(list chunks):
    """The JSON text orjson makes of a merged file's segments list (`merge._File.segments`:
    (k, message-id, bytes) by k), `[[k,"id",bytes],...]`, from its chunks' arrays, with no
    Python object per segment; or None for the pure code.

    Only chunks whose numbers, one chunk after another in the order of their first
    numbers, ascend (each number in one chunk: the list is then their segments in
    that order), each with as many sizes and message-ids as numbers, arrays of C
    unsigned ints (typecode "I") and message-ids of ASCII without a control
    character, '"' or '\\' (orjson writes them as they are) take this way.
    """
    cdef Py_ssize_t count = len(chunks), i, j, at, n, size = 2, start, end, length
    cdef Py_ssize_t *order = NULL
    cdef uint32_t last = 0
    cdef bint started = False
    cdef array numbers, sizes
    cdef const unsigned char *ids
    cdef int bad = 0  # an id holds a byte orjson escapes
    cdef char *out
    cdef PyObject *made = NULL  # the text's bytes (owned here until given back)
    cdef object found
    cdef object chunk, message_ids
    if count == 0:
        return None
    order = <Py_ssize_t *>PyMem_Malloc(count * sizeof(Py_ssize_t))
    if order == NULL:
        raise MemoryError()
    try:
        for i in range(count):
            chunk = chunks[i]
            numbers = chunk.numbers
            sizes = chunk.sizes
            message_ids = chunk.message_ids
            n = len(numbers)
            if numbers.ob_descr.typecode != b"I" or sizes.ob_descr.typecode != b"I":
                return None
            if n == 0 or len(sizes) != n or type(message_ids) is not str:
                return None
            if not PyUnicode_IS_COMPACT_ASCII(message_ids):
                return None
            # [k,"id",bytes] and a comma: at most 10 digits each.
            size += PyUnicode_GET_LENGTH(message_ids) + n * (10 + 10 + 7)
            # In the order of the chunks' first numbers (insertion: a file has few).
            j = i
            while j > 0 and (<array>chunks[order[j - 1]].numbers).data.as_uints[0] > numbers.data.as_uints[0]:
                order[j] = order[j - 1]
                j -= 1
            order[j] = i
        made = _new_bytes(NULL, size)
        if made == NULL:
            raise MemoryError()
        out = _bytes_data(made)
        at = 0
        out[at] = b"["
        at += 1
        for i in range(count):
            chunk = chunks[order[i]]
            numbers = chunk.numbers
            sizes = chunk.sizes
            message_ids = chunk.message_ids
            ids = <const unsigned char *>PyUnicode_DATA(message_ids)
            length = PyUnicode_GET_LENGTH(message_ids)
            n = len(numbers)
            start = 0  # where the next id starts
            for j in range(n):
                if started and numbers.data.as_uints[j] <= last:
                    return None  # not ascending: the pure code sorts (or merges) them
                # This segment's id: to the next "\n", the last one to the end, and
                # whether orjson writes it as it is, in one pass.
                end = uidx_id_end(ids, start, length, &bad)
                if (end == length) != (j == n - 1):
                    return None  # ids and numbers apart: zip(strict=True) raises there
                if bad:
                    return None
                last = numbers.data.as_uints[j]
                if started:
                    out[at] = b","
                    at += 1
                started = True
                out[at] = b"["
                at += 1
                at += _decimal(out + at, last)
                out[at] = b","
                out[at + 1] = b'"'
                at += 2
                memcpy(out + at, ids + start, end - start)
                at += end - start
                start = end + 1
                out[at] = b'"'
                out[at + 1] = b","
                at += 2
                at += _decimal(out + at, sizes.data.as_uints[j])
                out[at] = b"]"
                at += 1
        out[at] = b"]"
        at += 1
        if _PyBytes_Resize(&made, at) < 0:
            made = NULL  # (freed by _PyBytes_Resize)
            raise MemoryError()
        found = <object>made  # a reference of its own; made's is given up below
        return found
    finally:
        Py_XDECREF(made)
        PyMem_Free(order)
