"""Compiled writers of the report's bulk text (numba), byte for byte what the pure-Python writers produce.

trace.json's rank-timeline segments are millions of short JSON lines; an f-string per line costs ~8 µs at
3.5 million tasks. Here the lines are written by a compiled loop into one byte buffer: each distinct string
(a task name, a category) JSON-encoded once by Python's own encoder, rows as integer codes into them, and the
times (microseconds rounded to the nanosecond) as fixed-point numbers: a value v = k / 1000 with |k| < 10**15
has at most 15 significant digits, so Python's repr of it (the shortest string that reads back as v) is k / 1000
written out with trailing zeros dropped ("12.5", "3.0"). `exact_thousandths` checks that every value is of
that form; where one is not, the caller keeps the pure-Python writer.

The compiled path is used when numba is installed, the rows are at least `MIN_ROWS`, and AIFABRIC_PURE_PYTHON
is not set (as for engines/fastloop.py); tests compare the two writers byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import count

import numpy as np

from ..compiled import pure_python

try:
    from numba import njit

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    AVAILABLE = False

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        return (lambda f: f) if not args or not callable(args[0]) else args[0]


MIN_ROWS = 20_000
_MAX_K = 10**15


def use_compiled(n_rows: int) -> bool:
    """Whether n_rows go through the compiled writer."""
    if n_rows < MIN_ROWS or pure_python():
        return False
    return AVAILABLE


def factorize(values: Iterable) -> tuple[np.ndarray, list]:
    """(codes, uniques): codes[i] indexes uniques, uniques in order of first appearance (hashing, no sort)."""
    first: dict = {}
    at = np.fromiter(map(first.setdefault, values, count()), dtype=np.int64)
    # `at` holds each value's first position; renumber 0, 1, 2, ... in that order
    starts = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    lookup = np.zeros(len(at), dtype=np.int64)
    lookup[starts] = np.arange(len(starts))
    return lookup[at], list(first)


def byte_table(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """ASCII strings as one uint8 array and offsets (len(texts) + 1)."""
    data = [t.encode("ascii") for t in texts]
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.fromiter(map(len, data), dtype=np.int64, count=len(data)))
    return np.frombuffer(b"".join(data), dtype=np.uint8).copy(), offsets


def exact_thousandths(v: np.ndarray) -> np.ndarray | None:
    """k (int64) with k / 1000 == v exactly for every value, |k| < 10**15 and no -0.0; None if any is not."""
    v = np.asarray(v, dtype=float)
    if not np.isfinite(v).all():
        return None
    k = np.rint(v * 1000.0)
    if len(k) and (np.abs(k).max() >= _MAX_K or (k / 1000.0 != v).any() or np.signbit(v[v == 0]).any()):
        return None
    return k.astype(np.int64)


@njit(cache=True, nogil=True)
def _put_int(buf, pos, x):
    if x < 0:
        buf[pos] = 45  # '-'
        pos += 1
        x = -x
    n = 1
    y = x
    while y >= 10:
        y //= 10
        n += 1
    for i in range(n - 1, -1, -1):
        buf[pos + i] = 48 + x % 10
        x //= 10
    return pos + n


@njit(cache=True, nogil=True)
def _put_thousandths(buf, pos, k):
    """k / 1000 as Python's repr writes it (|k| < 10**15): '12.5', '3.0', '-0.25'."""
    if k < 0:
        buf[pos] = 45
        pos += 1
        k = -k
    pos = _put_int(buf, pos, k // 1000)
    buf[pos] = 46  # '.'
    pos += 1
    f = k % 1000
    if f == 0:
        buf[pos] = 48
        return pos + 1
    d0, d1, d2 = f // 100, (f // 10) % 10, f % 10
    buf[pos] = 48 + d0
    pos += 1
    if d1 or d2:
        buf[pos] = 48 + d1
        pos += 1
        if d2:
            buf[pos] = 48 + d2
            pos += 1
    return pos


@njit(cache=True, nogil=True)
def _split_encoded(data, n):
    """Where each of the n strings starts and ends in `data`, the JSON-encoded content (no quotes) of the
    strings joined by NUL: the escape sequences are read whole, so an escaped backslash followed by 'u0000' is
    not taken for a separator."""
    starts = np.empty(n, dtype=np.int64)
    ends = np.empty(n, dtype=np.int64)
    starts[0] = 0
    k = 0
    i = 0
    size = len(data)
    while i < size:
        if data[i] != 92:  # not a backslash
            i += 1
        elif data[i + 1] != 117:  # \\, \", \n, ...
            i += 2
        elif data[i + 2] == 48 and data[i + 3] == 48 and data[i + 4] == 48 and data[i + 5] == 48:  # \u0000
            ends[k] = i
            k += 1
            starts[k] = i + 6
            i += 6
        else:  # \uXXXX
            i += 6
    ends[k] = size
    return starts, ends, k + 1


@njit(cache=True, nogil=True)
def _copy(buf, pos, src, a, b):
    for j in range(a, b):
        buf[pos] = src[j]
        pos += 1
    return pos


@njit(cache=True, nogil=True)
def _segment_text(keys, name_bytes, name_start, name_end, codes, cat_bytes, cat_off, kinds, pid, tid, ts_k, dur_k):
    """Lines '{"ph":"X","name":"N","cat":C,"pid":P,"tid":T,"ts":A,"dur":D}' joined by ',\\n'; `keys`: the
    text before N, C, P, T, A and D; N: name_bytes[name_start[c]:name_end[c]] of the row's code c."""
    n = len(codes)
    prefix, mid, pid_key, tid_key, ts_key, dur_key = keys
    size = 0
    for i in range(n):
        c = codes[i]
        k = kinds[i]
        size += name_end[c] - name_start[c] + cat_off[k + 1] - cat_off[k]
    fixed = 0
    for key in keys:
        fixed += len(key)
    size += n * (fixed + 2 + 1 + 2 + 4 * 22)
    buf = np.empty(size, dtype=np.uint8)
    pos = 0
    for i in range(n):
        if i:
            buf[pos] = 44  # ','
            buf[pos + 1] = 10  # '\n'
            pos += 2
        pos = _copy(buf, pos, prefix, 0, len(prefix))
        c = codes[i]
        buf[pos] = 34  # '"'
        pos = _copy(buf, pos + 1, name_bytes, name_start[c], name_end[c])
        buf[pos] = 34
        pos = _copy(buf, pos + 1, mid, 0, len(mid))
        k = kinds[i]
        pos = _copy(buf, pos, cat_bytes, cat_off[k], cat_off[k + 1])
        pos = _copy(buf, pos, pid_key, 0, len(pid_key))
        pos = _put_int(buf, pos, pid[i])
        pos = _copy(buf, pos, tid_key, 0, len(tid_key))
        pos = _put_int(buf, pos, tid[i])
        pos = _copy(buf, pos, ts_key, 0, len(ts_key))
        pos = _put_thousandths(buf, pos, ts_k[i])
        pos = _copy(buf, pos, dur_key, 0, len(dur_key))
        pos = _put_thousandths(buf, pos, dur_k[i])
        buf[pos] = 125  # '}'
        pos += 1
    return buf[:pos]


_SEGMENT_KEYS = (b'{"ph":"X","name":', b',"cat":', b',"pid":', b',"tid":', b',"ts":', b',"dur":')


def _name_table(names: list[str], encode) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, starts, ends, codes): the JSON-encoded content of each name (without its quotes) at
    bytes[starts[c]:ends[c]], c = codes[row]. `encode`: json's string encoder, which encodes character by
    character: the names joined by NUL are encoded in one call and cut at the encoded NULs (names holding a NUL
    themselves are encoded one distinct name at a time)."""
    joined = "\x00".join(names)
    if len(names) and joined.count("\x00") == len(names) - 1:
        data = np.frombuffer(encode(joined)[1:-1].encode("ascii"), dtype=np.uint8)
        starts, ends, found = _split_encoded(data, len(names))
        if found == len(names):
            return data, starts, ends, np.arange(len(names), dtype=np.int64)
    codes, uniques = factorize(names)
    data, off = byte_table([encode(s)[1:-1] for s in uniques])
    return data, off[:-1].copy(), off[1:].copy(), codes


def segment_text(*args) -> str:
    """`segment_bytes` as a string."""
    return segment_bytes(*args).tobytes().decode("ascii")


def segment_bytes(
    names: list[str],
    kinds: np.ndarray,
    cats: list[str],
    pid: np.ndarray,
    tid: np.ndarray,
    ts_k: np.ndarray,
    dur_k: np.ndarray,
    encode,
) -> np.ndarray:
    """The segment lines (see `_segment_text`), joined by ',\\n', as ASCII bytes (uint8). `cats`: JSON-encoded category per kind;
    `encode`: json's string encoder (for the names); ts_k, dur_k: times in thousandths (`exact_thousandths`)."""
    if not names:
        return np.zeros(0, dtype=np.uint8)
    name_bytes, name_start, name_end, codes = _name_table(names, encode)
    cat_bytes, cat_off = byte_table(cats)
    keys = tuple(np.frombuffer(k, dtype=np.uint8).copy() for k in _SEGMENT_KEYS)
    out = _segment_text(
        keys,
        name_bytes,
        name_start,
        name_end,
        codes,
        cat_bytes,
        cat_off,
        np.ascontiguousarray(kinds, dtype=np.int64),
        np.ascontiguousarray(pid, dtype=np.int64),
        np.ascontiguousarray(tid, dtype=np.int64),
        np.ascontiguousarray(ts_k, dtype=np.int64),
        np.ascontiguousarray(dur_k, dtype=np.int64),
    )
    return out


# --- CSV tables ------------------------------------------------------------------------------------------

_INTEGRAL_MAX = 1e15  # integral floats below this: repr is the integer and ".0"


@njit(cache=True, nogil=True)
def _csv_rows(kind, slot, ints, text, starts, ends):
    """Rows of a CSV table, each ending in \\r\\n: column j of row i is ints[slot[j], i] (kind 1), that and '.0'
    (kind 2), or text[starts[slot[j], i]:ends[slot[j], i]] (kind 0)."""
    ncols = len(kind)
    n = ints.shape[1] if ints.shape[0] else starts.shape[1]
    size = n * (ncols + 1) + ints.shape[0] * n * 22
    for t in range(starts.shape[0]):
        for i in range(n):
            size += ends[t, i] - starts[t, i]
    buf = np.empty(size, dtype=np.uint8)
    pos = 0
    for i in range(n):
        for j in range(ncols):
            if j:
                buf[pos] = 44  # ','
                pos += 1
            t = slot[j]
            if kind[j] == 0:
                pos = _copy(buf, pos, text, starts[t, i], ends[t, i])
            else:
                pos = _put_int(buf, pos, ints[t, i])
                if kind[j] == 2:
                    buf[pos] = 46  # '.'
                    buf[pos + 1] = 48  # '0'
                    pos += 2
        buf[pos] = 13
        buf[pos + 1] = 10
        pos += 2
    return buf[:pos]


@njit(cache=True, nogil=True)
def _split_nul(data, starts, ends):
    """starts/ends of the NUL-separated strings in data (as many as starts holds); the count found."""
    n = len(starts)
    k = 0
    starts[0] = 0
    for i in range(len(data)):
        if data[i] == 0:
            ends[k] = i
            k += 1
            if k == n:
                return k + 1
            starts[k] = i + 1
    ends[k] = len(data)
    return k + 1


def csv_rows(columns: list[list], quoted: tuple[str, ...]) -> np.ndarray | None:
    """The rows of a CSV table (no header) as the csv module writes them (str of each value), UTF-8 bytes (uint8);
    None when a string field would be quoted (holds any of `quoted`) or holds a NUL, or a column holds values of
    another type than int, float or str, or of several."""
    n = len(columns[0])
    kind = np.zeros(len(columns), dtype=np.int64)
    slot = np.zeros(len(columns), dtype=np.int64)
    int_cols: list[np.ndarray] = []
    text_cols: list[list[str]] = []
    for j, values in enumerate(columns):
        types = set(map(type, values))
        strings = None
        if types == {int}:
            try:
                int_cols.append(np.fromiter(values, dtype=np.int64, count=n))
                kind[j], slot[j] = 1, len(int_cols) - 1
            except OverflowError:
                strings = list(map(str, values))
        elif types == {float}:
            x = np.fromiter(values, dtype=float, count=n)
            if (np.abs(x) < _INTEGRAL_MAX).all() and (np.floor(x) == x).all() and not np.signbit(x[x == 0]).any():
                int_cols.append(x.astype(np.int64))
                kind[j], slot[j] = 2, len(int_cols) - 1
            else:
                strings = list(map(float.__repr__, values))
        elif types <= {str}:
            strings = values
        else:
            return None
        if strings is not None:
            text_cols.append(strings)
            kind[j], slot[j] = 0, len(text_cols) - 1
    ints = np.array(int_cols, dtype=np.int64).reshape(len(int_cols), n)
    starts = np.zeros((len(text_cols), n), dtype=np.int64)
    ends = np.zeros((len(text_cols), n), dtype=np.int64)
    pieces: list[bytes] = []
    offset = 0
    for t, strings in enumerate(text_cols):
        joined = "\x00".join(strings)
        if any(c in joined for c in quoted) or joined.count("\x00") != n - 1:
            return None
        data = joined.encode("utf-8")
        if _split_nul(np.frombuffer(data, dtype=np.uint8), starts[t], ends[t]) != n:
            return None
        starts[t] += offset
        ends[t] += offset
        offset += len(data)
        pieces.append(data)
    text = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    return _csv_rows(kind, slot, ints, text, starts, ends)
