"""A parallel tokenizer for sparse tensor text: ``order`` integers and one float per line.

Why not pandas or ``numpy.loadtxt``: both are single-threaded, and which is faster (and whether
pandas' floats are exact) depends on their versions. Here every line is parsed independently
(Numba ``prange``), so a FROSTT file reads at many lines per core.

Floats are exact: a value with at most 15 significant digits and a decimal exponent within
±22 is ``mantissa * 10**e`` or ``mantissa / 10**-e``, both exact operands of one correctly
rounded operation (Clinger's fast path; every count tensor takes it). Any other value is
handed to NumPy's own string-to-double conversion, in one batch.
"""

from __future__ import annotations

import numba
import numpy as np

OK, SLOW_FLOAT, BAD = 0, 1, 2  # per-line status
_POW10 = np.array([10.0**k for k in range(23)])


@numba.njit(cache=True, inline="always")
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(cache=True, inline="always")
def _line_bounds(buf, newlines, start, i):
    lo = start if i == 0 else newlines[i - 1] + 1
    hi = newlines[i] if i < newlines.size else buf.size
    return lo, hi


@numba.njit(cache=True, inline="always")
def _skip_space(buf, p, hi):
    while p < hi and _is_space(buf[p]):
        p += 1
    return p


@numba.njit(cache=True, parallel=True)
def _classify(buf, newlines, start, n_lines):
    """1 for a line with content, 0 for a blank or comment-only line."""
    content = np.zeros(n_lines, dtype=np.int64)
    for i in numba.prange(n_lines):
        lo, hi = _line_bounds(buf, newlines, start, i)
        p = _skip_space(buf, lo, hi)
        if p < hi and buf[p] != 35:  # '#'
            content[i] = 1
    return content


@numba.njit(cache=True, inline="always")
def _parse_indices(buf, p, hi, order, coords, r):
    """The line's ``order`` indices from ``p`` into ``coords[r]``: the position after them and their spaces,
    or -1 where one is empty, signed, not digits or over 18 digits (the rescan names it)."""
    for m in range(order):
        q = p
        acc = 0
        while q < hi and 48 <= buf[q] <= 57 and q - p < 18:
            acc = acc * 10 + (buf[q] - 48)
            q += 1
        if q == p or (q < hi and not _is_space(buf[q])):
            return -1
        coords[r, m] = acc
        p = _skip_space(buf, q, hi)
    return p


@numba.njit(cache=True, inline="always")
def _scan_number(buf, p, hi):
    """[sign] digits [. digits] [(e|E) [sign] digits] from ``p``: (negative, mantissa, its significant
    digits, the decimal exponent, the digits seen (0: not a number), the position after it). The mantissa
    keeps 19 digits; only one of at most 15 is used."""
    negative = False
    if p < hi and (buf[p] == 45 or buf[p] == 43):
        negative = buf[p] == 45
        p += 1
    mantissa = 0
    digits = 0  # significant digits kept in mantissa
    exp10 = 0
    seen = 0
    while p < hi and 48 <= buf[p] <= 57:
        if digits > 0 or buf[p] != 48:
            if digits < 19:
                mantissa = mantissa * 10 + (buf[p] - 48)
            else:
                exp10 += 1
            digits += 1
        seen += 1
        p += 1
    if p < hi and buf[p] == 46:  # '.'
        p += 1
        while p < hi and 48 <= buf[p] <= 57:
            if digits > 0 or buf[p] != 48:
                if digits < 19:
                    mantissa = mantissa * 10 + (buf[p] - 48)
                    exp10 -= 1
                digits += 1
            else:
                exp10 -= 1
            seen += 1
            p += 1
    if p < hi and (buf[p] == 101 or buf[p] == 69):  # 'e' / 'E'
        p += 1
        e_negative = False
        if p < hi and (buf[p] == 45 or buf[p] == 43):
            e_negative = buf[p] == 45
            p += 1
        e_start = p
        e = 0
        while p < hi and 48 <= buf[p] <= 57:
            if e < 100000:
                e = e * 10 + (buf[p] - 48)
            p += 1
        if p == e_start:
            seen = 0
        exp10 += -e if e_negative else e
    return negative, mantissa, digits, exp10, seen, p


@numba.njit(cache=True, inline="always")
def _parse_value(buf, p, hi):
    """The line's value from ``p``, the last field: (status, value, the position after it). OK: the value, exact
    by Clinger's fast path; SLOW_FLOAT: NumPy converts ``buf[p:end]``; BAD: no digits, or more fields (a
    comment may follow)."""
    negative, mantissa, digits, exp10, seen, end = _scan_number(buf, p, hi)
    q = _skip_space(buf, end, hi)
    if seen == 0 or (q < hi and buf[q] != 35):
        return BAD, 0.0, end
    if digits <= 15 and -22 <= exp10 <= 22:
        v = float(mantissa)
        v = v * _POW10[exp10] if exp10 >= 0 else v / _POW10[-exp10]
        return OK, -v if negative else v, end
    return SLOW_FLOAT, 0.0, end


@numba.njit(cache=True, parallel=True)
def _parse(buf, newlines, start, rows, order, coords, values, status, slow_lo, slow_hi):
    n_lines = rows.size
    for i in numba.prange(n_lines):
        if i > 0 and rows[i] == rows[i - 1]:
            continue  # blank or comment: its row number is the next content line's
        if i == 0 and rows[0] == 0:
            continue
        r = rows[i] - 1
        lo, hi = _line_bounds(buf, newlines, start, i)
        p = _parse_indices(buf, _skip_space(buf, lo, hi), hi, order, coords, r)
        if p < 0:
            status[r] = BAD
            continue
        kind, value, end = _parse_value(buf, p, hi)
        if kind == OK:
            values[r] = value
        else:
            status[r] = kind
            slow_lo[r] = p
            slow_hi[r] = end


@numba.njit(cache=True)
def _gather(buf, lo, hi):
    """The tokens ``buf[lo[k]:hi[k]]``, space-separated, in one byte array."""
    out = np.empty(int((hi - lo).sum()) + lo.size, dtype=np.uint8)
    p = 0
    for k in range(lo.size):
        for q in range(lo[k], hi[k]):
            out[p] = buf[q]
            p += 1
        out[p] = 32
        p += 1
    return out


def parse_rows(buf: np.ndarray, start: int, order: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Coordinates (as written) and values of the content lines of ``buf[start:]``; None if a
    line is not ``order`` unsigned integers and a decimal number (the caller rescans for it)."""
    newlines = np.flatnonzero(buf[start:] == 10) + start
    n_lines = newlines.size + (1 if buf.size > (newlines[-1] + 1 if newlines.size else start) else 0)
    rows = np.cumsum(_classify(buf, newlines, start, n_lines))
    nnz = int(rows[-1]) if rows.size else 0
    coords = np.empty((nnz, order), dtype=np.int64)
    values = np.empty(nnz, dtype=np.float64)
    status = np.zeros(nnz, dtype=np.uint8)
    slow_lo = np.zeros(nnz, dtype=np.int64)
    slow_hi = np.zeros(nnz, dtype=np.int64)
    _parse(buf, newlines, start, rows, order, coords, values, status, slow_lo, slow_hi)
    if (status == BAD).any():
        return None
    slow = np.flatnonzero(status == SLOW_FLOAT)
    if slow.size:
        text = _gather(buf, slow_lo[slow], slow_hi[slow]).tobytes().decode("ascii")
        values[slow] = np.fromstring(text, dtype=np.float64, sep=" ")  # NumPy's exact strtod
    return coords, values
