# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The RangeIndexer's hot paths, compiled: its per-line loop and take()'s file conversion.

Theory of operation
-------------------
This is the compiled twin of `RangeIndexer._scan` with `_add_segment`'s
opening of a file, of `_file_chunks`' quick path (core/indexer.py) and of
`reposts.pauses`, the deliberate oracle pairs: the pure-Python code stays as the reference
and the fallback, and tests/test_fastindex.py checks that both give the
same batches, byte for byte, on every generator profile, the real corpus
and fuzzed input.

`scan(data, fast, slow, opened, make)` walks `data` line by line with pointers, without a
Python object per line or per field. For each line it finds the tabs of the
first seven fields, the subject's last "(" and the "/" after it, and looks
the subject before that "(" up in `fast` (the indexer's dict of the file
each prefix last fed), first against the file the previous line went to:
consecutive lines are mostly segments of one file. When that file's poster
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
counts it as skipped. The file cache is dropped after each such line: both
change `fast`.

`file_segments(segments, N, ...)`, for take(), reads one file's buffer in
one pass and, when the file is the common case, gives its numbers and
sizes as arrays, its message-ids as one str (ASCII, made in place), its
first and last article number and its pauses (`_pauses`: no int per
segment); else None, and the pure code converts the file.

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
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_New
from libc.stdlib cimport qsort
from libc.string cimport memchr, memcmp, memcpy

import array as _array

from usenet_indexer.core.reposts import WIDE, wide_gap as _wide_gap

# The types of file_segments' arrays, cloned for each file.
cdef array.array _NUMBERS = _array.array("I")
cdef array.array _SIZES = _array.array("I")
# reposts.WIDE: a file of at most WIDE + 1 segments has no pause.
cdef Py_ssize_t _WIDE = WIDE

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


cdef void _add_first(
    const char **f, Py_ssize_t *n, const char *rest, Py_ssize_t rest_n, Py_ssize_t *where,
    dict opened, dict fast, object make,
) except *:
    # RangeIndexer._add_segment of a checked first segment (where: p, q, N, the
    # counter's "/"): to its file in `opened`, opened now if new; `fast` points
    # its prefix at it.
    cdef const char *subject = f[1]
    cdef Py_ssize_t p = where[0], q = where[1], slash = where[3], at
    cdef bytes prefix = PyBytes_FromStringAndSize(subject, p)
    cdef bytes poster = PyBytes_FromStringAndSize(f[2], n[2])
    cdef tuple key = (prefix, poster, where[2])
    cdef PyObject *found = PyDict_GetItem(opened, key)
    cdef object segments
    cdef object open_file
    cdef char *buffer
    if found == NULL:
        segments = PyByteArray_FromStringAndSize(NULL, 0)
    else:
        open_file = <object>found
        segments = open_file.segments
    # k, number, date, message-id, bytes: each followed by a tab.
    at = PyByteArray_GET_SIZE(segments)
    PyByteArray_Resize(segments, at + (slash - p - 1) + n[0] + n[3] + n[4] + n[6] + 5)
    buffer = PyByteArray_AS_STRING(segments)
    _put(buffer, &at, subject + p + 1, slash - p - 1)
    _put(buffer, &at, f[0], n[0])
    _put(buffer, &at, f[3], n[3])
    _put(buffer, &at, f[4], n[4])
    _put(buffer, &at, f[6], n[6])
    if found == NULL:
        open_file = make(
            poster,
            prefix,
            PyBytes_FromStringAndSize(subject + slash + 1, n[1] - slash - 1),  # "N) tail"
            where[2],
            PyBytes_FromStringAndSize(subject + p + 1, q - p - 1),  # "k/N"
            PyBytes_FromStringAndSize(subject + q + 1, n[1] - q - 1),  # the tail
            PyBytes_FromStringAndSize(f[3], n[3]),  # date
            PyBytes_FromStringAndSize(rest, rest_n),  # lines, Xref, ...
            segments,
            _says_yenc(subject, n[1]),
        )
        opened[key] = open_file
    fast[prefix] = open_file


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
        make: the open file's class (`indexer._OpenFile`).
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
    cdef Py_ssize_t start = 0, end, length, i, tabs, p, slash, at, grown
    cdef const char *line
    cdef const char *nl
    cdef const char *f[FIELDS]
    cdef Py_ssize_t n[FIELDS]
    cdef const char *subject
    cdef Py_ssize_t subject_n, prefix_n, k_n, after_n
    cdef const char *after
    cdef long lines = 0, nul = 0
    cdef PyObject *found
    cdef object open_file = None  # the file the cache holds, or None
    cdef object cached_prefix = None
    cdef object poster = None
    cdef object file_after = None
    cdef object segments = None
    cdef bint yenc = False
    cdef bint took
    cdef char *buffer
    cdef object prefix
    cdef object fields
    cdef long long limit[4]
    cdef Py_ssize_t where[4]
    cdef bint eight
    cdef Py_ssize_t rest = 0  # where the fields after "bytes" start
    for i in range(4):
        limit[i] = limits[i]
    while start <= size:
        nl = <const char *>memchr(base + start, b'\n', size - start)
        end = size if nl == NULL else nl - base
        line = base + start
        length = end - start
        start = end + 1
        if length == 0:
            continue
        lines += 1
        if memchr(line, 0, length) != NULL:
            nul += 1
            continue
        took = False
        # The first seven fields; the seventh ("bytes") ends at a tab or the line's end.
        tabs = 0
        p = 0
        eight = False
        for i in range(length):
            if line[i] == b'\t':
                f[tabs] = line + p
                n[tabs] = i - p
                p = i + 1
                tabs += 1
                if tabs == FIELDS:
                    eight = True
                    rest = p
                    break
        if tabs == FIELDS - 1:
            f[tabs] = line + p
            n[tabs] = length - p
            tabs += 1
        if tabs == FIELDS:
            subject = f[1]
            subject_n = n[1]
            # rpartition(b"("): the prefix before the last "(" (all of it is
            # "rest" when there is none), then partition(b"/") of the rest.
            p = subject_n - 1
            while p >= 0 and subject[p] != b'(':
                p -= 1
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
            if open_file is None or not _same(cached_prefix, subject, prefix_n):
                prefix = PyBytes_FromStringAndSize(subject, prefix_n)
                found = PyDict_GetItem(fast, prefix)
                if found == NULL:
                    open_file = None
                else:
                    open_file = <object>found
                    cached_prefix = prefix
                    poster = open_file.poster
                    file_after = open_file.after
                    segments = open_file.segments
                    yenc = open_file.yenc
            if (
                open_file is not None
                and _same(poster, f[2], n[2])
                and _same(file_after, after, after_n)
                and (n[5] == 0 or yenc)
                and _digits(f[0], n[0])
            ):
                # k, number, date, message-id, bytes: each followed by a tab.
                at = PyByteArray_GET_SIZE(segments)
                grown = at + k_n + n[0] + n[3] + n[4] + n[6] + 5
                PyByteArray_Resize(segments, grown)
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
                _add_first(f, n, line + rest, length - rest, where, opened, fast, make)
            else:
                slow(PyBytes_FromStringAndSize(line, length).split(b"\t", FIELDS))
            open_file = None
    return lines, nul


# A file's segments converted for take() (RangeIndexer._common_release): the
# compiled twin of `_OpenFile.lists` followed by `_file_chunks`' quick path.

# Article numbers past this go to the pure path (Python ints have no bound).
cdef long long ARTICLE_CAP = 1LL << 62


cdef int _ascending(const void *a, const void *b) noexcept nogil:
    cdef long long x = (<const long long *>a)[0], y = (<const long long *>b)[0]
    return (x > y) - (x < y)


cdef inline Py_ssize_t _tab(const char *s, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    # The next tab at or after start (memchr: the fields of a buffer run to a tab).
    cdef const char *found = <const char *>memchr(s + start, b'\t', end - start)
    return -1 if found == NULL else found - s


cdef inline Py_ssize_t _tabs(const char *s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t at = 0, found = 0
    while True:
        at = _tab(s, at, n)
        if at < 0:
            return found
        found += 1
        at += 1


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


def file_segments(bytearray segments, long long total, Py_ssize_t max_message_id, long long shuffle):
    """A file's segments as take() converts them in the common case, or None.

    The common case is `_file_chunks`' quick one: every k is ASCII digits
    (zero padding allowed) within 1..N and none repeats, every message-id
    is "<" + ASCII text without angle brackets + ">" of at most
    `max_message_id` bytes, every size is ASCII digits within uint32, every
    article number digits below 2**62; and the numbers never fall more than
    min(`shuffle`, N // 2) below the highest before them (else the file may
    start over: `reposts.starts_over`). Anything else is None: the caller
    converts the file in Python (`_file_chunks`), which sorts it out.

    Args:
        segments: the file's buffer (`_OpenFile.segments`): k, article
            number, date, message-id and bytes of each segment, each
            followed by a tab.
        total: the file's N.

    Returns:
        (numbers, sizes, message_ids, first, last, pauses): the numbers
        ascending (array "I"), the sizes by number (array "I"), the
        message-ids by number without brackets, joined by "\\n" (a str, as
        `indexer.decode` gives it); the first and the last article number
        in the order the lines came, and the file's pauses there
        (`reposts.pauses`).
    """
    cdef const char *s = PyByteArray_AS_STRING(segments)
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(segments)
    cdef Py_ssize_t count = _tabs(s, size) // 5
    cdef Py_ssize_t at = 0, i, j, tab, n, mids = 0
    cdef long long value, k, highest = 0
    cdef long long window = min(shuffle, total // 2)
    cdef bint ascending = True
    cdef array.array numbers, sizes
    cdef str message_ids
    cdef char *out
    cdef Py_ssize_t *where = NULL  # each message-id's start
    cdef long long *order = NULL  # k << 32 | i, sorted when the lines came out of order
    cdef long long *articles = NULL  # in the order the lines came
    if count == 0 or count > total:
        return None
    numbers = array.clone(_NUMBERS, count, zero=False)
    sizes = array.clone(_SIZES, count, zero=False)
    where = <Py_ssize_t *>PyMem_Malloc(count * sizeof(Py_ssize_t))
    order = <long long *>PyMem_Malloc(count * sizeof(long long))
    articles = <long long *>PyMem_Malloc(count * sizeof(long long))
    if where == NULL or order == NULL or articles == NULL:
        PyMem_Free(where)
        PyMem_Free(order)
        PyMem_Free(articles)
        raise MemoryError()
    try:
        # Every field checked and read; the message-ids' places noted.
        for i in range(count):
            tab = _tab(s, at, size)  # k
            n = tab - at
            if not _digits(s + at, n):
                return None
            k = _number(s + at, n)
            if not 0 < k <= total:
                return None
            if k <= highest:
                ascending = False
                if highest - k > window:
                    return None
            else:
                highest = k
            order[i] = (k << 32) | i
            at = tab + 1
            tab = _tab(s, at, size)  # article number
            n = tab - at
            if not _digits(s + at, n):
                return None
            value = 0
            for j in range(n):
                # Checked before the step: value * 10 of a 20-digit number
                # overflows 64 bits (2**64 read as 0 would pass the cap).
                if value > (ARTICLE_CAP - 1 - (s[at + j] - 48)) // 10:
                    return None
                value = value * 10 + (s[at + j] - 48)
            articles[i] = value
            at = _tab(s, tab + 1, size) + 1  # past the date
            tab = _tab(s, at, size)  # message-id
            n = tab - at
            if not (2 <= n <= max_message_id and s[at] == b'<' and s[tab - 1] == b'>'):
                return None
            if memchr(s + at + 1, b'<', n - 2) != NULL or memchr(s + at + 1, b'>', n - 2) != NULL:
                return None
            for j in range(at + 1, tab - 1):
                if <unsigned char>s[j] > 127:
                    return None  # decode() reads it: the pure path
            where[i] = at
            mids += n - 2
            at = tab + 1
            tab = _tab(s, at, size)  # bytes
            n = tab - at
            if not _digits(s + at, n):
                return None
            value = _number(s + at, n)
            if value > 0xFFFFFFFF:
                return None
            sizes.data.as_uints[i] = <unsigned int>value
            at = tab + 1
        if not ascending:
            qsort(order, count, sizeof(long long), _ascending)
            for i in range(1, count):
                if order[i] >> 32 == order[i - 1] >> 32:
                    return None  # a number repeats
        # By number: the numbers, the sizes and the message-ids without
        # brackets (ASCII: a str of one byte a character, filled in place).
        message_ids = PyUnicode_New(mids + count - 1, 127)
        out = <char *>PyUnicode_DATA(message_ids)
        j = 0
        for i in range(count):
            numbers.data.as_uints[i] = <unsigned int>(order[i] >> 32)
            at = where[order[i] & 0xFFFFFFFF]
            n = _tab(s, at, size) - at - 2
            memcpy(out + j, s + at + 1, n)
            j += n
            if i + 1 < count:
                out[j] = b'\n'
                j += 1
        if not ascending:
            for i in range(count):
                order[i] = sizes.data.as_uints[order[i] & 0xFFFFFFFF]
            for i in range(count):
                sizes.data.as_uints[i] = <unsigned int>order[i]
        return (
            numbers, sizes, message_ids, articles[0], articles[count - 1], _pauses(articles, count)
        )
    finally:
        PyMem_Free(where)
        PyMem_Free(order)
        PyMem_Free(articles)
