# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The RangeIndexer's hot paths, compiled: its per-line loop and take()'s file conversion.

Theory of operation
-------------------
This is the compiled twin of `RangeIndexer._scan` with `_add_segment`'s
opening of a file, and of take()'s conversion of a release's files
(core/indexer.py: `_OpenFile.lists` and `_file_chunks`' checks,
`reposts.pauses`, `reposts.restarts`, `release_pass_starts` with
`reposts.pass_starts`, `reposts.gap_cuts` and `reposts.resumed`, `_pieces`), the deliberate
oracle pairs: the pure-Python code stays as the reference and the
fallback, and tests/test_fastindex.py checks that both give the same
batches, byte for byte, on every generator profile, the real corpus and
fuzzed input.

`scan(data, fast, slow, opened, make)` walks `data` line by line with pointers, without a
Python object per line or per field. For each line it finds the tabs of the
first seven fields, the subject's last "(" and the "/" after it, and looks
the subject before that "(" up in `fast` (the indexer's dict of the file
each prefix last fed), first in a cache of it: 256 slots by a hash of the
prefix, each with the file's poster, "N) tail" and buffer (uploads are
posted side by side, ~32 files in flight, so the previous line's file is
rarely the next one's; a hit makes no bytes object, hashes nothing with
siphash and reads no attribute). When that file's poster
and "N) tail" match, the line has no References (or the file says yEnc) and
the article number is digits, the segment's k, article number, date,
message-id and bytes are copied, tab-separated, onto the end of the file's
one `segments` bytearray: the same bytes the pure loop appends.

The first segment of a new file, with a plain "(k/N)" as its subject's
last "(", is checked here as `_slow_line` checks it inline (the same
checks, in C: the counter's numbers, the size, the message-id, "Re:") and
goes to its file as `_add_segment` puts it there (`_add_first`: the file
found in `opened` by (prefix, poster, N), or made with `make` and put
there, and set in `fast`). Every other line is split as the pure loop
splits it and goes to `slow` (`_slow_line` itself), which sorts it out or
counts it as skipped. Both change `fast` at most at the line's prefix (the
subject before its last "("): that slot is let go after such a line.

For take() (`RangeIndexer._compiled_release`), `file_arrays(segments, N,
...)` reads one file's buffer in one pass into C arrays (k, article
number, size, where each date and message-id is), checking every segment
as the pure path would keep it, with the file's pauses and restarts and
whether a number repeats; else None, and the pure code converts the
release. `pass_starts(files)` finds where a release whose files repeat
numbers starts its later passes (a repost), over all its files' segments
in article order; `file_pieces(file, starts)` cuts a file there and gives
each piece's numbers and sizes as arrays and its message-ids as one str
(ASCII, made in place), the first post of each number kept;
`file_chunks(file, starts, ...)` makes those pieces the file's FileChunks
(as `indexer._make_file_chunk` makes them, each field set once, no Python
call per chunk), with the fields every piece shares from `chunk_head`
(the twin of `indexer._chunk_head`) and a piece's date read by
`plain_date` where it has the form nearly every server writes (the twin of
`indexer.parse_date` there). `released(...)` makes the release's chunks of
those (the twin of `RangeIndexer._released`): the groups of its files' Xref
fields read in C (`xref_groups`, the twin of `indexer._release_groups`), each
pass's files sorted and its earliest file found without a Python call per
file, and each ReleaseChunk made as a FileChunk is.
No Python object per segment.

No state lives here between calls: `fast`, the files and their buffers
belong to the RangeIndexer.
"""

from cpython cimport array
from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_FromStringAndSize,
    PyByteArray_GET_SIZE,
    PyByteArray_Resize,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_New
from libc.stdlib cimport calloc, free, qsort
from libc.string cimport memchr, memcmp, memcpy, memset


cdef extern from "string.h":
    # glibc's (Python.h defines _GNU_SOURCE); the last c in the first n bytes.
    const void *memrchr(const void *s, int c, size_t n) nogil

from usenet_indexer.core._tabcount cimport tab_count

import array as _array

from usenet_indexer.core import reposts
from usenet_indexer.core.reposts import wide_gap as _wide_gap

# The types of the arrays given out, cloned for each piece.
cdef array.array _NUMBERS = _array.array("I")
cdef array.array _SIZES = _array.array("I")
cdef array.array _ARTICLES = _array.array("q")
# reposts' constants (read there, once): WIDE (a file of at most WIDE + 1
# segments has no pause), MIN_GAP, RUN, SMALL_PASS, SHUFFLE.
cdef Py_ssize_t _WIDE = reposts.WIDE
cdef long long _MIN_GAP = reposts.MIN_GAP
cdef Py_ssize_t _RUN = reposts.RUN
cdef Py_ssize_t _SMALL_PASS = reposts.SMALL_PASS
cdef long long _SHUFFLE = reposts.SHUFFLE

# The fields up to "bytes" (RFC 3977 8.3.2): number, subject, from, date,
# message-id, references, bytes. The fast path reads these seven; a line
# split by the slow path is split this many times (indexer._SPLITS).
cdef enum:
    FIELDS = 7


cdef inline bint _digits(const char *s, Py_ssize_t n) noexcept nogil:
    # bytes.isdigit(): not empty, ASCII digits only.
    cdef Py_ssize_t i
    if n == 0:
        return False
    for i in range(n):
        if s[i] < b'0' or s[i] > b'9':
            return False
    return True


# Past every limit a number is compared with (sizes are uint32, counters at
# most MAX_SEGMENTS): longer digit texts read as this.
cdef long long BIG = 1099511627776  # 2**40


cdef inline long long _number(const char *s, Py_ssize_t n) noexcept nogil:
    # int() of a digit text (zero padding allowed), capped at BIG.
    cdef long long value = 0
    cdef Py_ssize_t i
    for i in range(n):
        value = value * 10 + (s[i] - 48)
        if value >= BIG:
            return BIG
    return value


cdef inline Py_ssize_t _find(const char *s, Py_ssize_t start, Py_ssize_t end, char c) noexcept nogil:
    # bytes.find within [start, end): the index, or -1.
    cdef Py_ssize_t i
    for i in range(start, end):
        if s[i] == c:
            return i
    return -1


cdef inline Py_ssize_t _count(const char *s, Py_ssize_t n, char c) noexcept nogil:
    cdef Py_ssize_t i, found = 0
    for i in range(n):
        if s[i] == c:
            found += 1
    return found


cdef inline bint _same(object text, const char *s, Py_ssize_t n):
    # A bytes object equal to s[:n].
    return PyBytes_GET_SIZE(text) == n and memcmp(PyBytes_AS_STRING(text), s, n) == 0


cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc
        char *ob_bytes
        char *ob_start
        Py_ssize_t ob_exports
    void Py_SET_SIZE(object, Py_ssize_t)


# The most a buffer grows ahead of its size at once for its file's N (`_grow`'s
# `whole`): a forged N reserves no more.
cdef Py_ssize_t _MOST_AHEAD = 1 << 22


cdef inline int _grow(object segments, Py_ssize_t size, Py_ssize_t whole) except -1:
    # A file's buffer (a bytearray, not shrunk here) made `size` bytes long, its
    # new bytes to be written: in the room it has, else grown to `whole` (what
    # all of the file's N segments would take, 0 when not known; at most
    # _MOST_AHEAD past `size`) or by half as much again, whichever is more (one
    # copy for most files that outgrow their first room; PyByteArray_Resize alone
    # grows it by an eighth, a copy every few segments). As PyByteArray_Resize
    # leaves it: the size set, a NUL after.
    cdef PyByteArrayObject *b = <PyByteArrayObject *><PyObject *>segments
    cdef Py_ssize_t room = size + size // 2
    if b.ob_exports == 0 and size < b.ob_alloc - (b.ob_start - b.ob_bytes):
        Py_SET_SIZE(segments, size)
        b.ob_start[size] = 0
        return 0
    if whole > room:
        room = whole if whole - size <= _MOST_AHEAD else size + _MOST_AHEAD
    PyByteArray_Resize(segments, room)  # (BufferError while exported)
    Py_SET_SIZE(segments, size)
    b.ob_start[size] = 0
    return 0


cdef inline void _put(char *to, Py_ssize_t *at, const char *s, Py_ssize_t n) noexcept nogil:
    memcpy(to + at[0], s, n)
    at[0] += n
    to[at[0]] = b'\t'
    at[0] += 1


cdef bint _first_segment(
    const char **f, Py_ssize_t *n, long long *limits, Py_ssize_t *where
) noexcept nogil:
    # The checks of RangeIndexer._slow_line's inline case, on a line of 8 or
    # more fields whose subject and poster are not too long and without
    # References. Fills where: p, q, total, the end of k.
    cdef const char *subject = f[1]
    cdef Py_ssize_t length = n[1], p, q, slash
    cdef long long k, total
    p = length - 1
    while p >= 0 and subject[p] != b'(':
        p -= 1
    if p < 0:
        return False
    q = _find(subject, p, length, b')')
    if q <= p:
        return False
    if not (_digits(f[0], n[0]) and _digits(f[6], n[6])):
        return False
    if not (2 < n[4] <= limits[1] and f[4][0] == b'<' and f[4][n[4] - 1] == b'>'):
        return False
    if _count(f[4], n[4], b'<') != 1 or _count(f[4], n[4], b'>') != 1:
        return False
    if length >= 3 and subject[0] | 32 == b'r' and subject[1] | 32 == b'e' and subject[2] == b':':
        return False  # ("R" | 32 is "r"; no other byte maps to "r", "e" so, and ":" stays)
    slash = _find(subject, p + 1, q, b'/')
    if slash < 0 or not (_digits(subject + p + 1, slash - p - 1) and _digits(subject + slash + 1, q - slash - 1)):
        return False
    k = _number(subject + p + 1, slash - p - 1)
    total = _number(subject + slash + 1, q - slash - 1)
    if not (0 < k <= total <= limits[2] and _number(f[6], n[6]) <= limits[3]):
        return False
    where[0] = p
    where[1] = q
    where[2] = <Py_ssize_t>total
    where[3] = slash
    return True


cdef bint _says_yenc(const char *s, Py_ssize_t n) noexcept nogil:
    # b"yenc" in s[:n].lower() (ASCII letters lowered, as bytes.lower does).
    cdef Py_ssize_t i
    for i in range(n - 3):
        if (
            s[i] | 32 == b'y'
            and s[i + 1] | 32 == b'e'
            and s[i + 2] | 32 == b'n'
            and s[i + 3] | 32 == b'c'
        ):
            return True
    return False


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    ctypedef struct PyTypeObject:
        PyObject *(*tp_alloc)(PyTypeObject *, Py_ssize_t)


# The fields of an _OpenFile that `_add_first` sets, in the order of its __init__
# (tests/test_fastindex.py holds the class to it).
_OPEN_FIELDS = (
    "poster", "prefix", "after", "total", "counter", "tail", "date", "after_bytes", "segments",
    "yenc",
)
cdef enum:
    OPEN_FIELDS = 10

import types as _types


cdef void _slot_offsets(object make, Py_ssize_t *offsets) except *:
    # Where each of _OPEN_FIELDS is in an object of `make`, a class with slots.
    cdef Py_ssize_t i
    cdef object member
    for i in range(OPEN_FIELDS):
        member = make.__dict__.get(_OPEN_FIELDS[i])
        if type(member) is not _types.MemberDescriptorType:
            raise TypeError(f"{make!r} has no slot {_OPEN_FIELDS[i]!r}")
        offsets[i] = (<PyMemberDescrObject *><PyObject *>member).d_member.offset


cdef inline object _alloc(object cls):
    # An object of `cls` with its slots empty, as object.__new__(cls) makes it.
    cdef PyObject *made = (<PyTypeObject *><PyObject *>cls).tp_alloc(<PyTypeObject *><PyObject *>cls, 0)
    cdef object found
    if made == NULL:
        raise MemoryError()
    found = <object>made
    Py_DECREF(found)  # tp_alloc's reference, now found's
    return found


cdef inline void _set(object target, Py_ssize_t offset, object value):
    # An empty slot of a new object set (as a slot's descriptor sets it).
    Py_INCREF(value)
    (<PyObject **>(<char *><PyObject *>target + offset))[0] = <PyObject *>value


# A new file's buffer starts with room for this many segments as long as its first
# (at most; a file of fewer segments, N, for N): most files get all their segments
# in one batch, and a buffer grown from one segment's room was copied a few times
# on the way (PyByteArray_Resize was ~7% of `scan`).
cdef enum:
    FIRST_ROOM = 64


cdef tuple _add_first(
    const char **f, Py_ssize_t *n, const char *rest, Py_ssize_t rest_n, Py_ssize_t *where,
    dict opened, dict fast, object make, const Py_ssize_t *offsets, object made,
):
    # RangeIndexer._add_segment of a checked first segment (where: p, q, N, the
    # counter's "/"): to its file in `opened`, opened now if new; `fast` points
    # its prefix at it. `made`: the prefix's bytes where `scan` made them for this
    # line (their hash kept), else None. Returns (prefix, the file): what `fast`
    # now holds for it.
    cdef const char *subject = f[1]
    cdef Py_ssize_t p = where[0], q = where[1], slash = where[3], at
    cdef bytes prefix = PyBytes_FromStringAndSize(subject, p) if made is None else made
    cdef bytes poster = PyBytes_FromStringAndSize(f[2], n[2])
    cdef tuple key = (prefix, poster, where[2])
    cdef PyObject *found = PyDict_GetItem(opened, key)
    cdef object segments
    cdef object open_file
    cdef char *buffer
    if found == NULL:
        # Empty, with room for min(N, FIRST_ROOM) segments of this one's length and
        # a few digits more each (the same bytes as the pure loop's, more room).
        at = ((slash - p - 1) + n[0] + n[3] + n[4] + n[6] + 5 + 4) * min(where[2], FIRST_ROOM)
        segments = PyByteArray_FromStringAndSize(NULL, at)
        Py_SET_SIZE(segments, 0)
        PyByteArray_AS_STRING(segments)[0] = 0
    else:
        open_file = <object>found
        segments = open_file.segments
    # k, number, date, message-id, bytes: each followed by a tab.
    at = PyByteArray_GET_SIZE(segments)
    _grow(segments, at + (slash - p - 1) + n[0] + n[3] + n[4] + n[6] + 5, 0)
    buffer = PyByteArray_AS_STRING(segments)
    _put(buffer, &at, subject + p + 1, slash - p - 1)
    _put(buffer, &at, f[0], n[0])
    _put(buffer, &at, f[3], n[3])
    _put(buffer, &at, f[4], n[4])
    _put(buffer, &at, f[6], n[6])
    if found == NULL:
        # An _OpenFile as its __init__ makes it (an attrs class with slots, without
        # validators, converters or a post-init hook: each init field set once,
        # `info` left unset), without a Python call per new file: made by its
        # type's tp_alloc (what object.__new__ does), each field put in its slot.
        open_file = _alloc(make)
        _set(open_file, offsets[0], poster)
        _set(open_file, offsets[1], prefix)
        _set(open_file, offsets[2], subject[slash + 1 : n[1]])  # "N) tail"
        _set(open_file, offsets[3], where[2])
        _set(open_file, offsets[4], subject[p + 1 : q])  # "k/N"
        _set(open_file, offsets[5], subject[q + 1 : n[1]])  # the tail
        _set(open_file, offsets[6], f[3][: n[3]])  # date
        _set(open_file, offsets[7], rest[:rest_n])  # lines, Xref, ...
        _set(open_file, offsets[8], segments)
        _set(open_file, offsets[9], True if _says_yenc(subject, n[1]) else False)
        opened[key] = open_file
    fast[prefix] = open_file
    return prefix, open_file


# The file cache of `scan`: slots by a hash of the subject prefix (uploads
# are posted side by side, ~32 files in flight in generated and real groups,
# so the previous line's file alone is rarely the next line's).
cdef enum:
    SLOTS = 256


# One slot: what `fast` gives for one prefix and the file's poster, "N) tail",
# buffer and yEnc, valid while its generation is the current one (pointers into
# the objects `scan`'s `held` keeps).
cdef struct _Slot:
    const char *prefix
    Py_ssize_t prefix_n
    const char *poster
    Py_ssize_t poster_n
    const char *after
    Py_ssize_t after_n
    PyObject *segments
    bint yenc
    Py_ssize_t total  # N (0 where unknown)
    unsigned long generation


cdef inline bint _holds(
    const _Slot *slot, const char *prefix, Py_ssize_t prefix_n, unsigned long generation
) noexcept nogil:
    # Whether the slot holds the prefix prefix[:prefix_n] in this generation.
    return (
        slot.generation == generation
        and slot.prefix_n == prefix_n
        and memcmp(slot.prefix, prefix, prefix_n) == 0
    )


cdef extern from "Python.h":
    Py_ssize_t _as_size "PyLong_AsSsize_t"(object) noexcept
    PyObject *PyErr_Occurred() noexcept
    void PyErr_Clear() noexcept


cdef inline PyObject *_slot_of(object target, Py_ssize_t offset) noexcept:
    # What a slot of an object of the class `_slot_offsets` read holds (NULL: unset).
    return (<PyObject **>(<char *><PyObject *>target + offset))[0]


cdef inline void _keep(
    _Slot *slot, list held, Py_ssize_t at, bytes prefix, object open_file,
    unsigned long generation, object make, const Py_ssize_t *offsets,
) except *:
    # The slot (number `at`) given `open_file`, fast[prefix]; `held` keeps the
    # objects its pointers are into. Its fields are read from their slots where it
    # is a `make` (an _OpenFile), without an attribute lookup each.
    cdef bytes poster
    cdef bytes after
    cdef object segments, yenc, total
    cdef PyObject *fields[5]
    cdef Py_ssize_t i
    cdef bint slots = type(open_file) is make
    if slots:
        fields[0] = _slot_of(open_file, offsets[0])  # poster
        fields[1] = _slot_of(open_file, offsets[2])  # after
        fields[2] = _slot_of(open_file, offsets[8])  # segments
        fields[3] = _slot_of(open_file, offsets[9])  # yenc
        fields[4] = _slot_of(open_file, offsets[3])  # total
        for i in range(5):
            slots = slots and fields[i] != NULL
    if slots:
        poster = <object>fields[0]
        after = <object>fields[1]
        segments = <object>fields[2]
        yenc = <object>fields[3]
        total = <object>fields[4]
    else:  # (an unset field raises AttributeError here, as it always did)
        poster = open_file.poster
        after = open_file.after
        segments = open_file.segments
        yenc = open_file.yenc
        total = open_file.total
    held[at] = (prefix, poster, after, segments)
    slot.prefix = PyBytes_AS_STRING(prefix)
    slot.prefix_n = PyBytes_GET_SIZE(prefix)
    slot.poster = PyBytes_AS_STRING(poster)
    slot.poster_n = PyBytes_GET_SIZE(poster)
    slot.after = PyBytes_AS_STRING(after)
    slot.after_n = PyBytes_GET_SIZE(after)
    slot.segments = <PyObject *>segments
    slot.yenc = yenc
    # N, a growth hint only (`_grow`): every file scan opens has 1..MAX_SEGMENTS.
    slot.total = _as_size(total) if type(total) is int else -1
    if not 0 < slot.total <= _MOST_AHEAD:
        if slot.total == -1 and PyErr_Occurred():
            PyErr_Clear()  # (past Py_ssize_t: no hint)
        slot.total = 0
    slot.generation = generation


cdef inline Py_ssize_t _slot(const char *s, Py_ssize_t n) noexcept nogil:
    # The cache slot of the prefix s[:n]: its bytes, eight at a time, mixed.
    cdef unsigned long long h = <unsigned long long>n * 0x9E3779B97F4A7C15ULL
    cdef unsigned long long word
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&word, s + i, 8)
        h = (h ^ word) * 0x100000001B3ULL
        i += 8
    word = 0
    if i < n:
        memcpy(&word, s + i, n - i)
    h = (h ^ word) * 0x9E3779B97F4A7C15ULL
    return <Py_ssize_t>(h >> 56)


def scan(bytes data, dict fast, object slow, dict opened, object make, tuple limits):
    """Feed the lines of `data` to the files in `fast` and `opened`, the rest to `slow`.

    Args:
        data: overview lines separated by "\\n", without "\\r".
        fast: the file each subject prefix last fed (`RangeIndexer._fast`);
            a file opened here, or fed its first segment here, is set in it.
        slow: called with a line's fields (`line.split(b"\\t", 7)`) for each
            line the fast path does not take and that is not a plain first
            segment of a file.
        opened: every open file by (prefix, poster, N) (`RangeIndexer._open`):
            a plain first segment goes to its file, opened here (as
            `RangeIndexer._add_segment` does) when new.
        make: the open file's class (`indexer._OpenFile`), made without a
            call of its __init__, each field set as it would set it.
        limits: the longest subject or poster, the longest message-id, the
            most segments of a file, the biggest size (indexer.MAX_HEADER_BYTES,
            MAX_MESSAGE_ID_BYTES, subject.MAX_SEGMENTS, the uint32 size cap).

    Returns:
        (lines, nul): the lines read (empty ones not counted, lines with a
        NUL byte counted), and of those the lines with a NUL byte, which
        are skipped.
    """
    cdef const char *base = PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t start = 0, end, length, i, tabs, p, slash, at, grown, nul_at
    cdef const char *line
    cdef const char *nl
    cdef const char *zero
    cdef const char *tab
    cdef const char *paren
    cdef const char *f[FIELDS]
    cdef Py_ssize_t n[FIELDS]
    cdef const char *subject
    cdef Py_ssize_t subject_n, prefix_n, k_n, after_n
    cdef const char *after
    cdef long lines = 0, nul = 0
    cdef PyObject *found
    cdef object segments
    cdef bint took
    cdef tuple added
    # The file cache (see _Slot). `held` keeps the objects the pointers are into.
    cdef list held = [None] * SLOTS
    cdef _Slot cache[SLOTS]
    cdef unsigned long generation = 1
    cdef Py_ssize_t slot
    cdef char *buffer
    cdef object prefix
    cdef object fields
    cdef long long limit[4]
    cdef Py_ssize_t where[4]
    cdef bint eight
    cdef Py_ssize_t rest = 0  # where the fields after "bytes" start
    cdef Py_ssize_t offsets[OPEN_FIELDS]
    for i in range(4):
        limit[i] = limits[i]
    _slot_offsets(make, offsets)
    for i in range(SLOTS):
        cache[i].generation = 0
    # Where the next NUL byte is at or after the line read (size: none): found
    # once for the data and again past each one, not looked for in every line.
    zero = <const char *>memchr(base, 0, size)
    nul_at = size if zero == NULL else zero - base
    while start <= size:
        nl = <const char *>memchr(base + start, b'\n', size - start)
        end = size if nl == NULL else nl - base
        line = base + start
        length = end - start
        start = end + 1
        if length == 0:
            continue
        lines += 1
        if nul_at < end:
            nul += 1
            if start < size:
                zero = <const char *>memchr(base + start, 0, size - start)
                nul_at = size if zero == NULL else zero - base
            else:
                nul_at = size
            continue
        took = False
        prefix = None  # this line's prefix, where made
        # The first seven fields; the seventh ("bytes") ends at a tab or the line's end.
        tabs = 0
        p = 0
        eight = False
        while tabs < FIELDS:
            tab = <const char *>memchr(line + p, b'\t', length - p)
            if tab == NULL:
                break
            f[tabs] = line + p
            n[tabs] = (tab - line) - p
            p = (tab - line) + 1
            tabs += 1
        if tabs == FIELDS:
            eight = True
            rest = p
        if tabs == FIELDS - 1:
            f[tabs] = line + p
            n[tabs] = length - p
            tabs += 1
        if tabs == FIELDS:
            subject = f[1]
            subject_n = n[1]
            # rpartition(b"("): the prefix before the last "(" (all of it is
            # "rest" when there is none), then partition(b"/") of the rest.
            paren = <const char *>memrchr(subject, b'(', subject_n)
            p = -1 if paren == NULL else paren - subject
            prefix_n = p if p >= 0 else 0
            slash = p + 1
            while slash < subject_n and subject[slash] != b'/':
                slash += 1
            k_n = slash - (p + 1)
            if slash < subject_n:
                after = subject + slash + 1
                after_n = subject_n - slash - 1
            else:
                after = subject + subject_n
                after_n = 0
            slot = _slot(subject, prefix_n)
            if not _holds(&cache[slot], subject, prefix_n, generation):
                # fast.get(prefix), kept in the slot (the previous prefix there
                # leaves it).
                prefix = PyBytes_FromStringAndSize(subject, prefix_n)
                found = PyDict_GetItem(fast, prefix)
                if found == NULL:
                    slot = -1
                else:
                    _keep(
                        &cache[slot], held, slot, prefix, <object>found, generation, make, offsets
                    )
            if (
                slot >= 0
                and cache[slot].poster_n == n[2]
                and memcmp(cache[slot].poster, f[2], n[2]) == 0
                and cache[slot].after_n == after_n
                and memcmp(cache[slot].after, after, after_n) == 0
                and (n[5] == 0 or cache[slot].yenc)
                and _digits(f[0], n[0])
            ):
                # k, number, date, message-id, bytes: each followed by a tab.
                segments = <object>cache[slot].segments
                at = PyByteArray_GET_SIZE(segments)
                grown = at + k_n + n[0] + n[3] + n[4] + n[6] + 5
                # Room for all N segments of about this one's length (a few
                # bytes more each: k and the message-ids vary).
                _grow(segments, grown, cache[slot].total * (grown - at + 4))
                buffer = PyByteArray_AS_STRING(segments)
                _put(buffer, &at, subject + p + 1, k_n)
                _put(buffer, &at, f[0], n[0])
                _put(buffer, &at, f[3], n[3])
                _put(buffer, &at, f[4], n[4])
                _put(buffer, &at, f[6], n[6])
                took = True
        if not took:
            if (
                eight
                and n[1] <= limit[0]
                and n[2] <= limit[0]
                and n[5] == 0
                and _first_segment(f, n, limit, where)
            ):
                # (The prefix made above, if any, is the subject before its last "(",
                # where[0] bytes: the same.)
                added = _add_first(
                    f, n, line + rest, length - rest, where, opened, fast, make, offsets, prefix
                )
                # fast[prefix] is this file now: its slot holds it (the next line of
                # the file, most often its next segment, is a hit).
                slot = _slot(f[1], where[0])
                _keep(&cache[slot], held, slot, added[0], added[1], generation, make, offsets)
            else:
                slow(PyBytes_FromStringAndSize(line, length).split(b"\t", FIELDS))
                # `slow` (`_slow_line`) sets in `fast` at most this line's prefix (the
                # subject before its last "("): that slot is let go; every slot for
                # a line without a subject field read here.
                if tabs == FIELDS:
                    slot = _slot(subject, prefix_n)
                    if _holds(&cache[slot], subject, prefix_n, generation):
                        cache[slot].generation = 0
                else:
                    generation += 1
    return lines, nul


# A release's files converted for take() (RangeIndexer._compiled_release):
# the compiled twins of `_OpenFile.lists` with `_file_chunks`' checks, of
# `reposts.pauses` and `reposts.restarts`, of `release_pass_starts` (with
# `reposts.pass_starts` and `reposts.gap_cuts`) and of `_pieces`.

# Article numbers past this go to the pure path (Python ints have no bound).
cdef long long ARTICLE_CAP = 1LL << 62
# A width no gap between two article numbers below ARTICLE_CAP passes: what
# WIDE times a gap reads as when it does not fit in 64 bits.
cdef long long UNREACHABLE = 0x7FFFFFFFFFFFFFFF


cdef struct Posted:
    # A segment of a release: its article number and its place among the
    # release's segments (file by file, each in the order its lines came).
    long long article
    Py_ssize_t at


cdef int _ascending(const void *a, const void *b) noexcept nogil:
    cdef long long x = (<const long long *>a)[0], y = (<const long long *>b)[0]
    return (x > y) - (x < y)


cdef inline Py_ssize_t _tab(const char *s, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    # The next tab at or after start (memchr: the fields of a buffer run to a tab).
    cdef const char *found = <const char *>memchr(s + start, b'\t', end - start)
    return -1 if found == NULL else found - s


cdef inline bint _id_text(const char *s, Py_ssize_t n) noexcept nogil:
    # A message-id's text between its brackets as the compiled conversion takes
    # it: ASCII without "<" or ">". Eight bytes at a time: a byte above 127 has its
    # high bit set, and a byte equal to "<" (or ">") is a zero byte of w ^ 0x3C..
    # (w ^ 0x3E..), which (x - 0x01..) & ~x marks with its high bit.
    cdef unsigned long long w, a, b
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        a = w ^ 0x3C3C3C3C3C3C3C3CULL
        b = w ^ 0x3E3E3E3E3E3E3E3EULL
        if (
            w | ((a - 0x0101010101010101ULL) & ~a) | ((b - 0x0101010101010101ULL) & ~b)
        ) & 0x8080808080808080ULL:
            return False
        i += 8
    while i < n:
        if <unsigned char>s[i] > 127 or s[i] == b'<' or s[i] == b'>':
            return False
        i += 1
    return True


cdef inline Py_ssize_t _digits_to_tab(
    const char *s, Py_ssize_t at, Py_ssize_t size, unsigned long long cap, unsigned long long *value
) noexcept nogil:
    # A field of ASCII digits from `at` to its tab, read in one pass: where the tab is,
    # its value in `value`; -1 when the field is empty, holds another byte, has no tab
    # or reads above `cap` (at most 2**40: no step overflows).
    cdef Py_ssize_t j = at
    cdef unsigned long long v = 0, d
    while j < size and s[j] != b'\t':
        d = <unsigned char>s[j] - 48
        if d > 9:
            return -1
        v = v * 10 + d
        if v > cap:
            return -1
        j += 1
    if j == at or j == size:
        return -1
    value[0] = v
    return j


cdef class FileArrays:
    """One file's segments read into C arrays, in the order its lines came (`file_arrays`).

    Attributes:
        total: the file's N.
        count: its segments.
        first, last: the article numbers of its first and last line.
        repeats: a number comes twice (a repeat or a repost).
        repeated_texts: a k text comes twice (not only a number, as "2" and
            "02" are one).
        ordered: the article numbers never fall (then its pieces are slices).
        pauses: where its posting paused (`reposts.pauses`).
        restarts: where its numbers start over (`reposts.restarts`; none
            when a k is zero padded, as `indexer._restarts` reads them).
    """

    cdef readonly object segments
    cdef readonly long long total
    cdef readonly Py_ssize_t count
    cdef readonly long long first
    cdef readonly long long last
    cdef readonly bint repeats
    cdef readonly bint repeated_texts
    cdef readonly bint ordered
    cdef readonly list pauses
    cdef readonly list restarts
    cdef unsigned int *ks
    cdef long long *articles
    cdef unsigned int *sizes
    cdef Py_ssize_t *mids  # where each message-id's "<" is in `segments`
    cdef Py_ssize_t *mid_n  # the length of each message-id's text between its brackets
    cdef Py_ssize_t *dates  # where each date is

    def __dealloc__(self):
        PyMem_Free(self.ks)
        PyMem_Free(self.articles)
        PyMem_Free(self.sizes)
        PyMem_Free(self.mids)
        PyMem_Free(self.mid_n)
        PyMem_Free(self.dates)


cdef list _pauses(const long long *articles, Py_ssize_t count):
    # reposts.pauses of a file's article numbers (its oracle; the same test,
    # in one pass and without an int per segment): (before, after) of each gap
    # wider than the file's other gaps make a pause, for a file of more than
    # WIDE + 1 segments. wide_gap itself runs in Python (its ints are unbounded).
    cdef Py_ssize_t i
    cdef long long widest, wide
    cdef list found = []
    if count <= _WIDE + 1:
        return found
    widest = articles[1] - articles[0]
    for i in range(2, count):
        if articles[i] - articles[i - 1] > widest:
            widest = articles[i] - articles[i - 1]
    # At most the span itself (count - 2 >= WIDE): within 64 bits.
    wide = _wide_gap(articles[count - 1] - articles[0] - widest, count - 1)
    if widest <= wide:
        return found
    for i in range(1, count):
        if articles[i] - articles[i - 1] > wide:
            found.append((articles[i - 1], articles[i]))
    return found


cdef list _restarts(const unsigned int *ks, const long long *articles, Py_ssize_t count, long long total):
    # reposts.restarts (its oracle): the articles where RUN numbers in a row
    # fall more than min(SHUFFLE, N // 2) below the highest so far.
    cdef long long window = min(_SHUFFLE, total // 2)
    cdef long long highest = 0, number
    cdef Py_ssize_t at, j, low = 0
    cdef list found = []
    if not window:
        return found
    for at in range(count):
        number = ks[at]
        if number < highest - window:
            low += 1
            if low == _RUN:
                found.append(articles[at - _RUN + 1])
                highest = 0
                for j in range(at - _RUN + 1, at + 1):
                    if ks[j] > highest:
                        highest = ks[j]
                low = 0
        else:
            low = 0
            if number > highest:
                highest = number
    return found


def file_arrays(bytearray segments, long long total, Py_ssize_t max_message_id):
    """A file's segments read and checked for take(), or None for the pure path.

    Every segment must be what `_file_chunks` keeps as it is: k ASCII
    digits (zero padding allowed) within 1..N, the article number digits
    without zero padding below 2**62, the message-id "<" + ASCII text
    without angle brackets + ">" of 3 to `max_message_id` bytes, the size
    ASCII digits within uint32. Anything else is None: the caller converts
    the release in Python, which sorts it out.

    Args:
        segments: the file's buffer (`_OpenFile.segments`): k, article
            number, date, message-id and bytes of each segment, each
            followed by a tab.
        total: the file's N.
    """
    cdef const char *s = PyByteArray_AS_STRING(segments)
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(segments)
    cdef Py_ssize_t count = tab_count(s, size) // 5
    cdef Py_ssize_t at = 0, i, j, tab, n
    cdef long long value, k
    cdef unsigned long long digits
    cdef bint plain = True  # no k zero padded
    cdef unsigned char *seen = NULL  # per number: the length of its first k text
    cdef FileArrays f
    if count == 0 or not 0 < total <= 0xFFFFFFFFLL:
        return None
    f = FileArrays.__new__(FileArrays)
    f.ks = <unsigned int *>PyMem_Malloc(count * sizeof(unsigned int))
    f.articles = <long long *>PyMem_Malloc(count * sizeof(long long))
    f.sizes = <unsigned int *>PyMem_Malloc(count * sizeof(unsigned int))
    f.mids = <Py_ssize_t *>PyMem_Malloc(count * sizeof(Py_ssize_t))
    f.mid_n = <Py_ssize_t *>PyMem_Malloc(count * sizeof(Py_ssize_t))
    f.dates = <Py_ssize_t *>PyMem_Malloc(count * sizeof(Py_ssize_t))
    seen = <unsigned char *>calloc(total + 1, 1)
    try:
        if (
            f.ks == NULL or f.articles == NULL or f.sizes == NULL or f.mids == NULL
            or f.mid_n == NULL or f.dates == NULL or seen == NULL
        ):
            raise MemoryError()
        f.ordered = True
        for i in range(count):
            # (Any check failing gives None, whichever comes first: each field is
            # read and checked in one pass.)
            tab = _digits_to_tab(s, at, size, <unsigned long long>total, &digits)  # k
            if tab < 0:
                return None
            n = tab - at
            k = <long long>digits
            if k == 0:
                return None
            if n > 1 and s[at] == b'0':
                plain = False
            # A k text of up to 254 digits (else the pure path): the same number
            # in as many digits is the same text.
            if n > 254:
                return None
            if seen[k]:
                f.repeats = True
                if seen[k] == n:
                    f.repeated_texts = True
            else:
                seen[k] = <unsigned char>n
            f.ks[i] = <unsigned int>k
            at = tab + 1
            # The article number: digits up to 10**12 - 1 in one pass (below
            # ARTICLE_CAP), longer ones read again with the cap checked.
            tab = _digits_to_tab(s, at, size, 999999999999ULL, &digits)
            if tab >= 0:
                n = tab - at
                value = <long long>digits
                if n > 1 and s[at] == b'0':
                    return None
            else:
                tab = _tab(s, at, size)
                n = tab - at
                if not _digits(s + at, n) or (n > 1 and s[at] == b'0'):
                    return None
                value = 0
                for j in range(n):
                    # Checked before the step: value * 10 of a 20-digit number
                    # overflows 64 bits (2**64 read as 0 would pass the cap).
                    if value > (ARTICLE_CAP - 1 - (s[at + j] - 48)) // 10:
                        return None
                    value = value * 10 + (s[at + j] - 48)
            if i and value < f.articles[i - 1]:
                f.ordered = False
            f.articles[i] = value
            f.dates[i] = tab + 1
            at = _tab(s, tab + 1, size) + 1  # past the date
            tab = _tab(s, at, size)  # message-id
            n = tab - at
            if not (2 < n <= max_message_id and s[at] == b'<' and s[tab - 1] == b'>'):
                return None
            if not _id_text(s + at + 1, n - 2):
                return None  # an angle bracket inside, or a byte decode() reads: the pure path
            f.mids[i] = at
            f.mid_n[i] = n - 2
            at = tab + 1
            tab = _digits_to_tab(s, at, size, 0xFFFFFFFFULL, &digits)  # bytes
            if tab < 0:
                return None
            f.sizes[i] = <unsigned int>digits
            at = tab + 1
    finally:
        free(seen)
    f.segments = segments
    f.total = total
    f.count = count
    f.first = f.articles[0]
    f.last = f.articles[count - 1]
    f.pauses = _pauses(f.articles, count)
    f.restarts = _restarts(f.ks, f.articles, count, total) if plain else []
    return f


cdef long long _select(long long *a, Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    # The k-th smallest of a[:n] (a is reordered): what sorting a and reading a[k]
    # gives, in linear time on the average (quickselect, the pivot a median of three);
    # after 2 * log2(n) + 16 rounds that do not shrink it enough, the rest is sorted.
    cdef Py_ssize_t lo = 0, hi = n - 1, i, j, rounds = 16
    cdef long long pivot, x, y, z, t
    i = n
    while i > 1:
        rounds += 2
        i >>= 1
    while hi > lo:
        rounds -= 1
        if rounds < 0:
            qsort(a + lo, hi - lo + 1, sizeof(long long), _ascending)
            return a[k]
        x = a[lo]
        y = a[lo + (hi - lo) // 2]
        z = a[hi]
        if x > y:
            t = x; x = y; y = t
        if y > z:
            y = z
            if x > y:
                y = x
        pivot = y
        # Hoare's partition: a[lo..j] <= pivot <= a[j+1..hi].
        i = lo - 1
        j = hi + 1
        while True:
            i += 1
            while a[i] < pivot:
                i += 1
            j -= 1
            while a[j] > pivot:
                j -= 1
            if i >= j:
                break
            t = a[i]; a[i] = a[j]; a[j] = t
        if k <= j:
            hi = j
        else:
            lo = j + 1
    return a[k]


cdef int _sort_posted(Posted *posted, Py_ssize_t n) except -1:
    # posted[:n] (each .at its place) sorted by article, then by place (Python's
    # stable sort by article, as reposts.pass_starts sorts). The places ascend as given, so a stable sort by
    # article alone is that order: none when the articles ascend already (a
    # release posted file after file), else a radix sort of them less the least,
    # eight bits a pass (as many passes as the span has bytes).
    cdef Py_ssize_t i, d, passes = 0
    cdef long long least, most
    cdef unsigned long long span
    cdef Py_ssize_t count[256]
    cdef Py_ssize_t total
    cdef Posted *other
    cdef Posted *source
    cdef Posted *target
    cdef Posted *swap
    cdef int shift
    for i in range(1, n):
        if posted[i].article < posted[i - 1].article:
            break
    else:
        return 0
    least = most = posted[0].article
    for i in range(1, n):
        if posted[i].article < least:
            least = posted[i].article
        elif posted[i].article > most:
            most = posted[i].article
    span = <unsigned long long>(most - least)
    while span:
        passes += 1
        span >>= 8
    other = <Posted *>PyMem_Malloc(n * sizeof(Posted))
    if other == NULL:
        raise MemoryError()
    source, target = posted, other
    for d in range(passes):
        shift = 8 * d
        memset(count, 0, sizeof(count))
        for i in range(n):
            count[((<unsigned long long>(source[i].article - least)) >> shift) & 0xFF] += 1
        total = 0
        for i in range(256):
            total, count[i] = total + count[i], total
        for i in range(n):
            target[count[((<unsigned long long>(source[i].article - least)) >> shift) & 0xFF]] = source[i]
            count[((<unsigned long long>(source[i].article - least)) >> shift) & 0xFF] += 1
        swap = source
        source = target
        target = swap
    if source != posted:
        memcpy(posted, source, n * sizeof(Posted))
    PyMem_Free(other)
    return 0


cdef long long _wide_of(const long long *gaps, Py_ssize_t count) except -1:
    # reposts._wide_of (its oracle): WIDE times the median gap, at least
    # MIN_GAP; MIN_GAP when no gap is wider.
    cdef Py_ssize_t i
    cdef long long widest = 0, median
    cdef long long *ordered
    for i in range(count):
        if gaps[i] > widest:
            widest = gaps[i]
    if count == 0 or widest <= _MIN_GAP:
        return _MIN_GAP
    ordered = <long long *>PyMem_Malloc(count * sizeof(long long))
    if ordered == NULL:
        raise MemoryError()
    memcpy(ordered, gaps, count * sizeof(long long))
    median = _select(ordered, count, count // 2)
    PyMem_Free(ordered)
    if median > UNREACHABLE // _WIDE:
        return UNREACHABLE
    return max(_MIN_GAP, _WIDE * median)


def pass_starts(list files, bint cut=True, resets=()):
    """The first article of each later pass of a release, from its files' arrays: the
    compiled twin of `indexer.release_pass_starts`.

    Args:
        files: the release's files (`FileArrays`), in the order of its members.
        cut: and where its posting pauses long.
        resets: where its files start over, ascending (`reposts.restart_cuts`): the
            pass holds nothing there.
    """
    cdef Py_ssize_t n = 0, at, i, j, distinct, last_start = 0, run = 0, seen_count = 0
    cdef Py_ssize_t next_reset = 0, reset_count = len(resets)
    cdef long long reset_at
    cdef Py_ssize_t lo, hi, mid
    cdef long long base = 0, wide, least
    cdef unsigned int generation = 1
    cdef FileArrays f
    cdef long long *keys = NULL  # each segment's number, the files' apart
    cdef long long *unique = NULL  # the distinct keys, ascending
    cdef long long *gaps = NULL
    cdef Py_ssize_t *ranks = NULL  # in article order: each segment's key among `unique`
    cdef unsigned int *stamp = NULL  # a key is in the current pass: its stamp is `generation`
    cdef Posted *posted = NULL
    cdef Py_ssize_t *rank_of = NULL  # by key below `base`: its rank among the distinct keys
    cdef Py_ssize_t *owner = NULL  # each segment's file (by its place before the sort)
    cdef Py_ssize_t *order = NULL  # by file: its place in the pass's order (`_went_back`)
    cdef Py_ssize_t file_count = len(files), passed = 0, start, latest_new
    cdef Py_ssize_t *first_at = NULL  # by rank: each number's first place (reposts.resumed)
    cdef list found = []
    cdef list places = []  # where passes start and cuts fall (as reposts.pass_starts, but 0)
    for f in files:
        n += f.count
    if n == 0:
        return found
    try:
        keys = <long long *>PyMem_Malloc(n * sizeof(long long))
        unique = <long long *>PyMem_Malloc(n * sizeof(long long))
        gaps = <long long *>PyMem_Malloc(n * sizeof(long long))
        ranks = <Py_ssize_t *>PyMem_Malloc(n * sizeof(Py_ssize_t))
        stamp = <unsigned int *>calloc(n, sizeof(unsigned int))
        posted = <Posted *>PyMem_Malloc(n * sizeof(Posted))
        owner = <Py_ssize_t *>PyMem_Malloc(n * sizeof(Py_ssize_t))
        order = <Py_ssize_t *>PyMem_Malloc(file_count * sizeof(Py_ssize_t))
        if (
            keys == NULL or unique == NULL or gaps == NULL or ranks == NULL or stamp == NULL
            or posted == NULL or owner == NULL or order == NULL
        ):
            raise MemoryError()
        at = 0
        j = 0
        for f in files:
            for i in range(f.count):
                keys[at] = base + f.ks[i]
                posted[at].article = f.articles[i]
                posted[at].at = at
                owner[at] = j
                at += 1
            base += f.total + 1
            j += 1
        if base <= 8 * n + 4096:
            # The keys lie below `base`: each key's rank among the distinct ones
            # counted out over that range, not sorted.
            rank_of = <Py_ssize_t *>calloc(base, sizeof(Py_ssize_t))
            if rank_of == NULL:
                raise MemoryError()
            for i in range(n):
                rank_of[keys[i]] = 1
            distinct = 0
            for i in range(base):
                if rank_of[i]:
                    rank_of[i] = distinct
                    distinct += 1
        else:
            memcpy(unique, keys, n * sizeof(long long))
            qsort(unique, n, sizeof(long long), _ascending)
            distinct = 1
            for i in range(1, n):
                if unique[i] != unique[distinct - 1]:
                    unique[distinct] = unique[i]
                    distinct += 1
        _sort_posted(posted, n)
        for i in range(1, n):
            gaps[i - 1] = posted[i].article - posted[i - 1].article
        wide = _wide_of(gaps, n - 1) if cut else UNREACHABLE
        for i in range(n):
            if rank_of != NULL:
                ranks[i] = rank_of[keys[posted[i].at]]
                continue
            lo, hi = 0, distinct
            while lo < hi:
                mid = (lo + hi) // 2
                if unique[mid] < keys[posted[i].at]:
                    lo = mid + 1
                else:
                    hi = mid
            ranks[i] = lo
        least = min(_RUN, distinct)
        if least < _SMALL_PASS or n - distinct < least:
            # Too few numbers come again for a pass to start: only pauses cut
            # (reposts.gap_cuts), and where a repost's first file comes again before
            # numbers new to the release (reposts.resumed).
            if not cut:
                return found
            first_at = <Py_ssize_t *>PyMem_Malloc(distinct * sizeof(Py_ssize_t))
            if first_at == NULL:
                raise MemoryError()
            for i in range(distinct):
                first_at[i] = n
            latest_new = 0
            for i in range(n):
                if first_at[ranks[i]] == n:
                    first_at[ranks[i]] = i
                    latest_new = i
            for i in range(1, n):
                if posted[i].article - posted[i - 1].article > wide or (
                    i < latest_new
                    and posted[i].article - posted[i - 1].article > _MIN_GAP
                    and first_at[ranks[i]] < i
                ):
                    found.append(posted[i].article)
            return found
        # reposts.pass_starts, in article order.
        for at in range(n):
            if at and gaps[at - 1] > wide and last_start != at:
                # A cut, not a pass: what the pass holds still counts for repeats.
                places.append(at)
                last_start = at
            while next_reset < reset_count:
                reset_at = resets[next_reset]
                if reset_at > posted[at].article:
                    break
                next_reset += 1
                if reset_at == posted[at].article and run == 0:
                    # The files start over after a new number: a pass holding what
                    # it went back to (reposts._started), else nothing yet.
                    passed = _started(places, posted, owner, order, file_count, passed, at)
                    last_start = places[len(places) - 1] if places else 0
                    generation += 1
                    seen_count = 0
                    for j in range(passed, at):
                        if stamp[ranks[j]] != generation:
                            stamp[ranks[j]] = generation
                            seen_count += 1
            if stamp[ranks[at]] == generation:
                run += 1
                if run == min(_RUN, seen_count) and seen_count >= _SMALL_PASS:
                    start = at - run + 1
                    passed = _started(places, posted, owner, order, file_count, passed, start)
                    last_start = places[len(places) - 1] if places else 0
                    generation += 1
                    seen_count = 0
                    for j in range(passed, at + 1):
                        if stamp[ranks[j]] != generation:
                            stamp[ranks[j]] = generation
                            seen_count += 1
                    run = 0
            else:
                run = 0
                stamp[ranks[at]] = generation
                seen_count += 1
        for start in places:
            found.append(posted[start].article)
        return found
    finally:
        PyMem_Free(keys)
        PyMem_Free(unique)
        PyMem_Free(gaps)
        PyMem_Free(ranks)
        free(stamp)
        free(rank_of)
        PyMem_Free(posted)
        PyMem_Free(owner)
        PyMem_Free(order)
        PyMem_Free(first_at)


cdef Py_ssize_t _started(
    list places, Posted *posted, Py_ssize_t *owner, Py_ssize_t *order, Py_ssize_t file_count,
    Py_ssize_t passed, Py_ssize_t start,
) except -1:
    """reposts._started with its `_went_back`: a pass started at `start` or where it went
    back to, in `places` (positions; 0 is not in them); where it starts."""
    cdef Py_ssize_t i, back, own, count = 0
    cdef Py_ssize_t last
    for i in range(file_count):
        order[i] = -1
    for i in range(passed, start):
        if order[owner[posted[i].at]] < 0:
            order[owner[posted[i].at]] = count
            count += 1
    own = order[owner[posted[start].at]]
    if own < 0:
        own = count
    back = start
    while back > passed and order[owner[posted[back - 1].at]] <= own:
        back -= 1
    if back != passed and back < start:
        # (Not cut where its first files paused.)
        places[:] = [at for at in places if not back < <Py_ssize_t>at < start]
        start = back
    last = places[len(places) - 1] if places else 0
    if last != start:
        places.append(start)
    return start


def sorted_articles(list files):
    """The article numbers of every segment of the files, ascending (array "q")."""
    cdef Py_ssize_t n = 0, at = 0
    cdef FileArrays f
    cdef array.array found
    for f in files:
        n += f.count
    found = array.clone(_ARTICLES, n, zero=False)
    for f in files:
        memcpy(found.data.as_longlongs + at, f.articles, f.count * sizeof(long long))
        at += f.count
    qsort(found.data.as_longlongs, n, sizeof(long long), _ascending)
    return found


cdef inline Py_ssize_t _bisect_left(const long long *a, Py_ssize_t n, long long x) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef tuple _piece(FileArrays f, const char *s, Py_ssize_t size, const Py_ssize_t *order, Py_ssize_t kept):
    # The segments at `order` (ascending by number) as a chunk's arrays: the
    # numbers, the sizes, the message-ids without brackets joined by "\n"
    # (ASCII: a str of one byte a character, filled in place), and the date
    # of the piece's first line.
    cdef array.array numbers = array.clone(_NUMBERS, kept, zero=False)
    cdef array.array sizes = array.clone(_SIZES, kept, zero=False)
    cdef Py_ssize_t i, j = 0, at, n, length = kept - 1
    cdef str message_ids
    cdef char *out
    for i in range(kept):
        length += f.mid_n[order[i]]
    message_ids = PyUnicode_New(length, 127)
    out = <char *>PyUnicode_DATA(message_ids)
    for i in range(kept):
        numbers.data.as_uints[i] = f.ks[order[i]]
        sizes.data.as_uints[i] = f.sizes[order[i]]
        at = f.mids[order[i]]
        n = f.mid_n[order[i]]
        memcpy(out + j, s + at + 1, n)
        j += n
        if i + 1 < kept:
            out[j] = b'\n'
            j += 1
    return numbers, sizes, message_ids


def file_pieces(FileArrays f, list starts):
    """A file cut at `starts` (articles where a pass or a piece begins): the compiled twin
    of `indexer._pieces`.

    Each piece is a slice of the file's segments in the order its lines
    came: kept whole when its numbers ascend, else the first post of each
    number (the others counted as repeats). The file's article numbers
    must not fall (`f.ordered`) unless `starts` is empty.

    Returns:
        (pieces, repeats): per piece (numbers, sizes, message_ids, date) or
        None for a piece without a segment (trailing ones left out): the
        numbers ascending (array "I"), the sizes by number (array "I"), the
        message-ids by number without brackets, joined by "\\n" (a str, as
        `indexer.decode` gives it) and the date text of the piece's first
        line; and the repeats left out.
    """
    cdef const char *s = PyByteArray_AS_STRING(f.segments)
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(f.segments)
    cdef Py_ssize_t parts = len(starts) + 1, b, i, begin, end, kept, date, repeats = 0
    cdef Py_ssize_t *bounds = NULL
    cdef Py_ssize_t *order = NULL
    cdef long long *by_number = NULL  # k << 32 | place
    cdef bint ascending
    cdef list pieces = []
    if starts and not f.ordered:
        raise ValueError("a file whose article numbers fall is not cut")
    try:
        bounds = <Py_ssize_t *>PyMem_Malloc((parts + 1) * sizeof(Py_ssize_t))
        order = <Py_ssize_t *>PyMem_Malloc(f.count * sizeof(Py_ssize_t))
        by_number = <long long *>PyMem_Malloc(f.count * sizeof(long long))
        if bounds == NULL or order == NULL or by_number == NULL:
            raise MemoryError()
        bounds[0] = 0
        for b in range(1, parts):
            bounds[b] = _bisect_left(f.articles, f.count, starts[b - 1])
        bounds[parts] = f.count
        for b in range(parts):
            begin, end = bounds[b], bounds[b + 1]
            if begin >= end:
                pieces.append(None)
                continue
            ascending = True
            for i in range(begin + 1, end):
                if f.ks[i - 1] >= f.ks[i]:
                    ascending = False
                    break
            if ascending:
                kept = end - begin
                for i in range(kept):
                    order[i] = begin + i
            else:
                for i in range(begin, end):
                    by_number[i - begin] = (<long long>f.ks[i] << 32) | i
                qsort(by_number, end - begin, sizeof(long long), _ascending)
                kept = 0
                for i in range(end - begin):
                    if kept == 0 or by_number[i] >> 32 != by_number[i - 1] >> 32:
                        order[kept] = by_number[i] & 0xFFFFFFFFLL
                        kept += 1
                repeats += end - begin - kept
            date = f.dates[begin]
            pieces.append(
                (*_piece(f, s, size, order, kept), PyBytes_FromStringAndSize(s + date, _tab(s, date, size) - date))
            )
        while pieces and pieces[len(pieces) - 1] is None:
            pieces.pop()
        return pieces, repeats
    finally:
        PyMem_Free(bounds)
        PyMem_Free(order)
        PyMem_Free(by_number)


cdef extern from "Python.h":
    int PyObject_GenericSetAttr(object o, object name, object value) except -1

# The fields of a FileChunk, in the order of its __init__ (tests/test_fastindex.py
# holds the class to it): `file_chunks` sets them so.
_CHUNK_FIELDS = (
    "key", "name", "subject", "index", "total_segments", "posted", "numbers", "message_ids",
    "sizes",
)


cdef inline int _two(const unsigned char *s) noexcept nogil:
    # Two ASCII digits' value, or -1.
    if not (48 <= s[0] <= 57 and 48 <= s[1] <= 57):
        return -1
    return (s[0] - 48) * 10 + (s[1] - 48)


cdef const char *_WEEKDAYS = b"MonTueWedThuFriSatSun"
cdef const char *_MONTH_NAMES = b"JanFebMarAprMayJunJulAugSepOctNovDec"


cdef inline long long _days(long long year, long long month, long long day) noexcept nogil:
    # Days from 1970-01-01 to the date (the proleptic Gregorian calendar, as
    # calendar.timegm counts them; `day` is not checked against the month).
    cdef long long y = year - (1 if month <= 2 else 0)
    cdef long long era = y // 400
    cdef long long yoe = y - era * 400
    cdef long long doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5
    cdef long long doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468 + day - 1


def plain_date(bytes date):
    """Unix seconds of a Date field in the form nearly every server writes
    ("Mon, 6 May 2024 10:00:00 +0000"), as `indexer.parse_date` reads it
    (`_PLAIN_DATE` and calendar.timegm): its compiled twin for that form only;
    None for any other text (then `parse_date` decides, email.utils and all).
    """
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(date)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(date), at, w, m, day_digits
    cdef long long day, month = 0, year, hour, minute, second, tz_hours, tz_minutes, offset
    # "Ddd, " then 1 or 2 digits: 30 or 31 bytes in all.
    if n == 31:
        day_digits = 2
    elif n == 30:
        day_digits = 1
    else:
        return None
    for w in range(7):
        if memcmp(s, _WEEKDAYS + 3 * w, 3) == 0:
            break
    else:
        return None
    if s[3] != b',' or s[4] != b' ':
        return None
    if day_digits == 2:
        day = _two(s + 5)
        if day < 0:
            return None
    else:
        if not 48 <= s[5] <= 57:
            return None
        day = s[5] - 48
    at = 5 + day_digits
    if s[at] != b' ' or s[at + 4] != b' ':
        return None
    # `[A-Z][a-z][a-z]` and then a month name: only a month name is both.
    for m in range(12):
        if memcmp(s + at + 1, _MONTH_NAMES + 3 * m, 3) == 0:
            month = m + 1
            break
    else:
        return None
    at += 5
    if not 49 <= s[at] <= 57 or _two(s + at) < 0 or _two(s + at + 2) < 0:
        return None
    year = _two(s + at) * 100 + _two(s + at + 2)
    at += 4
    if s[at] != b' ' or s[at + 3] != b':' or s[at + 6] != b':' or s[at + 9] != b' ':
        return None
    hour, minute, second = _two(s + at + 1), _two(s + at + 4), _two(s + at + 7)
    if hour < 0 or minute < 0 or second < 0:
        return None
    at += 10
    if s[at] != b'+' and s[at] != b'-':
        return None
    tz_hours, tz_minutes = _two(s + at + 1), _two(s + at + 3)
    if tz_hours < 0 or tz_minutes < 0:
        return None
    offset = tz_hours * 3600 + tz_minutes * 60
    if offset == 0 and s[at] == b'-':
        return None  # "-0000": local time there (email.utils reads it)
    return (
        _days(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
        - (offset if s[at] == b'+' else -offset)
    )


def file_chunks(FileArrays f, list starts, object chunk, tuple head, dict dates, object parsed):
    """`file_pieces`' pieces as the file's chunks, each as `indexer._make_file_chunk`
    makes it (the compiled twin of the pure path's `_make_file_chunk` per piece).

    Args:
        chunk: the class FileChunk (a frozen attrs class without validators or
            converters), made as object.__new__ makes it and each field set once,
            as its __init__ sets them, without a Python call per chunk.
        head: the file's (key, name, subject, index, total_segments)
            (`indexer._chunk_head`), the same in every piece.
        dates: the batch's dates already parsed, by their text; a date not in
            it is put there, read by `plain_date`.
        parsed: `indexer._parsed`, for a date not in `dates` that `plain_date`
            leaves (it puts it there).

    Returns:
        (chunks, repeats): a FileChunk per piece or None, as `file_pieces`.
    """
    cdef list pieces
    cdef Py_ssize_t repeats, i
    cdef object piece, posted, made, date
    cdef PyObject *found
    cdef tuple names = _CHUNK_FIELDS
    if len(head) != 5:
        raise ValueError("a chunk's head is (key, name, subject, index, total_segments)")
    pieces, repeats = file_pieces(f, starts)
    for i in range(len(pieces)):
        piece = pieces[i]
        if piece is None:
            continue
        date = (<tuple>piece)[3]
        found = PyDict_GetItem(dates, date)
        if found != NULL:
            posted = <object>found
        else:
            posted = plain_date(date)
            if posted is None:
                posted = parsed(dates, date)
            else:
                dates[date] = posted
        made = _alloc(chunk)
        PyObject_GenericSetAttr(made, names[0], head[0])
        PyObject_GenericSetAttr(made, names[1], head[1])
        PyObject_GenericSetAttr(made, names[2], head[2])
        PyObject_GenericSetAttr(made, names[3], head[3])
        PyObject_GenericSetAttr(made, names[4], head[4])
        PyObject_GenericSetAttr(made, names[5], posted)
        PyObject_GenericSetAttr(made, names[6], (<tuple>piece)[0])
        PyObject_GenericSetAttr(made, names[7], (<tuple>piece)[2])
        PyObject_GenericSetAttr(made, names[8], (<tuple>piece)[1])
        pieces[i] = made
    return pieces, repeats


try:
    from _blake2 import blake2b as _blake2b  # hashlib's, without OpenSSL: see indexer.py
except ImportError:  # _blake2 is CPython's private module: elsewhere hashlib's, the same digests
    from hashlib import blake2b as _blake2b

# `indexer._BLAKE2B_16`: copied for each key.
cdef object _BLAKE2B_16 = _blake2b(digest_size=16)


cdef inline str _decoded(bytes data):
    # indexer.decode: UTF-8, else Latin-1.
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def chunk_head(object open_file):
    """`indexer._chunk_head` of a file, its compiled twin: the key (`_digest(b"f",
    poster, prefix, N)`), name, subject (`_OpenFile.subject`), index and N that every
    chunk of it shares."""
    cdef bytes poster = open_file.poster
    cdef bytes prefix = open_file.prefix
    cdef bytes counter = open_file.counter
    cdef object total = open_file.total
    cdef object info = open_file.info  # a FileSubject (a tuple)
    cdef bytes number = str(total).encode()
    cdef Py_ssize_t a = PyBytes_GET_SIZE(poster), b = PyBytes_GET_SIZE(prefix)
    cdef Py_ssize_t c = PyBytes_GET_SIZE(number), width
    # b"f" b"\0" poster b"\0" prefix b"\0" N: what _digest hashes.
    cdef bytes joined = PyBytes_FromStringAndSize(NULL, 2 + a + 1 + b + 1 + c)
    cdef char *out = PyBytes_AS_STRING(joined)
    out[0] = b'f'
    out[1] = 0
    memcpy(out + 2, PyBytes_AS_STRING(poster), a)
    out[2 + a] = 0
    memcpy(out + 3 + a, PyBytes_AS_STRING(prefix), b)
    out[3 + a + b] = 0
    memcpy(out + 4 + a + b, PyBytes_AS_STRING(number), c)
    hasher = _BLAKE2B_16.copy()
    hasher.update(joined)
    width = counter.find(b"/") if counter.startswith(b"0") else 1
    return (
        hasher.digest(),
        (<tuple>info)[0],
        f"{_decoded(prefix)}({'1'.zfill(width)}/{total}){_decoded(open_file.tail)}",
        (<tuple>info)[2],
        total,
    )


# take()'s assembly of a release's chunks from its files' chunks (the compiled twin of
# `RangeIndexer._released`, its oracle): the groups of the release's Xref fields read
# in C, each pass's files sorted and its representative file chosen without a Python
# call per file, and each ReleaseChunk made as file_chunks makes a FileChunk.

# The fields of a ReleaseChunk, in the order of its __init__ (tests/test_fastindex.py
# holds the class to it): `released` sets them so.
_RELEASE_FIELDS = ("key", "head_name", "poster", "groups", "files_announced", "files", "dropped")

# `indexer._file_order` of a file without [i/M]: after every numbered one.
cdef object _UNNUMBERED = 1 << 30
# No head's name worked out yet (`released`).
cdef object _UNNAMED = object()
# `batch.UNDATED`: a file without a readable date sorts after every dated one.
cdef object _UNDATED = (1 << 63) - 1


cdef const char *_XREF = b"xref"


cdef inline bint _space(char c) noexcept nogil:
    # bytes.split()'s whitespace: ASCII space, \t, \n, \v, \f and \r.
    return c == b' ' or (b'\t' <= c <= b'\r')


cdef void _add_xref_groups(bytes rest, set names) except *:
    # The group names (bytes) of the Xref field in the rest of a line after "bytes"
    # (`_xref_groups(_xref_field(rest))`, its oracle, before decoding) added to `names`.
    cdef const char *s = PyBytes_AS_STRING(rest)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(rest)
    cdef Py_ssize_t at, end, start, colon, i
    cdef bint host = True
    at = _tab(s, 0, size)
    if at < 0:
        return
    at += 1
    end = _tab(s, at, size)
    if end < 0:
        end = size
    if end - at < 5:
        return
    for i in range(4):
        if s[at + i] | 0x20 != _XREF[i]:
            return
    if s[at + 4] != b':':
        return
    at += 5
    while at < end:
        while at < end and _space(s[at]):
            at += 1
        if at >= end:
            break
        start = at
        colon = -1
        while at < end and not _space(s[at]):
            if s[at] == b':':
                colon = at
            at += 1
        if host:
            host = False  # the first word names the server
        elif colon > start:
            names.add(PyBytes_FromStringAndSize(s + start, colon - start))


def xref_groups(list members):
    """`indexer._release_groups`' compiled twin: every group the members' Xref fields
    name, sorted, as a tuple."""
    cdef set names = set()
    cdef object member
    for member in members:
        _add_xref_groups(member.after_bytes, names)
    return tuple(sorted({_decoded(name) for name in names}))


def released(bytes release_key, list members, list found, tuple fallback, object chunk, object next_key):
    """`RangeIndexer._released`' compiled twin: the release's chunks from its files'
    chunks (`found`: each file's chunk of each pass, None where it has none, with the
    file), made of `chunk` (ReleaseChunk) with the fields set in order; a pass's
    groups those of the members' Xref fields, else `fallback`; each pass under the
    key `next_key` (`reposts.repost_key`) makes of the one before."""
    cdef list by_pass = []
    cdef list kept, order, released_chunks = []
    cdef tuple pair, groups, names = _RELEASE_FIELDS
    cdef Py_ssize_t number, i, best
    cdef object chunks, member, file, index, key = release_key, first, made
    cdef object best_order, order_of
    cdef object info, head = None, head_name = _UNNAMED
    for pair in found:
        chunks = pair[0]
        member = pair[1]
        for number in range(len(<list>chunks)):
            file = (<list>chunks)[number]
            if file is None:
                continue
            while len(by_pass) <= number:
                by_pass.append([])
            (<list>by_pass[number]).append((file, member))
    groups = xref_groups(members) or fallback
    for number in range(len(by_pass)):
        kept = by_pass[number]
        if kept:
            # The files by `_file_order`, stably (the place breaks ties, no file compared).
            order = []
            for i in range(len(kept)):
                file = (<tuple>kept[i])[0]
                index = file.index
                order.append((_UNNUMBERED if index is None else index, file.name, i, file))
            order.sort()
            # The earliest file by `representative_order`: min's first of equals.
            best = 0
            best_order = None
            for i in range(len(kept)):
                file = (<tuple>kept[i])[0]
                order_of = (file.posted or _UNDATED, file.key)
                if best_order is None or order_of < best_order:
                    best, best_order = i, order_of
            first = (<tuple>kept[best])[1]
            made = _alloc(chunk)
            PyObject_GenericSetAttr(made, names[0], key)
            # The head's name (FileSubject.head_name, a parse of the head): once for
            # the passes of a release whose representative files share a head.
            info = first.info
            if head_name is _UNNAMED or (<tuple>info)[1] != head:
                head = (<tuple>info)[1]
                head_name = info.head_name
            PyObject_GenericSetAttr(made, names[1], head_name)
            PyObject_GenericSetAttr(made, names[2], _decoded(first.poster))
            PyObject_GenericSetAttr(made, names[3], groups)
            PyObject_GenericSetAttr(made, names[4], first.info.files_announced)
            PyObject_GenericSetAttr(made, names[5], tuple([(<tuple>o)[3] for o in order]))
            PyObject_GenericSetAttr(made, names[6], None)
            released_chunks.append(made)
        if number + 1 < len(by_pass):  # (the pure path makes one more, unused)
            key = next_key(key)
    return released_chunks
