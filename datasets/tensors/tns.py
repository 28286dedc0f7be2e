"""Reading and writing sparse tensors as text: FROSTT ``.tns`` and its header dialects.

One nonzero per line, the indices then the value, whitespace-separated; ``#`` starts a
comment; ``.gz`` files are read and written compressed. Headers seen in the wild:

- FROSTT / SPLATT: none.
- ParTI: an order line, then a dimensions line.
- pyttb and GenTen: a ``sptensor`` keyword line, an order line, a dimensions line and an
  nnz line (pyttb writes 1-based indices, GenTen 0-based).

Index base: ``base="auto"`` decides as the tools do. A file with declared dimensions is
0-based if any index is 0 (GenTen and pyttb write one base for the whole file); a file
without a header is decided per mode, as SPLATT does (a mode whose smallest index is 0
is 0-based: splatt's ``small4_zeroidx.tns`` is 0-based in its last mode only). Pass
``base=0`` or ``base=1`` to state it.

Parsing is a parallel Numba tokenizer (``text_scan``) with exact floats. When it
fails, or the parsed numbers break a rule, a line-by-line rescan finds the first bad
line, so every error names the file and line. ``read_tns_cached`` keeps the parsed
tensor as ``<file>.pbt.npz`` beside the text file and reuses it while the file is
unchanged.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal, Sequence

import numpy as np

from ..errors import DatasetError, DatasetWarning, IndexBaseWarning, MalformedFileError, gzip_failure
from ..paths import check_input_file
from ..stored import read_npz
from .coo import SparseTensor, linear_keys, sort_order
from .text_scan import parse_rows

Base = Literal["auto", 0, 1]
Duplicates = Literal["sum", "error"]
Style = Literal["frostt", "parti", "pyttb", "genten"]
CACHE_SUFFIX = ".pbt.npz"
CACHE_VERSION = 1
HEADER_KEYWORD = "sptensor"
MAX_DIM = int(np.iinfo(np.int32).max)  # the tensor kernels keep int32 indices
DIM_BYTES = 8  # every use of a tensor keeps at least one float64 or int64 per index of a mode
_GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def _fields(raw: str) -> list[str]:
    return raw.split("#", 1)[0].split()


def _content_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, fields) of every line that is not blank or a comment."""
    try:
        with _open_text(path) as f:
            for number, raw in enumerate(f, start=1):
                fields = _fields(raw)
                if fields:
                    yield number, fields
    except _GZIP_ERRORS as exc:
        raise gzip_failure(path, exc) from None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Header:
    """What the lines before the first nonzero declare."""

    lines: int  # physical lines up to and including the header
    order: int | None = None
    dims: tuple[int, ...] | None = None
    nnz: int | None = None


def read_header(path: Path) -> Header:
    """Sniff the header dialect from the first content lines."""
    lines = []
    for item in _content_lines(path):
        lines.append(item)
        if len(lines) == 5:
            break
    if not lines:
        raise MalformedFileError(path, "empty file: no nonzeros")
    first_no, first = lines[0]
    keyword = first[0].lower() == HEADER_KEYWORD
    if not keyword and len(first) > 1:
        return Header(lines=0)  # a nonzero already: FROSTT
    rest = lines[1:] if keyword else lines
    if keyword and len(first) != 1:
        raise MalformedFileError(path, f"expected '{HEADER_KEYWORD}' alone on the line", first_no)
    if len(rest) < 2:
        raise MalformedFileError(path, "header without a dimensions line", rest[0][0] if rest else first_no)
    (order_no, order_fields), (dims_no, dims_fields) = rest[0], rest[1]
    order = _int(order_fields[0]) if len(order_fields) == 1 else None
    if order is None or order < 1:
        raise MalformedFileError(path, f"expected the tensor order (one positive integer), got {' '.join(order_fields)!r}", order_no)
    dims = [_int(t) for t in dims_fields]
    if len(dims) != order or any(d is None or d < 1 for d in dims):
        raise MalformedFileError(path, f"expected {order} positive dimensions, got {' '.join(dims_fields)!r}", dims_no)
    last_no, nnz = dims_no, None
    if len(rest) > 2 and len(rest[2][1]) == 1:  # an nnz line (pyttb, GenTen)
        last_no, nnz = rest[2][0], _int(rest[2][1][0])
        if nnz is None or nnz < 0:
            raise MalformedFileError(path, f"expected the nonzero count, got {rest[2][1][0]!r}", last_no)
    return Header(lines=last_no, order=order, dims=tuple(dims), nnz=nnz)  # type: ignore[arg-type]


def _read_bytes(path: Path) -> np.ndarray:
    if path.suffix == ".gz":
        try:
            with gzip.open(path, "rb") as f:
                return np.frombuffer(f.read(), dtype=np.uint8)
        except _GZIP_ERRORS as exc:
            raise gzip_failure(path, exc) from None
    return np.fromfile(path, dtype=np.uint8)


def _parse_fast(path: Path, header: Header, order: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The parallel tokenizer; None when a line is not order+1 numbers (the rescan names it)."""
    buf = _read_bytes(path)
    start = 0
    if header.lines:
        newlines = np.flatnonzero(buf == 10)
        start = int(newlines[header.lines - 1]) + 1 if newlines.size >= header.lines else buf.size
    return parse_rows(buf, start, order)


def _first_bad_line(
    path: Path, header: Header, order: int, base: Sequence[int] | None = None, dims: Sequence[int] | None = None
) -> None:
    """Rescan line by line and raise MalformedFileError at the first line that breaks a rule."""
    for number, fields in _content_lines(path):
        if number <= header.lines:
            continue
        if len(fields) != order + 1:
            raise MalformedFileError(path, f"expected {order} indices and a value, got {len(fields)} fields", number)
        for m, text in enumerate(fields[:order]):
            index = _int(text)
            if index is None:
                raise MalformedFileError(path, f"mode-{m + 1} index {text!r} is not an integer", number)
            if index > MAX_DIM:  # also what the tokenizer cannot hold (over 18 digits)
                raise MalformedFileError(path, f"mode-{m + 1} index {index} is beyond {MAX_DIM}, the largest dimension "
                                               "the tensor kernels take (they use int32 indices)", number)
            if index < (base[m] if base is not None else 0):
                raise MalformedFileError(path, f"mode-{m + 1} index {index} is below the index base {base[m] if base else 0}", number)
            if base is not None and dims is not None and index - base[m] >= dims[m]:
                raise MalformedFileError(path, f"mode-{m + 1} index {index} is outside the declared dimension {dims[m]} ({base[m]}-based)", number)
        try:
            value = float(fields[order])
        except ValueError:
            raise MalformedFileError(path, f"value {fields[order]!r} is not a number", number) from None
        if not np.isfinite(value):
            raise MalformedFileError(path, f"value {fields[order]} is not finite", number)


def _line_of_row(path: Path, header: Header, row: int) -> int:
    for k, (number, _) in enumerate(
        item for item in _content_lines(path) if item[0] > header.lines
    ):
        if k == row:
            return number
    raise AssertionError("row beyond the end of the file")


def _resolve_base(path: Path, header: Header, coords: np.ndarray, base: Base,
                  declared: tuple[int, ...] | None) -> list[int]:
    low = coords.min(axis=0)
    if base in (0, 1):
        return [int(base)] * coords.shape[1]
    if base != "auto":
        raise DatasetError(f"base must be 'auto', 0 or 1, got {base!r}")
    if declared is None:
        bases = [0 if lo == 0 else 1 for lo in low]
        if 0 < sum(bases) < len(bases):
            _warn_mixed_base(path, header, coords, bases)
        return bases
    if (low == 0).any():
        return [0] * coords.shape[1]
    if (coords.max(axis=0) < np.asarray(declared)).all():
        # No 0 and no index at a declared dimension: either base fits the file.
        warnings.warn(f"{path}: index base is ambiguous (no index is 0 or at a declared dimension); "
                      "assumed 1-based: pass base=0 if the file is 0-based", DatasetWarning, stacklevel=3)
    return [1] * coords.shape[1]


def _warn_mixed_base(path: Path, header: Header, coords: np.ndarray, bases: list[int]) -> None:
    """SPLATT's per-mode rule read some modes as 0-based and others as 1-based: say which and why,
    in one warning, since one stray 0 in a 1-based file shifts a whole mode by one."""
    zero_modes = [m for m, b in enumerate(bases) if b == 0]
    zeros = [int(np.count_nonzero(coords[:, m] == 0)) for m in zero_modes]
    first = _line_of_row(path, header, int(np.flatnonzero(coords[:, zero_modes[0]] == 0)[0]))
    names = ", ".join(f"mode-{m + 1}" for m in zero_modes)
    counts = " and ".join(str(z) for z in zeros)
    one_based = ", ".join(f"mode-{m + 1}" for m, b in enumerate(bases) if b == 1)
    verb, its = ("is", "its") if len(zero_modes) == 1 else ("are", "their")
    warnings.warn(
        f"{path}:{first}: {names} {verb} read as 0-based and {one_based} as 1-based: {its} smallest index is 0 "
        f"({counts} nonzero{'s' if zeros != [1] else ''}, the first on this line) and a file without a header is "
        f"0-based in such a mode (SPLATT's rule); if the file is 1-based throughout, that 0 is an error in it "
        f"(read_tns(path, base=1) names it)", IndexBaseWarning, stacklevel=4)


def read_tns(
    path: str | Path,
    *,
    base: Base = "auto",
    dims: Sequence[int] | None = None,
    duplicates: Duplicates = "sum",
) -> SparseTensor:
    """Parse a sparse tensor text file (any dialect above; ``.gz`` allowed).

    ``dims`` declares the dimensions (else the header's, else inferred from the largest
    index). Duplicate coordinates are summed with a warning (``duplicates="sum"``) or
    rejected (``"error"``).
    """
    path = check_input_file(path, "the .tns file")
    if duplicates not in ("sum", "error"):
        raise DatasetError(f"duplicates must be 'sum' or 'error', got {duplicates!r}")
    header = read_header(path)
    first = next((f for n, f in _content_lines(path) if n > header.lines), None)
    if first is None:
        raise MalformedFileError(path, "no nonzeros after the header")
    order = header.order if header.order is not None else len(first) - 1
    if order < 1:
        raise MalformedFileError(path, "a line needs at least one index and a value", header.lines + 1)
    parsed = _parse_fast(path, header, order)
    if parsed is None:
        _first_bad_line(path, header, order)
        raise MalformedFileError(path, "could not be parsed as whitespace-separated indices and values")
    coords, values = parsed
    if header.nnz is not None and header.nnz != len(values):
        raise MalformedFileError(path, f"header declares {header.nnz} nonzeros, the file has {len(values)}", header.lines)
    declared = tuple(int(d) for d in dims) if dims is not None else header.dims
    if declared is not None and len(declared) != order:
        raise DatasetError(f"{path}: {len(declared)} dimensions declared for an order-{order} tensor")
    if not np.isfinite(values).all() or (coords < 0).any():
        _first_bad_line(path, header, order)
    offsets = _resolve_base(path, header, coords, base, declared)
    coords -= np.asarray(offsets, dtype=np.int64)
    if (coords < 0).any() or (declared is not None and (coords >= np.asarray(declared)).any()):
        _first_bad_line(path, header, order, offsets, declared)
    shape = declared if declared is not None else tuple(int(d) for d in coords.max(axis=0) + 1)
    _check_dims(path, header, coords, offsets, shape, declared is not None)
    return _merge_duplicates(path, header, SparseTensor(shape, coords, values), duplicates)


def _check_dims(path: Path, header: Header, coords: np.ndarray, offsets: list[int], shape: tuple[int, ...],
                declared: bool) -> None:
    """Refuse a mode too large for the kernels (int32 indices) or for this machine's memory,
    before anything of that size is allocated (factor matrices, slice counts)."""
    from .. import memory

    available = memory.available_host_memory_bytes()
    for m, dim in enumerate(shape):
        beyond_int32 = dim > MAX_DIM
        beyond_memory = available is not None and dim * DIM_BYTES > available
        if not (beyond_int32 or beyond_memory):
            continue
        if declared:
            what, line = f"mode-{m + 1} dimension {dim} (declared)", None
        else:
            row = int(np.argmax(coords[:, m]))
            what = f"mode-{m + 1} index {int(coords[row, m]) + offsets[m]} (a dimension of {dim})"
            line = _line_of_row(path, header, row)
        if beyond_int32:
            reason = f"{what} is beyond {MAX_DIM}, the largest dimension the tensor kernels take (they use int32 indices)"
        else:
            reason = (f"{what} is too large for this machine's memory: one float64 per index of the mode is "
                      f"{dim * DIM_BYTES / 2**30:.1f} GiB, {available / 2**30:.1f} GiB is available")
        raise MalformedFileError(path, reason, line)


def _merge_duplicates(path: Path, header: Header, tensor: SparseTensor, policy: Duplicates) -> SparseTensor:
    keys = linear_keys(tensor.coords, tensor.dims)
    if keys is not None:
        # Sorting alone is cheaper than the argsort, which is needed only when duplicates exist.
        if not np.any(np.diff(np.sort(keys)) == 0):
            return tensor
        order = np.argsort(keys, kind="stable")
        same = keys[order][1:] == keys[order][:-1]
    else:
        order = sort_order(tensor.coords, tensor.dims)
        ordered = tensor.coords[order]
        same = np.all(ordered[1:] == ordered[:-1], axis=1)
    repeat = np.flatnonzero(same)
    if repeat.size == 0:
        return tensor
    if policy == "error":
        rows = sorted((int(order[repeat[0]]), int(order[repeat[0] + 1])))
        lines = [_line_of_row(path, header, r) for r in rows]
        raise MalformedFileError(path, f"duplicate coordinate (first seen on line {lines[0]})", lines[1])
    starts = np.flatnonzero(np.r_[True, ~same])
    values = np.add.reduceat(tensor.values[order], starts)
    warnings.warn(f"{path}: {len(same) - len(starts) + 1} duplicate coordinates summed", DatasetWarning, stacklevel=3)
    return SparseTensor(tensor.dims, tensor.coords[order[starts]], values)


def write_tns(tensor: SparseTensor, path: str | Path, style: Style = "frostt") -> Path:
    """Write ``tensor`` as text: ``frostt`` (1-based, no header), ``parti`` (order and dims
    lines, 1-based), ``pyttb`` (``sptensor`` header with nnz, 1-based) or ``genten`` (the
    same header, 0-based). Values keep full precision; ``.gz`` compresses."""
    import pandas as pd

    path = Path(path)
    if style not in ("frostt", "parti", "pyttb", "genten"):
        raise DatasetError(f"unknown .tns style {style!r}; one of frostt, parti, pyttb, genten")
    base = 0 if style == "genten" else 1
    head = ""
    if style == "parti":
        head = f"{tensor.order}\n{' '.join(map(str, tensor.dims))}\n"
    elif style in ("pyttb", "genten"):
        head = f"{HEADER_KEYWORD}\n{tensor.order}\n{' '.join(map(str, tensor.dims))}\n{tensor.nnz}\n"
    frame = pd.DataFrame(tensor.coords + base)
    frame[tensor.order] = tensor.values
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open(path, "wt", encoding="utf-8") if path.suffix == ".gz" else open(path, "w", encoding="utf-8")
    with opener as f:
        f.write(head)
        frame.to_csv(f, sep=" ", header=False, index=False, float_format="%.17g", lineterminator="\n")
    return path


def _cache_key(path: Path, options: dict) -> dict:
    stat = path.stat()
    return {"version": CACHE_VERSION, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "options": options}


def read_tns_cached(path: str | Path, **options) -> SparseTensor:
    """``read_tns``, through a binary copy kept beside the file (``<file>.pbt.npz``).

    The copy is reused while the text file's size and modification time and the read
    options are unchanged; a read-only folder just means no copy is kept.
    """
    path = check_input_file(path, "the .tns file")
    cached = path.with_name(path.name + CACHE_SUFFIX)
    key = _cache_key(path, {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(options.items())})
    tensor = load_binary(cached, key)
    if tensor is None:
        tensor = read_tns(path, **options)
        save_binary(tensor, cached, key)
    return tensor


def load_binary(path: Path, key: dict) -> SparseTensor | None:
    """The tensor saved at ``path`` by ``save_binary`` under the same ``key``; None if absent, stale or damaged."""
    if not path.is_file():
        return None
    try:
        data = read_npz(path)
        if json.loads(str(data["key"])) == key:
            return SparseTensor(tuple(data["dims"]), data["coords"], data["values"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        pass
    return None


def save_binary(tensor: SparseTensor, path: Path, key: dict) -> None:
    """Save ``tensor`` with ``key`` as an .npz at ``path`` (atomically: concurrent readers never
    see half a file); a folder that cannot be written just means no copy is kept."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(tmp, key=json.dumps(key), dims=np.asarray(tensor.dims, dtype=np.int64),
                 coords=tensor.coords, values=tensor.values)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
