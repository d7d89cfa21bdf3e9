# The tabs in a byte string, counted without a Python object: shared by the compiled
# loops that count a file's segments (core/_fastindex.pyx's `file_arrays`,
# core/_fastsubject.pyx's `segment_count`; each segment ends in five tabs).

from libc.string cimport memcpy


cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* The tabs in the first *done bytes of s[:n], sixteen at a time on x86-64 (none
       elsewhere: *done is 0): each a 1 in a byte lane, summed per lane for at most
       255 rounds, then the lanes summed. */
    static Py_ssize_t uidx_tabs16(const char *s, Py_ssize_t n, Py_ssize_t *done) {
        Py_ssize_t i = 0, found = 0;
    #if defined(__SSE2__) && defined(__x86_64__)
        const __m128i tab = _mm_set1_epi8('\\t'), zero = _mm_setzero_si128();
        while (i + 16 <= n) {
            __m128i lanes = _mm_setzero_si128(), sums;
            int rounds = 0;
            while (i + 16 <= n && rounds < 255) {
                lanes = _mm_sub_epi8(
                    lanes, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(s + i)), tab));
                i += 16;
                rounds++;
            }
            sums = _mm_sad_epu8(lanes, zero);
            found += (Py_ssize_t)_mm_cvtsi128_si64(sums)
                + (Py_ssize_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
        }
    #endif
        *done = i;
        return found;
    }
    """
    Py_ssize_t uidx_tabs16(const char *s, Py_ssize_t n, Py_ssize_t *done) nogil


cdef inline Py_ssize_t tab_count(const char *s, Py_ssize_t n) noexcept nogil:
    # s[:n].count(b"\t"): sixteen bytes at a time where SSE2 is (uidx_tabs16), the
    # rest eight at a time: a byte of x is zero where s has a tab, and its high bit is
    # then the only one left clear in t; those bits, one per byte, are summed by a
    # multiply (no popcount: the build targets any x86-64).
    cdef unsigned long long w, x, t
    cdef Py_ssize_t i = 0, found
    found = uidx_tabs16(s, n, &i)  # (sixteen at a time where it can)
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        x = w ^ 0x0909090909090909ULL
        t = ((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | x
        found += <Py_ssize_t>((((~t & 0x8080808080808080ULL) >> 7) * 0x0101010101010101ULL) >> 56)
        i += 8
    while i < n:
        if s[i] == b'\t':
            found += 1
        i += 1
    return found
