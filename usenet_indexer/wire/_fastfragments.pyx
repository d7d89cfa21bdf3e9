# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""A packed fragment's files, compiled: the inflated bytes in, FileChunks out.

Theory of operation
-------------------
This is the compiled twin of `fragments._files` (wire/fragments.py), the
deliberate oracle pair: the pure code stays as the reference and the
fallback, and tests/test_fastfragments.py checks that both give the same
files, field for field, for generated releases, the real corpus and fuzzed
fragments (broken ones included).

`files(raw, chunk, max_files, max_segments)` reads the layout that
fragments.py's docstring describes with pointers: the file entries, the
numbers' and sizes' byte planes put back together straight into each
file's arrays, the message-id columns turned back into "\\n"-joined rows
in one C buffer, and each name, subject and file's ids decoded from their
bytes (UTF-8, lone surrogates passed, as the pure code decodes them).
Each FileChunk is set field by field as its attrs __init__ would (no Python call per
file); nothing is made per segment.

It checks nothing it cannot give back exactly: whenever the fragment is
not one the pure code unpacks without an error (counts past their caps or
past the data, message-ids not matching their counts, text that is not
UTF-8), it returns None and the caller runs the pure code, which raises
the error with its message. No state lives here between calls.

`facts(raw, max_text_chars, ...)` is the compiled twin of `fragments._facts`,
the checks of a fragment a node sent (a second oracle pair, its tests in
tests/test_fastwire.py). It walks the file entries, segment numbers and
sizes (byte planes), message-ids and texts with pointers, making no Python
object per segment or per file, and only ever answers for a fragment that
passes every check of `_facts` and whose column-wise message-ids (if any)
are ASCII: then it returns the same figures `_facts` would. Names, subjects
and "\\n"-joined message-ids may be any UTF-8: `_utf8_chars` checks it as
Python's strict decoder does (no overlong forms, no surrogates, nothing
above U+10FFFF) and counts the characters. For anything else it returns
None and the pure function decides, so every refusal's message is the pure
one's. The limits are passed in (the pure module holds them once).

`ReleaseChecks.check(wire, budget)` is the compiled twin of batchwire's
`_release` (a third pair, its tests in tests/test_fastwire.py): one release
map of a batch body, its fields, texts and groups checked on the objects
msgpack made, its fragment decompressed (one zstd frame that says its size)
and checked by the same walk as `facts` (`_figures`), the PackedRelease set
field by field. It answers only for a release the pure code accepts, with
the values the pure code gives; anything else is None and the pure code
decides and words the refusal. It was 7 of the 21 us a release cost the
coordinator's intake (the Python calls and objects between the checks).
"""

from cpython.array cimport array, clone
from cpython.dict cimport PyDict_GetItem
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject_GenericSetAttr
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp, memcpy

from usenet_indexer.core._ascii cimport ascii_only

from zstandard import CONTENTSIZE_UNKNOWN, ZstdError, get_frame_parameters

# The head (file count, id width) and one file's entry, as fragments.py packs them.
cdef enum:
    HEAD = 8
    ENTRY = 44

cdef array _U32 = array("I")


cdef inline uint32_t _u32(const uint8_t *p) noexcept nogil:
    return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline int64_t _i64(const uint8_t *p) noexcept nogil:
    cdef uint64_t low = _u32(p)
    cdef uint64_t high = _u32(p + 4)
    return <int64_t>(low | (high << 32))


cdef array _unplanes(const uint8_t *planes, Py_ssize_t count):
    """The u32 values of 4 byte planes (fragments._planes), in their order."""
    cdef array values = clone(_U32, count, False)
    cdef uint32_t *out = values.data.as_uints
    cdef Py_ssize_t i
    for i in range(count):
        out[i] = (
            planes[i]
            | (<uint32_t>planes[count + i] << 8)
            | (<uint32_t>planes[2 * count + i] << 16)
            | (<uint32_t>planes[3 * count + i] << 24)
        )
    return values


cdef array _part(array values, Py_ssize_t start, Py_ssize_t n):
    """values[start:start + n], as a new array."""
    cdef array part = clone(_U32, n, False)
    if n:
        memcpy(part.data.as_uints, values.data.as_uints + start, n * sizeof(uint32_t))
    return part


cdef inline str _text(const char *at, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(at, n, "surrogatepass")


def files(bytes raw, object chunk, Py_ssize_t max_files, Py_ssize_t max_segments):
    """The files of an inflated fragment as `chunk`s (FileChunk), or None when the pure
    code would raise (it says why)."""
    cdef const uint8_t *p = <const uint8_t *>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(raw)
    cdef Py_ssize_t count, width, at, i, total = 0, texts = 0, ids_end, length
    cdef const uint8_t *entry
    if size < HEAD:
        return None
    count = _u32(p)
    width = _u32(p + 4)
    at = HEAD + ENTRY * count
    if count > max_files or size < at:
        return None
    for i in range(count):
        entry = p + HEAD + ENTRY * i
        total += _u32(entry + 16)
        texts += <Py_ssize_t>_u32(entry + 36) + <Py_ssize_t>_u32(entry + 40)
    if total > max_segments or size < at + 8 * total + texts:
        return None
    cdef array numbers = _unplanes(p + at, total)
    cdef array sizes = _unplanes(p + at + 4 * total, total)
    at += 8 * total
    ids_end = size - texts
    length = ids_end - at
    if width:
        if total < 2 or length != width * total or memchr(p + at, b"\n", length) != NULL:
            return None
        return _made(p, count, width, total, at, ids_end, numbers, sizes, chunk)
    if (_newlines(p + at, length) + 1 if total else length) != total:
        return None
    return _made(p, count, 0, total, at, ids_end, numbers, sizes, chunk)


cdef Py_ssize_t _newlines(const uint8_t *at, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i, found = 0
    for i in range(n):
        found += at[i] == b"\n"
    return found


cdef object _made(
    const uint8_t *p,
    Py_ssize_t count,
    Py_ssize_t width,
    Py_ssize_t total,
    Py_ssize_t ids_at,
    Py_ssize_t ids_end,
    array numbers,
    array sizes,
    object chunk,
):
    """The files, the counts checked; None when a text is not UTF-8."""
    cdef Py_ssize_t stride = width + 1, i, j, k, n, start = 0, text_at = ids_end
    cdef Py_ssize_t name_bytes, subject_bytes, index, end
    cdef const uint8_t *entry
    cdef const uint8_t *ids = p + ids_at
    cdef uint8_t *rows = NULL
    cdef const char *cursor
    cdef const char *stop
    cdef const char *found
    cdef const char *ids_stop = <const char *>(p + ids_end)
    cdef list made = []
    cdef object new = chunk.__new__, file
    if width:
        # The columns back as "\n"-joined rows (the last "\n" is not used).
        rows = <uint8_t *>PyMem_Malloc(stride * total)
        if rows == NULL:
            raise MemoryError()
        for j in range(width):
            for k in range(total):
                rows[k * stride + j] = ids[j * total + k]
        for k in range(total):
            rows[k * stride + width] = b"\n"
    cursor = <const char *>ids
    try:
        for i in range(count):
            entry = p + HEAD + ENTRY * i
            n = _u32(entry + 16)
            index = _u32(entry + 20)
            name_bytes = _u32(entry + 36)
            subject_bytes = _u32(entry + 40)
            name = _text(<const char *>(p + text_at), name_bytes)
            subject = _text(<const char *>(p + text_at + name_bytes), subject_bytes)
            text_at += name_bytes + subject_bytes
            if not n:
                message_ids = ""
            elif width:
                message_ids = _text(<const char *>(rows + start * stride), n * stride - 1)
            else:
                # n ids from the cursor: up to the n-th "\n" (or the end).
                stop = cursor
                for k in range(n):
                    end = ids_stop - stop
                    found = <const char *>memchr(stop, b"\n", end)
                    if found == NULL:
                        stop = ids_stop
                        break
                    stop = found + (1 if k < n - 1 else 0)
                message_ids = _text(cursor, stop - cursor)
                cursor = stop + 1 if stop < ids_stop else stop
            # A FileChunk as its __init__ makes it (a frozen attrs class without
            # validators or converters: each field set once), without a Python call.
            file = new(chunk)
            PyObject_GenericSetAttr(file, "key", PyBytes_FromStringAndSize(<const char *>entry, 16))
            PyObject_GenericSetAttr(file, "name", name)
            PyObject_GenericSetAttr(file, "subject", subject)
            PyObject_GenericSetAttr(file, "index", index - 1 if index else None)
            PyObject_GenericSetAttr(file, "total_segments", _u32(entry + 24))
            PyObject_GenericSetAttr(file, "posted", _i64(entry + 28))
            PyObject_GenericSetAttr(file, "numbers", _part(numbers, start, n))
            PyObject_GenericSetAttr(file, "message_ids", message_ids)
            PyObject_GenericSetAttr(file, "sizes", _part(sizes, start, n))
            made.append(file)
            start += n
    except UnicodeDecodeError:
        return None
    finally:
        PyMem_Free(rows)
    return made


# --- the checks of a fragment a node sent (fragments._facts) --------------------------

cdef inline uint32_t _planed(const unsigned char *planes, Py_ssize_t count, Py_ssize_t j) noexcept nogil:
    """Value j of `count` u32s stored as 4 byte planes (every low byte first)."""
    return (
        planes[j]
        | (<uint32_t>planes[count + j] << 8)
        | (<uint32_t>planes[2 * count + j] << 16)
        | (<uint32_t>planes[3 * count + j] << 24)
    )


cdef Py_ssize_t _utf8_chars(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """The characters in `n` bytes of strict UTF-8; -1 when they are not (or hold a NUL)."""
    cdef Py_ssize_t i = 0, chars = 0, follow
    cdef unsigned char c, low, high
    while i < n:
        c = s[i]
        i += 1
        chars += 1
        if c < 0x80:
            if c == 0:
                return -1
            continue
        low, high = 0x80, 0xBF  # the range of the first continuation byte
        if 0xC2 <= c <= 0xDF:
            follow = 1
        elif c == 0xE0:
            follow, low = 2, 0xA0  # no overlong three-byte form
        elif 0xE1 <= c <= 0xEC or c == 0xEE or c == 0xEF:
            follow = 2
        elif c == 0xED:
            follow, high = 2, 0x9F  # no surrogates
        elif c == 0xF0:
            follow, low = 3, 0x90  # no overlong four-byte form
        elif 0xF1 <= c <= 0xF3:
            follow = 3
        elif c == 0xF4:
            follow, high = 3, 0x8F  # nothing above U+10FFFF
        else:
            return -1
        if i + follow > n or not low <= s[i] <= high:
            return -1
        i += 1
        follow -= 1
        while follow:
            if not 0x80 <= s[i] <= 0xBF:
                return -1
            i += 1
            follow -= 1
    return chars


cdef Py_ssize_t _chars(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """`_utf8_chars`, with the ASCII case (nearly every text) in two fast scans."""
    if ascii_only(s, n):
        return -1 if memchr(s, 0, n) != NULL else n
    return _utf8_chars(s, n)


cdef bint _plain_ids(const unsigned char *ids, Py_ssize_t length, Py_ssize_t count,
                     Py_ssize_t width, Py_ssize_t cap) noexcept nogil:
    """The message-ids are well formed (see `_check_ids`): column-wise ones ASCII,
    "\n"-joined ones strict UTF-8 (their lengths are in bytes, as `_check_ids` counts)."""
    cdef Py_ssize_t start, end, separators = 0
    cdef const unsigned char *found
    cdef unsigned char forbidden
    for forbidden in b"<>\x00\r\t":
        if memchr(ids, forbidden, length) != NULL:
            return False
    if width:
        if count < 2 or length != width * count or width > cap:
            return False
        return memchr(ids, 10, length) == NULL and ascii_only(ids, length)
    start = 0
    while True:
        found = <const unsigned char *>memchr(ids + start, 10, length - start)
        end = length if found == NULL else found - ids
        if end == start or end - start > cap:  # an empty id, or one over the cap
            return False
        if found == NULL:
            break
        separators += 1
        start = end + 1
    if separators != count - 1:
        return False
    return ascii_only(ids, length) or _utf8_chars(ids, length) >= 0


cdef struct Figures:
    # What `_figures` finds in a fragment that passes every check (fragments.Facts).
    Py_ssize_t files
    Py_ssize_t segments
    uint64_t bytes
    int64_t posted
    int64_t latest
    int64_t order  # the representative's date (undated: `undated`)
    Py_ssize_t best  # the representative's file entry


cdef struct Caps:
    # A fragment's caps, passed in: the pure modules hold them once.
    Py_ssize_t max_text_chars
    Py_ssize_t max_files
    Py_ssize_t max_segments
    Py_ssize_t max_total_segments
    Py_ssize_t max_file_index
    int64_t undated


cdef int _figures(const unsigned char *p, Py_ssize_t length, const Caps *caps,
                  Figures *out) except -1:
    """1 with `out` filled for a fragment's inflated bytes that pass every check of
    `fragments._facts`; 0 when the pure `_facts` must decide."""
    cdef const unsigned char *entry
    cdef const unsigned char *numbers
    cdef const unsigned char *sizes
    cdef Py_ssize_t count, width, at, i, j, k, n, start, total = 0, text = 0, ids_end
    cdef Py_ssize_t name_bytes, subject_bytes, chars
    cdef uint32_t index, total_segments, first, last, previous, value
    cdef int64_t posted, earliest = 0, latest = 0, order, best_order = 0
    cdef bint dated = False
    cdef uint64_t byte_sum = 0
    cdef Py_ssize_t best = 0
    if length < HEAD:
        return 0
    count = _u32(p)
    width = _u32(p + 4)
    at = HEAD + ENTRY * count
    if count < 1 or count > caps.max_files or length < at:
        return 0
    for i in range(count):
        entry = p + HEAD + ENTRY * i
        n = _u32(entry + 16)
        index = _u32(entry + 20)
        total_segments = _u32(entry + 24)
        if n < 1 or total_segments < 1 or total_segments > caps.max_total_segments:
            return 0
        if index > caps.max_file_index + 1:
            return 0
        total += n
        name_bytes = _u32(entry + 36)
        subject_bytes = _u32(entry + 40)
        text += name_bytes + subject_bytes
    ids_end = length - text
    if total > caps.max_segments or ids_end < at + 8 * total:
        return 0
    # File keys unique: pairwise for the usual handful of files, a set beyond.
    if count <= 64:
        for i in range(1, count):
            entry = p + HEAD + ENTRY * i
            for j in range(i):
                if memcmp(entry, p + HEAD + ENTRY * j, 16) == 0:
                    return 0
    elif len({
        PyBytes_FromStringAndSize(<const char *>(p + HEAD + ENTRY * i), 16) for i in range(count)
    }) != count:
        return 0
    numbers = p + at
    sizes = p + at + 4 * total
    start = 0
    for i in range(count):
        entry = p + HEAD + ENTRY * i
        n = _u32(entry + 16)
        total_segments = _u32(entry + 24)
        first = _planed(numbers, total, start)
        if first < 1:
            return 0
        previous = first
        for k in range(start + 1, start + n):
            value = _planed(numbers, total, k)
            if value <= previous:
                return 0
            previous = value
        if previous > total_segments:
            return 0
        for k in range(start, start + n):
            byte_sum += _planed(sizes, total, k)
        posted = _i64(entry + 28)
        if posted:
            if not dated or posted < earliest:
                earliest = posted
            if not dated or posted > latest:
                latest = posted
            dated = True
        order = posted if posted else caps.undated
        if i == 0 or order < best_order or (
            order == best_order and memcmp(entry, p + HEAD + ENTRY * best, 16) < 0
        ):
            best_order = order
            best = i
        start += n
    if not _plain_ids(p + at + 8 * total, ids_end - (at + 8 * total), total, width,
                      caps.max_text_chars):
        return 0
    at = ids_end
    for i in range(count):
        entry = p + HEAD + ENTRY * i
        for k in range(2):
            n = _u32(entry + 36 + 4 * k)  # the name's bytes, then the subject's
            if n > 4 * caps.max_text_chars:  # more than the longest text could take
                return 0
            chars = _chars(p + at, n)
            if chars < 0 or chars > caps.max_text_chars:
                return 0
            at += n
    out.files = count
    out.segments = total
    out.bytes = byte_sum
    out.posted = earliest
    out.latest = latest
    out.order = best_order
    out.best = best
    return 1


cdef inline bytes _file_key(const unsigned char *p, Py_ssize_t i):
    return PyBytes_FromStringAndSize(<const char *>(p + HEAD + ENTRY * i), 16)


def facts(const unsigned char[::1] raw, Py_ssize_t max_text_chars, Py_ssize_t max_files,
          Py_ssize_t max_segments, Py_ssize_t max_total_segments, Py_ssize_t max_file_index,
          int64_t undated):
    """(files, segments, bytes, posted, latest, (representative date, key)) of a
    fragment's inflated bytes; None when the pure `_facts` must decide.

    Args:
        raw: the inflated fragment.
        max_text_chars: the longest name, subject or message-id.
        max_files, max_segments: a fragment's caps (fragments.MAX_FILES, MAX_SEGMENTS).
        max_total_segments, max_file_index: the subject parser's caps on N and i.
        undated: batch.UNDATED (the representative date of an undated file).
    """
    cdef Caps caps = Caps(max_text_chars, max_files, max_segments, max_total_segments,
                          max_file_index, undated)
    cdef Figures found
    cdef const unsigned char *p = &raw[0] if raw.shape[0] else NULL
    if not _figures(p, raw.shape[0], &caps, &found):
        return None
    return (found.files, found.segments, found.bytes, found.posted, found.latest,
            (found.order, _file_key(p, found.best)))


cdef extern from "Python.h":
    Py_ssize_t Py_SIZE(object)
    bint PyUnicode_IS_ASCII(object)
    void *PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)


cdef inline Py_ssize_t _text_length(object text):
    # The bytes of an ASCII str, or of bytes.
    return PyUnicode_GET_LENGTH(text) if type(text) is str else PyBytes_GET_SIZE(text)


cdef inline void _put_u32(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = v & 0xFF
    p[1] = (v >> 8) & 0xFF
    p[2] = (v >> 16) & 0xFF
    p[3] = (v >> 24) & 0xFF


cdef inline bint _u32_int(object value) noexcept:
    # An int (not a bool) that struct's "I" packs as it is.
    return type(value) is int and 0 <= value <= 0xFFFFFFFF


cdef inline bint _u32_array(object values) noexcept:
    # An array of 4-byte unsigned ints, whose bytes `array.tobytes` gives.
    return type(values) is array and (<array>values).ob_descr.typecode == 73 and (  # "I"
        (<array>values).ob_descr.itemsize == 4
    )


# The range of struct's "q".
_I64_MIN = -(2 ** 63)
_I64_MAX = 2 ** 63 - 1


def packed(object files):
    """The bytes `fragments.pack` deflates, for `files` (FileChunks, a list or tuple),
    or None where the pure code must make them (message-ids that are not
    ASCII, a field struct would refuse or pad, arrays of another type or of
    unequal lengths): the compiled twin of `fragments._packed`.

    Every object measured in the first pass (keys, arrays, ids, texts) is
    kept and written from, and each array's length is checked again right
    before its values are copied (no Python code runs between the two): a
    file changed meanwhile (a finalizer run by a collection) gives None, never
    a write past the end.
    """
    cdef Py_ssize_t n, i, r, c, count = 0, texts = 0, ids_length = 0, with_ids = 0
    cdef Py_ssize_t size, at, width, stride, seg, length, planes_at
    cdef object f, value, ids, index
    cdef array numbers, sizes
    cdef tuple one
    cdef bytes out
    cdef uint8_t *p
    cdef const uint8_t *src
    cdef uint8_t *row_buffer = NULL
    cdef uint32_t v
    cdef uint64_t posted
    # Per file: key, numbers, sizes, segments, ids (None without segments), index
    # as packed (0: none), total, posted, name and subject (an ASCII str, else UTF-8).
    cdef list kept = []
    if type(files) is not list and type(files) is not tuple:
        return None
    # Pass 1: sizes, and everything the pure code would encode differently or refuse.
    for f in files:
        value = f.key
        if type(value) is not bytes or PyBytes_GET_SIZE(value) != 16:
            return None
        numbers_obj = f.numbers
        sizes_obj = f.sizes
        if not (_u32_array(numbers_obj) and _u32_array(sizes_obj)):
            return None
        seg = len(numbers_obj)
        if len(sizes_obj) != seg:
            return None  # (the pure code packs them as they are: its layout, not this one's)
        index = f.index
        if index is None:
            index = 0
        elif type(index) is int and 0 <= index < 0xFFFFFFFF:
            index = index + 1
        else:
            return None
        total = f.total_segments
        if not _u32_int(total):
            return None
        when = f.posted
        if not (type(when) is int and _I64_MIN <= when <= _I64_MAX):
            return None
        name = f.name
        subject = f.subject
        if type(name) is not str or type(subject) is not str:
            return None
        if not PyUnicode_IS_ASCII(name):
            name = name.encode("utf-8", "surrogatepass")  # (bytes: not ASCII)
        if not PyUnicode_IS_ASCII(subject):
            subject = subject.encode("utf-8", "surrogatepass")
        if _text_length(name) > 0xFFFFFFFF or _text_length(subject) > 0xFFFFFFFF:
            return None
        texts += _text_length(name) + _text_length(subject)
        ids = None
        if seg:
            ids = f.message_ids
            if type(ids) is not str or not PyUnicode_IS_ASCII(ids):
                return None
            ids_length += PyUnicode_GET_LENGTH(ids)
            with_ids += 1
        count += seg
        kept.append((value, numbers_obj, sizes_obj, seg, ids, index, total, when, name, subject))
    n = len(kept)
    if n > 0xFFFFFFFF or count > 0xFFFFFFFF:
        return None
    if with_ids > 1:
        ids_length += with_ids - 1
    # The "\n"-joined ids, gathered once (the column check reads them as joined).
    row_buffer = <uint8_t *>PyMem_Malloc(ids_length + 1)
    if row_buffer == NULL:
        raise MemoryError()
    try:
        at = 0
        r = 0  # the ids joined so far
        for one in kept:
            ids = one[4]
            if ids is not None:
                if r:
                    row_buffer[at] = 10
                    at += 1
                r += 1
                length = PyUnicode_GET_LENGTH(ids)  # (a str: its length cannot change)
                memcpy(row_buffer + at, PyUnicode_DATA(ids), length)
                at += length
        # fragments._columns: every id W bytes long, stored column-wise.
        width = 0
        if count >= 2:
            src = <const uint8_t *>memchr(row_buffer, 10, ids_length)
            width = -1 if src == NULL else src - row_buffer
            stride = width + 1
            if width < 1 or ids_length != count * stride - 1:
                width = 0
            else:
                for r in range(count - 1):
                    if row_buffer[width + r * stride] != 10:
                        width = 0
                        break
        if width > 0xFFFFFFFF:
            return None
        size = HEAD + ENTRY * n + 8 * count + (width * count if width else ids_length) + texts
        out = PyBytes_FromStringAndSize(NULL, size)
        p = <uint8_t *>PyBytes_AS_STRING(out)
        _put_u32(p, <uint32_t>n)
        _put_u32(p + 4, <uint32_t>width)
        at = HEAD
        planes_at = HEAD + ENTRY * n
        seg = 0
        for one in kept:
            memcpy(p + at, PyBytes_AS_STRING(one[0]), 16)
            numbers = one[1]
            sizes = one[2]
            length = one[3]
            _put_u32(p + at + 16, <uint32_t>length)
            _put_u32(p + at + 20, <uint32_t>(<uint64_t>one[5]))
            _put_u32(p + at + 24, <uint32_t>(<uint64_t>one[6]))
            posted = <uint64_t>(<int64_t>one[7])
            _put_u32(p + at + 28, <uint32_t>posted)
            _put_u32(p + at + 32, <uint32_t>(posted >> 32))
            _put_u32(p + at + 36, <uint32_t>_text_length(one[8]))
            _put_u32(p + at + 40, <uint32_t>_text_length(one[9]))
            at += ENTRY
            # Measured in pass 1; an array changed since (by a finalizer) is not written.
            if Py_SIZE(numbers) != length or Py_SIZE(sizes) != length:
                return None
            # The numbers' and the sizes' byte planes (fragments._planes).
            for r in range(length):
                v = numbers.data.as_uints[r]
                for c in range(4):
                    p[planes_at + c * count + seg + r] = (v >> (8 * c)) & 0xFF
            for r in range(length):
                v = sizes.data.as_uints[r]
                for c in range(4):
                    p[planes_at + 4 * count + c * count + seg + r] = (v >> (8 * c)) & 0xFF
            seg += length
        at = planes_at + 8 * count
        if width:
            stride = width + 1
            for c in range(width):
                for r in range(count):
                    p[at + r] = row_buffer[r * stride + c]
                at += count
        else:
            memcpy(p + at, row_buffer, ids_length)
            at += ids_length
        for one in kept:
            for value in (one[8], one[9]):
                length = _text_length(value)
                if type(value) is str:
                    memcpy(p + at, PyUnicode_DATA(value), length)
                else:
                    memcpy(p + at, PyBytes_AS_STRING(value), length)
                at += length
        return out
    finally:
        PyMem_Free(row_buffer)


# --- the checks of a release chunk a node sent (batchwire._release) -------------------

cdef extern from "Python.h":
    Py_ssize_t PyUnicode_FindChar(object, Py_UCS4, Py_ssize_t, Py_ssize_t, int) except -2
    Py_ssize_t PyDict_Size(object)

# The version byte of a fragment that is one zstd frame (fragments.VERSION).
cdef enum:
    ZSTD_FRAGMENT = 3
    RELEASE_FIELDS = 7


cdef inline bint _text_ok(object text, Py_ssize_t cap) except -1:
    # batchwire._check_text: at most `cap` characters, no NUL.
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    return n <= cap and PyUnicode_FindChar(text, 0, 0, n, 1) == -1


cdef inline object _field(dict wire, str name):
    cdef PyObject *value = PyDict_GetItem(wire, name)
    if value == NULL:
        raise KeyError(name)
    return <object>value


cdef class ReleaseChecks:
    """The compiled twin of batchwire._release: a release chunk of a batch body,
    checked, as a PackedRelease, made in one call.

    `check(wire, budget)` answers only for a release that passes every check of
    the pure `_release` (its map, texts, groups, key and files announced; its
    fragment one zstd frame that says its size, within `budget`, with nothing
    after it, and inflating to what `_figures` answers for) with the values
    `_release` returns: (the PackedRelease, the bytes its fragment inflated to).
    Anything else (a version 2 fragment included) is None, and the pure code
    decides and words the refusal. The caps and the class and decompressor to use
    are given once (a batch's), and nothing changes between calls.
    """

    cdef object cls
    cdef object decompressor
    cdef Caps caps
    cdef Py_ssize_t max_groups
    cdef Py_ssize_t max_files_announced
    cdef Py_ssize_t max_window

    def __init__(self, object cls, object decompressor, Py_ssize_t max_text_chars,
                 Py_ssize_t max_groups, Py_ssize_t max_files_announced, Py_ssize_t max_files,
                 Py_ssize_t max_segments, Py_ssize_t max_total_segments,
                 Py_ssize_t max_file_index, int64_t undated, Py_ssize_t max_window):
        self.cls = cls
        self.decompressor = decompressor
        self.caps = Caps(max_text_chars, max_files, max_segments, max_total_segments,
                         max_file_index, undated)
        self.max_groups = max_groups
        self.max_files_announced = max_files_announced
        self.max_window = max_window

    def check(self, object wire, Py_ssize_t budget):
        """(PackedRelease, inflated bytes) of a release's map, or None (see the class)."""
        cdef Py_ssize_t cap = self.caps.max_text_chars
        cdef Figures found
        cdef Py_ssize_t n, i
        cdef object raw, release, frame, header, group
        if type(wire) is not dict or PyDict_Size(wire) != RELEASE_FIELDS:
            return None
        # Seven entries, these seven keys among them: no other key.
        try:
            key = _field(wire, "key")
            head_name = _field(wire, "head_name")
            poster = _field(wire, "poster")
            groups = _field(wire, "groups")
            files_announced = _field(wire, "files_announced")
            name = _field(wire, "name")
            fragment = _field(wire, "fragment")
        except KeyError:
            return None
        if type(key) is not bytes or PyBytes_GET_SIZE(key) != 16:
            return None
        if head_name is not None and not (type(head_name) is str and _text_ok(head_name, cap)):
            return None
        if not (type(poster) is str and _text_ok(poster, cap)):
            return None
        if not (type(name) is str and _text_ok(name, cap)):
            return None
        if files_announced is not None and not (
            type(files_announced) is int and 0 <= files_announced <= self.max_files_announced
        ):
            return None
        if type(groups) is not list:
            return None
        n = len(groups)
        if n > self.max_groups:
            return None
        for i in range(n):
            group = (<list>groups)[i]
            if type(group) is not str or not _text_ok(group, cap):
                return None
            if PyUnicode_GET_LENGTH(group) == 0 or PyUnicode_FindChar(
                group, 10, 0, PyUnicode_GET_LENGTH(group), 1
            ) != -1:
                return None
        if n > 1 and len(set(groups)) != n:
            return None
        if type(fragment) is not bytes or PyBytes_GET_SIZE(fragment) < 1:
            return None
        if <uint8_t>PyBytes_AS_STRING(fragment)[0] != ZSTD_FRAGMENT:
            return None
        # fragments._unframed: one frame that says its size, within the budget.
        frame = memoryview(fragment)[1:]
        try:
            header = get_frame_parameters(frame)
            size = header.content_size
            if size == CONTENTSIZE_UNKNOWN or size > budget:
                return None
            if header.window_size > self.max_window:
                return None
            # (data, max_output_size=0, read_across_frames=False, allow_extra_data=False),
            # positional: the keyword costs 0.3 us a call, 4% of checking a release.
            raw = self.decompressor.decompress(frame, 0, False, False)
        except ZstdError:
            return None
        if type(raw) is not bytes:
            return None
        if not _figures(<const unsigned char *>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw),
                        &self.caps, &found):
            return None
        if found.latest == INT64_MAX:
            # The store has no room past it (batchwire refuses it).
            return None
        # A PackedRelease as its __init__ makes it (a frozen attrs class without
        # validators or converters: each field set once), without a Python call.
        release = self.cls.__new__(self.cls)
        PyObject_GenericSetAttr(release, "key", key)
        PyObject_GenericSetAttr(release, "head_name", head_name)
        PyObject_GenericSetAttr(release, "poster", poster)
        PyObject_GenericSetAttr(release, "groups", tuple(groups))
        PyObject_GenericSetAttr(release, "files_announced", files_announced)
        PyObject_GenericSetAttr(release, "fragment", fragment)
        PyObject_GenericSetAttr(release, "name", name)
        PyObject_GenericSetAttr(release, "posted", found.posted)
        PyObject_GenericSetAttr(release, "latest", found.latest)
        PyObject_GenericSetAttr(
            release,
            "representative",
            (found.order, _file_key(<const unsigned char *>PyBytes_AS_STRING(raw), found.best)),
        )
        PyObject_GenericSetAttr(release, "files", found.files)
        PyObject_GenericSetAttr(release, "segments", found.segments)
        PyObject_GenericSetAttr(release, "bytes", found.bytes)
        PyObject_GenericSetAttr(release, "inflated", raw)
        return release, PyBytes_GET_SIZE(raw)
