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
Only the FileChunk is a Python call per file; nothing is made per segment.

It checks nothing it cannot give back exactly: whenever the fragment is
not one the pure code unpacks without an error (counts past their caps or
past the data, message-ids not matching their counts, text that is not
UTF-8), it returns None and the caller runs the pure code, which raises
the error with its message. No state lives here between calls.
"""

from cpython.array cimport array, clone
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy

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
            made.append(
                chunk(
                    PyBytes_FromStringAndSize(<const char *>entry, 16),
                    name,
                    subject,
                    index - 1 if index else None,
                    _u32(entry + 24),
                    _i64(entry + 28),
                    _part(numbers, start, n),
                    message_ids,
                    _part(sizes, start, n),
                )
            )
            start += n
    except UnicodeDecodeError:
        return None
    finally:
        PyMem_Free(rows)
    return made
