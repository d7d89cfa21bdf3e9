# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""A new file's subject parsed, compiled: the twin of `subject.parse_file_subject`.

Theory of operation
-------------------
take() parses the subject of every file of a batch once (core/indexer.py),
and most files are new ones: an executable flood gives each file a subject
of its own. `file_subject(prefix)` does what `parse_file_subject(decode(prefix))`
does for the common subject, an ASCII one with a quoted name, on the bytes
with pointers: no regular expression and no str until the answer is made.
The deliberate oracle pair: core/subject.py stays the reference and the
fallback, and tests/test_fastsubject.py checks that both give the same
FileSubject on every generator profile, the real corpus and fuzzed
subjects.

What `_QUOTED_NAME` matches, said as positions: with F the first quote
and L the last one, the name is the text between them (stripped of quotes
and spaces); the file counter, `[` or `(`, one to five digits, `/`, one to
five digits, `]` or `)`, is the rightmost one wholly before F (the head is
the text before it), else the first one after L (the head is all before
F). The head key is `_squash` of the head ("" for a placeholder); a file
without one gets `_headless_basis` of its name: `_ascii_file_stem`'s
suffixes stripped (the table `_LAST_SUFFIXES` read from subject.py),
`looks_obfuscated` asked in Python (only for stems without a dot or a
short last suffix), FIXED_STEMS, and the executable extensions of rules.py.

None is the answer for anything else (a byte above 127, fewer than two
quotes, an empty name, a name with a newline and no head): the caller
parses those in Python.

take()'s first steps are here too, each with its oracle in Python:
`releases` (every open file's subject parsed and the files grouped by
release, `indexer._releases`), `executable_verdict` (an executable rule on
the members' file names, `rules.ExecutableRule.verdict`),
`segment_count` (a dropped release's segments, `_OpenFile.count` summed)
and `executable_judged` (both for every release of a batch in one call,
where that rule is the only one: `RangeIndexer._judged`):
most releases of a batch are executable floods, of one to five files,
dropped right there; tests/test_fastgrouping.py holds them to their oracles.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy
from usenet_indexer.core._ascii cimport ascii_only
from usenet_indexer.core._tabcount cimport tab_count

from usenet_indexer.core import subject as _subject
from usenet_indexer.core.rules import EXECUTABLE_EXTENSIONS as _EXECUTABLE

cdef object _FILE_SUBJECT = _subject.FileSubject
# FileSubject's fields, in order (tests/test_fastsubject.py holds the class to them).
_SUBJECT_FIELDS = (
    "file_name", "head", "file_index", "files_announced", "release_basis", "keyed_by_poster",
)


cdef extern from "Python.h":
    ctypedef struct PyTypeObject:
        PyObject *(*tp_alloc)(PyTypeObject *, Py_ssize_t)
    str PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    int PyUnicode_KIND(object o)


cdef extern from *:
    """
    /* A dict with room for n items (no resize while they are put in), where
       CPython's _PyDict_NewPresized is there (3.11, 3.12); an empty one elsewhere. */
    static PyObject *uidx_dict_presized(Py_ssize_t n) {
    #if PY_VERSION_HEX < 0x030D0000
        return _PyDict_NewPresized(n);
    #else
        (void)n;
        return PyDict_New();
    #endif
    }
    """
    dict uidx_dict_presized(Py_ssize_t n)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    int PyUnicode_1BYTE_KIND


cdef inline object _subject_of(
    object name, object head, object index, object announced, object basis, object keyed
):
    # A FileSubject (a NamedTuple: a tuple subclass without slots of its own) made
    # as tuple.__new__(FileSubject, fields) makes it: the type's tp_alloc for six
    # items, each item set; no Python call.
    cdef PyObject *made = (<PyTypeObject *><PyObject *>_FILE_SUBJECT).tp_alloc(
        <PyTypeObject *><PyObject *>_FILE_SUBJECT, 6
    )
    cdef object found
    if made == NULL:
        raise MemoryError()
    found = <object>made
    Py_DECREF(found)  # tp_alloc's reference, now found's
    _put(found, 0, name)
    _put(found, 1, head)
    _put(found, 2, index)
    _put(found, 3, announced)
    _put(found, 4, basis)
    _put(found, 5, keyed)
    return found


cdef inline void _put(object made, Py_ssize_t at, object item):
    # An empty item of a new tuple set (PyTuple_SET_ITEM takes a reference).
    Py_INCREF(item)
    PyTuple_SET_ITEM(made, at, item)
cdef object _looks_obfuscated = _subject.looks_obfuscated
cdef object _headless_basis = _subject._headless_basis
cdef dict _LAST_SUFFIXES = _subject._LAST_SUFFIXES
cdef frozenset _FIXED_STEMS = _subject.FIXED_STEMS
cdef frozenset _EXECUTABLES = frozenset(_EXECUTABLE)
cdef long _MAX_FILES = _subject.MAX_FILES
# The longest suffix the table holds: a longer last suffix is none of its.
cdef Py_ssize_t _LONGEST = max(map(len, _LAST_SUFFIXES))

# The characters _squash strips off a head's ends (subject._HEAD_EDGES), and
# what str.split() and str.strip() take for white space among ASCII: also
# \x1c-\x1f, which bytes.split() does not.
cdef bint _EDGE[256]
cdef bint _SPACE[256]
for _c in range(256):
    _EDGE[_c] = chr(_c) in _subject._HEAD_EDGES
    _SPACE[_c] = _c < 128 and chr(_c).isspace()


cdef inline bint _digit(char c) noexcept nogil:
    return b'0' <= c <= b'9'


cdef inline bint _alnum(char c) noexcept nogil:
    return _digit(c) or b'a' <= (c | 32) <= b'z'


cdef inline char _lower(char c) noexcept nogil:
    return c | 32 if b'A' <= c <= b'Z' else c


cdef inline Py_ssize_t _number(const char *t, Py_ssize_t i, Py_ssize_t end, long *value) noexcept nogil:
    # One to five digits from `i` (\d{1,5} where no digit may follow): where
    # they end, or -1.
    cdef Py_ssize_t start = i
    value[0] = 0
    while i < end and _digit(t[i]):
        if i - start == 5:
            return -1
        value[0] = value[0] * 10 + (t[i] - 48)
        i += 1
    return -1 if i == start else i


cdef Py_ssize_t _counter(const char *t, Py_ssize_t at, Py_ssize_t end, long *index, long *total) noexcept nogil:
    # A file counter starting at `at` and ending by `end`: `[` or `(`, 1-5
    # digits, "/", 1-5 digits, `]` or `)`. Its end, or -1.
    cdef Py_ssize_t i
    if t[at] != b'[' and t[at] != b'(':
        return -1
    i = _number(t, at + 1, end, index)
    if i < 0 or i >= end or t[i] != b'/':
        return -1
    i = _number(t, i + 1, end, total)
    if i < 0 or i >= end or (t[i] != b']' and t[i] != b')'):
        return -1
    return i + 1


cdef str _text(const char *s, Py_ssize_t n):
    # ASCII bytes (the caller checked them) as a str: made of one byte a character
    # and filled in place, as decode("ascii") makes it without checking them again.
    cdef str made = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(made), s, n)
    return made


cdef str _squash(const char *s, Py_ssize_t n):
    # subject._squash of an ASCII head, and _head_key's "" for one without a
    # letter or digit (a posting tool's placeholder).
    cdef Py_ssize_t a = 0, b = n, i, j = 0
    cdef bint alnum = False, gap = False
    cdef char *out
    cdef str found
    while a < b and _EDGE[<unsigned char>s[a]]:
        a += 1
    while b > a and _EDGE[<unsigned char>s[b - 1]]:
        b -= 1
    out = <char *>malloc(b - a + 1)
    if out == NULL:
        raise MemoryError()
    try:
        for i in range(a, b):
            if _SPACE[<unsigned char>s[i]]:
                gap = j > 0
                continue
            if gap:
                out[j] = b' '
                j += 1
                gap = False
            out[j] = _lower(s[i])
            alnum = alnum or _alnum(s[i])
            j += 1
        if not alnum:
            return ""
        found = _text(out, j)
    finally:
        free(out)
    return found


cdef bint _all_digits(const char *s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if n == 0:
        return False
    for i in range(n):
        if not _digit(s[i]):
            return False
    return True


cdef Py_ssize_t _find(const char *s, Py_ssize_t n, char c) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if s[i] == c:
            return i
    return -1


cdef Py_ssize_t _rfind(const char *s, Py_ssize_t n, char c) noexcept nogil:
    cdef Py_ssize_t i = n - 1
    while i >= 0 and s[i] != c:
        i -= 1
    return i


cdef bint _two_dot(const char *mid, Py_ssize_t n, bytes ext):
    # subject._is_two_dot_suffix: `mid` lower case.
    cdef Py_ssize_t plus
    if ext == b"rar":
        return n >= 4 and mid[:4] == b"part" and 5 <= n <= 8 and _all_digits(mid + 4, n - 4)
    if ext != b"par2":
        return mid[:n] in (b"7z", b"zip", b"rar")  # ext is three digits
    if n < 3 or mid[:3] != b"vol":
        return False
    plus = max(_find(mid, n, b'+'), _find(mid, n, b'-'))
    if (
        plus > 3
        and plus - 3 <= 5
        and 1 <= n - plus - 1 <= 5
        and _all_digits(mid + 3, plus - 3)
        and _all_digits(mid + plus + 1, n - plus - 1)
    ):
        return True
    if n > 3 and mid[3] == b'-':
        return 1 <= n - 4 <= 5 and _all_digits(mid + 4, n - 4)
    return 1 <= n - 3 <= 5 and _all_digits(mid + 3, n - 3)


cdef Py_ssize_t _stem(const char *s, Py_ssize_t n) except -1:
    # subject._ascii_file_stem(s[:n], 3): the length of the stem, a prefix of s
    # (lower-case copies in `low`).
    cdef Py_ssize_t dot, second, e, i
    cdef int strips
    cdef char low[32]
    cdef bytes ext
    cdef object kind
    for strips in range(3):
        dot = _rfind(s, n, b'.')
        e = n - dot - 1
        if dot <= 0 or e == 0 or e > _LONGEST or e > 31:
            break  # no dot, a name that is all suffix, or no suffix of the table
        for i in range(e):
            low[i] = _lower(s[dot + 1 + i])
        ext = low[:e]
        kind = _LAST_SUFFIXES.get(ext.decode("ascii"))
        if kind is None:
            break  # x264, 1080p, S01E01
        if kind == "two":
            second = _rfind(s, dot, b'.')
            if second >= 0 and dot - second - 1 <= 31:
                for i in range(dot - second - 1):
                    low[i] = _lower(s[second + 1 + i])
                if _two_dot(low, dot - second - 1, ext):
                    if second == 0:
                        break
                    dot = second
            # else rar, par2 and three digits are suffixes of their own
            # (a middle longer than 31 is none of the two-dot forms)
        elif kind == "short" and not _looks_obfuscated(_text(s, dot)):
            break  # a date or a volume keeps its number
        n = dot
    return n


cdef tuple _headless(str name, const char *s, Py_ssize_t n, object files_announced):
    # subject._headless_basis of an ASCII name (s, n).
    cdef Py_ssize_t a = 0, b = n, stem_n, dot
    cdef str stem, lower
    cdef object announced
    while a < b and _SPACE[<unsigned char>s[a]]:
        a += 1
    while b > a and _SPACE[<unsigned char>s[b - 1]]:
        b -= 1
    if _find(s + a, b - a, b'\n') >= 0:
        return _headless_basis(name, files_announced)
    stem_n = _stem(s + a, b - a)
    stem = _text(s + a, stem_n)
    lower = stem.lower()
    if (_find(s + a, stem_n, b'.') < 0 and _looks_obfuscated(stem)) or lower in _FIXED_STEMS:
        return f"\x1e\x1f{files_announced}", True
    announced = files_announced or 1
    if announced > 2:
        return "\x1e" + lower, False
    # subject.extension(name) in EXECUTABLE_EXTENSIONS
    dot = _rfind(s, n, b'.')
    if dot < 0 or dot == n - 1 or n - dot > 6:
        return "\x1e" + lower, "" in _EXECUTABLES
    return "\x1e" + lower, _text(s + dot + 1, n - dot - 1).lower() in _EXECUTABLES


def file_subject(bytes prefix):
    """`subject.parse_file_subject(indexer.decode(prefix))`, or None for the pure path.

    Args:
        prefix: a file's subject before its segment counter, as the line
            has it (`_OpenFile.prefix`).

    Returns:
        The FileSubject, equal to the pure parse's, for an ASCII subject with
        a quoted name; None for any other (the caller parses it in Python).
    """
    return _file_subject(prefix)


cdef object _file_subject(bytes prefix):
    # `file_subject`, which `releases` calls without a Python call.
    cdef const char *s = PyBytes_AS_STRING(prefix)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(prefix), m, i, first, last, at, end, head_n
    cdef Py_ssize_t name_a, name_b
    cdef const char *t
    cdef long index = 0, total = 0, found_index = -1, found_total = -1
    cdef str name, head, head_key
    cdef object file_index = None, files_announced = None
    if not ascii_only(<const unsigned char *>s, size):
        return None
    t = s
    m = size
    if size >= 4 and s[0] | 32 == b'r' and s[1] | 32 == b'e' and s[2] == b':' and s[3] == b' ':
        t = s + 4  # "re: ", "Re: ", "rE: ", "RE: " (R | 32 is r; no other ASCII byte maps to it)
        m = size - 4
    first = _find(t, m, b'"')
    last = _rfind(t, m, b'"')
    if first < 0 or last == first:
        return None  # fewer than two quotes: the pure parse's other ways
    name_a = first + 1
    name_b = last
    while name_a < name_b and (t[name_a] == b'"' or t[name_a] == b' '):
        name_a += 1
    while name_b > name_a and (t[name_b - 1] == b'"' or t[name_b - 1] == b' '):
        name_b -= 1
    if name_a == name_b:
        return None  # empty quotes
    # The rightmost counter wholly before the first quote, else the first after the last.
    head_n = first
    at = first - 1
    while at >= 0:
        end = _counter(t, at, first, &index, &total) if t[at] == b'[' or t[at] == b'(' else -1
        if end >= 0:
            head_n = at
            found_index, found_total = index, total
            break
        at -= 1
    else:
        at = last + 1
        while at < m:
            end = _counter(t, at, m, &index, &total) if t[at] == b'[' or t[at] == b'(' else -1
            if end >= 0:
                found_index, found_total = index, total
                break
            at += 1
    if found_index >= 0 and found_index <= found_total <= _MAX_FILES:
        file_index = found_index
        files_announced = found_total
    name = _text(t + name_a, name_b - name_a)
    head = _text(t, head_n)
    head_key = _squash(t, head_n) if head_n else ""
    if head_key:
        return _subject_of(name, head, file_index, files_announced, f"{head_key}\x1f{files_announced}", True)
    basis, keyed = _headless(name, t + name_a, name_b - name_a, files_announced)
    return _subject_of(name, head, file_index, files_announced, basis, keyed)


def releases(list files, object parse):
    """take()'s grouping of a batch's open files, the twin of `indexer._releases`.

    Each file's subject is parsed once per prefix (`file_subject`, else
    `parse(prefix)`, the pure parse of the decoded text) and set as its
    `info`; the files are grouped by release, (poster, or b"" when the
    subject has no head, release basis), in the order they come.

    Args:
        files: the batch's `_OpenFile`s, in the order they were opened.
        parse: the pure parse of a prefix (bytes) the compiled one leaves.

    Returns:
        The files of each release, by (poster or b"", release basis).
    """
    # Made with room for every file (no resize on the way: nearly every prefix,
    # and most releases, are new ones).
    cdef dict parsed = uidx_dict_presized(len(files))
    cdef dict by_release = uidx_dict_presized(len(files))
    cdef object open_file, prefix, info, members
    cdef tuple fields
    for open_file in files:
        prefix = open_file.prefix
        info = parsed.get(prefix)
        if info is None:
            info = _file_subject(prefix)
            if info is None:
                info = parse(prefix)
            parsed[prefix] = info
        open_file.info = info
        fields = <tuple>info
        release = (open_file.poster if fields[5] else b"", fields[4])
        members = by_release.get(release)
        if members is None:
            by_release[release] = [open_file]
        else:
            (<list>members).append(open_file)
    return by_release


def executable_verdict(list members, object extensions, object companions):
    """`rules.ExecutableRule.verdict` on the release of `members` (their `info.file_name`s),
    its twin: the first executable extension when every file is an executable or a
    companion and one is an executable, else None."""
    return _verdict(members, extensions, companions)


cdef str _extension(str name):
    # subject.extension's (and ExecutableRule.verdict's) suffix: the text after the
    # last ".", lowered, when it is one to five characters; else "". A name of one
    # byte a character is read in place: the last dot is among the last six
    # characters or too far; an ASCII suffix is lowered here.
    cdef Py_ssize_t size = PyUnicode_GET_LENGTH(name), dot, i
    cdef const unsigned char *t
    cdef char low[5]
    cdef bint ascii = True
    if PyUnicode_KIND(name) != PyUnicode_1BYTE_KIND:
        dot = name.rfind(".")
        return name[dot + 1 :].lower() if 0 <= dot < size - 1 and size - dot <= 6 else ""
    t = <const unsigned char *>PyUnicode_DATA(name)
    dot = size - 1
    while dot >= 0 and dot >= size - 6 and t[dot] != b'.':
        dot -= 1
    if dot < 0 or dot < size - 6 or dot == size - 1:
        return ""  # no dot, none among the last six characters, or a name ending in one
    for i in range(size - dot - 1):
        if t[dot + 1 + i] > 127:
            ascii = False
            break
        low[i] = _lower(<char>t[dot + 1 + i])
    if not ascii:
        return name[dot + 1 :].lower()
    return _text(low, size - dot - 1)


cdef object _verdict(list members, object extensions, object companions):
    # `executable_verdict`, which `executable_judged` calls without a Python call.
    cdef str found = ""
    cdef str ext
    for open_file in members:
        ext = _extension((<tuple>open_file.info)[0])
        if ext in extensions:
            if not found:
                found = ext
        elif ext not in companions:
            return None
    return found or None


def segment_count(list members):
    """The segments the files of `members` hold, `sum(m.count for m in members)`: each
    segment is five tab-ended fields of the file's buffer."""
    return _segment_count(members)


cdef Py_ssize_t _segment_count(list members) except -1:
    # `segment_count`, which `executable_judged` calls without a Python call.
    cdef Py_ssize_t total = 0
    cdef bytearray segments
    for open_file in members:
        segments = open_file.segments
        total += tab_count(PyByteArray_AS_STRING(segments), PyByteArray_GET_SIZE(segments)) // 5
    return total


def executable_judged(
    dict by_release, object extensions, object companions, str rule, bint keep_dropped, dict counts
):
    """take()'s judging of a batch's releases where an `ExecutableRule` is the only rule,
    the twin of `RangeIndexer._judged` (each release's `executable_verdict`, a dropped
    one's segments counted by `segment_count`), in one call.

    Args:
        rule: the rule's name, the `dropped_by` of a release it drops.
        keep_dropped: whether a dropped release is still converted (given back).
        counts: filled with [releases, segments] dropped, by the verdict's key.

    Returns:
        (release, members, None or `rule`) of each release to convert, in order.
    """
    cdef list judged = []
    cdef list members
    cdef object release, key, found
    for release, members in by_release.items():
        key = _verdict(members, extensions, companions)
        if key is None:
            judged.append((release, members, None))
            continue
        found = counts.get(key)
        if found is None:
            counts[key] = [1, _segment_count(members)]
        else:
            (<list>found)[0] += 1
            (<list>found)[1] += _segment_count(members)
        if keep_dropped:
            judged.append((release, members, rule))
    return judged
