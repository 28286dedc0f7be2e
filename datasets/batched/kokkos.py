"""Kokkos Kernels' batched CRS Matrix Market files: read them into ``BatchedSystems``, write them back.

Kokkos Kernels' batched sparse perf tests (``perf_test/batched/sparse``) read two files:

- **A** (``%%MatrixMarket batched CRS matrix``): ``%`` comment lines, a header
  ``nrows ncols nnz N``, then nnz lines ``row col v_1 ... v_N`` (1-based indices, one
  value per system; all N matrices share the pattern). Their reader builds ``row_ptr``
  from the row changes, so it needs the entries in row-major order; this reader accepts
  any order (and sorts), the writer writes row-major order with sorted columns.
- **B** (``%%MatrixMarket 2D view``): ``%`` comments, a header ``N n``, then N lines of
  n values (one right-hand side per line).

Errors name the file and the line (``MalformedFileError``): ragged or non-numeric lines,
non-finite values, indices outside 1..n, duplicate coordinates, counts that disagree with
the header, A and B that disagree on N or n, empty files, and (batched GMRES is
Jacobi-preconditioned) a row without a stored diagonal or a zero diagonal value. Blank
lines are skipped. What the headers claim is checked before anything is allocated: fewer
entries than rows (a row without its diagonal), or more than this machine's memory holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from .. import memory
from ..errors import MalformedFileError
from ..paths import check_input_file
from .systems import BatchedSystems

A_BANNER = "%%MatrixMarket batched CRS matrix"
B_BANNER = "%%MatrixMarket 2D view"


def rhs_path(path_a: str | Path) -> Path:
    """The B file next to an A file: a final ``A`` of the name's stem becomes ``B``
    (``A.mm`` -> ``B.mm``, ``batched_A.mm`` -> ``batched_B.mm``); other names get ``_B``
    (``gri30.mm`` -> ``gri30_B.mm``)."""
    path_a = Path(path_a)
    stem, suffix = path_a.stem, path_a.suffix
    stem = stem[:-1] + "B" if stem.endswith("A") else stem + "_B"
    return path_a.with_name(stem + suffix)


def _data_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line that is not a comment or blank."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            text = line.strip()
            if text and not text.startswith("%"):
                yield number, text


def _banner(path: Path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.readline().strip()


def _ints(path: Path, number: int, fields: list[str], what: str) -> list[int]:
    out = []
    for field in fields:
        try:
            out.append(int(field))
        except ValueError:
            raise MalformedFileError(path, f"{what}: {field!r} is not an integer", number) from None
    return out


def _floats(path: Path, number: int, fields: list[str]) -> np.ndarray:
    try:
        values = np.array(fields, dtype=np.float64)
    except ValueError:
        for field in fields:
            try:
                float(field)
            except ValueError:
                raise MalformedFileError(path, f"non-numeric value {field!r}", number) from None
        raise
    if not np.isfinite(values).all():
        bad = fields[int(np.flatnonzero(~np.isfinite(values))[0])]
        raise MalformedFileError(path, f"non-finite value {bad!r}", number)
    return values


def _header(path: Path, layout: str) -> tuple[int, list[int], Iterator[tuple[int, str]]]:
    """The first data line of ``path`` as the integers ``layout`` names ("N n"), its line number, and the
    data lines after it."""
    lines = _data_lines(path)
    try:
        number, text = next(lines)
    except StopIteration:
        raise MalformedFileError(path, f"empty file: no header {layout!r}") from None
    fields = text.split()
    if len(fields) != len(layout.split()):
        raise MalformedFileError(path, f"header must be {layout!r}, found {len(fields)} fields", number)
    return number, _ints(path, number, fields, "header"), lines


def _matrices_header(path: Path) -> tuple[int, int, int, int, Iterator[tuple[int, str]]]:
    """An A file's header: ``(line, n, nnz, N)`` and the data lines after it, checked for what it
    claims before anything of that size is allocated."""
    banner = _banner(path)
    if banner.lower().startswith("%%matrixmarket") and "batched" not in banner.lower():
        raise MalformedFileError(path, f"banner {banner!r} is not a batched CRS matrix ({A_BANNER!r})", 1)
    number, (nrows, ncols, nnz, count), lines = _header(path, "nrows ncols nnz N")
    if nrows < 1 or nrows != ncols:
        raise MalformedFileError(path, f"header: matrices must be square and non-empty, got {nrows} x {ncols}", number)
    if nnz < 1 or count < 1:
        raise MalformedFileError(path, f"header: nnz and N must be positive, got nnz={nnz}, N={count}", number)
    if nnz < nrows:
        raise MalformedFileError(path, f"header: n = {nrows} rows but nnz = {nnz}: every row needs its diagonal entry "
                                       "(Jacobi preconditioning)", number)
    return number, nrows, nnz, count, lines


def _rhs_header(path: Path) -> tuple[int, int, int, Iterator[tuple[int, str]]]:
    """A B file's header: ``(line, N, n)`` and the data lines after it."""
    number, (count, n), lines = _header(path, "N n")
    if count < 1 or n < 1:
        raise MalformedFileError(path, f"header: N and n must be positive, got N={count}, n={n}", number)
    return number, count, n, lines


def _matrices_bytes(n: int, nnz: int, count: int) -> int:
    """What reading an A file allocates: each entry's row, column, line and sort position, its N values three
    times (as read, sorted, transposed), the row pointers, and a flag per row and per diagonal value."""
    return 8 * nnz * (4 + 3 * count) + n * (9 + count)


def _rhs_bytes(count: int, n: int) -> int:
    return 8 * count * n


def _check_memory(path: Path, need: int, claim: str) -> None:
    memory.check_fits(need, f"{path}: its header's {claim}", "the file is too large to read on this machine")


def read_matrices(path: str | Path) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """An A file: ``(n, row_ptr, col_idx, values)``, 0-based CSR, values of shape (N, nnz)."""
    path = Path(path)
    number, nrows, nnz, count, lines = _matrices_header(path)
    _check_memory(path, _matrices_bytes(nrows, nnz, count), f"n = {nrows}, nnz = {nnz}, N = {count}")
    n, header = nrows, number
    rows = np.empty(nnz, dtype=np.int64)
    cols = np.empty(nnz, dtype=np.int64)
    values = np.empty((nnz, count))
    lines_of = np.empty(nnz, dtype=np.int64)
    k = 0
    for number, text in lines:
        if k == nnz:
            raise MalformedFileError(path, f"more entries than the header's nnz={nnz}", number)
        fields = text.split()
        if len(fields) != 2 + count:
            raise MalformedFileError(
                path, f"expected row, column and N={count} values ({2 + count} fields), found {len(fields)}", number)
        i, j = _ints(path, number, fields[:2], "index")
        for index, name in ((i, "row"), (j, "column")):
            if not 1 <= index <= n:
                raise MalformedFileError(path, f"{name} index {index} outside 1..{n}", number)
        rows[k], cols[k], lines_of[k] = i - 1, j - 1, number
        values[k] = _floats(path, number, fields[2:])
        k += 1
    if k < nnz:
        raise MalformedFileError(path, f"header says nnz={nnz} but the file has {k} entries", header)

    order = np.lexsort((cols, rows))
    rows, cols, lines_of = rows[order], cols[order], lines_of[order]
    dup = np.flatnonzero((rows[1:] == rows[:-1]) & (cols[1:] == cols[:-1]))
    if dup.size:
        first, second = sorted((int(lines_of[dup[0]]), int(lines_of[dup[0] + 1])))
        raise MalformedFileError(
            path, f"duplicate entry ({rows[dup[0]] + 1}, {cols[dup[0]] + 1}), first on line {first}", second)
    values = values[order]
    # Jacobi preconditioning divides by the diagonal: it must be stored, and nonzero in every system.
    on_diag = rows == cols
    has_diag = np.zeros(n, dtype=bool)
    has_diag[rows[on_diag]] = True
    if not has_diag.all():
        i = int(np.flatnonzero(~has_diag)[0]) + 1
        raise MalformedFileError(path, f"row {i} has no diagonal entry ({i}, {i}): Jacobi preconditioning needs one")
    zero = values[on_diag] == 0.0  # (n, N), rows in order
    if zero.any():
        i, k = np.unravel_index(int(np.flatnonzero(zero.ravel())[0]), zero.shape)
        raise MalformedFileError(
            path, f"zero diagonal ({i + 1}, {i + 1}) in system {k + 1} of {count}: Jacobi preconditioning divides by it",
            int(lines_of[on_diag][i]))
    row_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=row_ptr[1:])
    return n, row_ptr, cols, np.ascontiguousarray(values.T)


def read_rhs(path: str | Path) -> np.ndarray:
    """A B file: the right-hand sides, shape (N, n)."""
    path = Path(path)
    number, count, n, lines = _rhs_header(path)
    _check_memory(path, _rhs_bytes(count, n), f"N = {count}, n = {n}")
    rhs = np.empty((count, n))
    header = number
    k = 0
    for number, text in lines:
        if k == count:
            raise MalformedFileError(path, f"more right-hand sides than the header's N={count}", number)
        fields = text.split()
        if len(fields) != n:
            raise MalformedFileError(path, f"expected n={n} values, found {len(fields)}", number)
        rhs[k] = _floats(path, number, fields)
        k += 1
    if k < count:
        raise MalformedFileError(path, f"header says N={count} but the file has {k} right-hand sides", header)
    return rhs


def read_kokkos(path_a: str | Path, path_b: str | Path | None = None) -> BatchedSystems:
    """Read an A file and its B file (default: ``rhs_path(path_a)``) into ``BatchedSystems``."""
    path_a = Path(path_a)
    path_b = rhs_path(path_a) if path_b is None else Path(path_b)
    for path, what in ((path_a, "matrix (A)"), (path_b, "right-hand-side (B)")):
        check_input_file(path, f"the {what} file")
    # What both headers claim must fit together before either file is read.
    _, n, nnz, count, _ = _matrices_header(path_a)
    line_b, count_b, n_b, _ = _rhs_header(path_b)
    _check_memory(path_a, _matrices_bytes(n, nnz, count) + _rhs_bytes(count_b, n_b),
                  f"n = {n}, nnz = {nnz}, N = {count} (with {path_b.name}'s N = {count_b}, n = {n_b})")
    n, row_ptr, col_idx, values = read_matrices(path_a)
    rhs = read_rhs(path_b)
    if rhs.shape[0] != values.shape[0]:
        raise MalformedFileError(
            path_b, f"N={rhs.shape[0]} right-hand sides but {path_a.name} holds N={values.shape[0]} matrices", line_b)
    if rhs.shape[1] != n:
        raise MalformedFileError(path_b, f"n={rhs.shape[1]} but {path_a.name} has n={n} rows", line_b)
    return BatchedSystems(n=n, row_ptr=row_ptr, col_idx=col_idx, values=values, rhs=rhs)


def _fmt(row: np.ndarray) -> str:
    return " ".join(map(repr, row.tolist()))  # shortest text that reads back to the same float64


def write_kokkos(systems: BatchedSystems, path_a: str | Path, path_b: str | Path | None = None,
                 comment: str = "written by portabench") -> tuple[Path, Path]:
    """Write ``systems`` as an A file and a B file (default: ``rhs_path(path_a)``) that Kokkos
    Kernels' batched perf tests read; returns both paths. Values round-trip exactly."""
    path_a = Path(path_a)
    path_b = rhs_path(path_a) if path_b is None else Path(path_b)
    rows = np.repeat(np.arange(systems.n), np.diff(systems.row_ptr))
    comment_lines = "".join(f"% {line}\n" for line in comment.splitlines())
    with open(path_a, "w", encoding="utf-8") as f:
        f.write(f"{A_BANNER}\n{comment_lines}%\n")
        f.write(f"{systems.n} {systems.n} {systems.nnz} {systems.num_systems}\n")
        for k in range(systems.nnz):
            f.write(f"{rows[k] + 1} {systems.col_idx[k] + 1} {_fmt(systems.values[:, k])}\n")
    with open(path_b, "w", encoding="utf-8") as f:
        f.write(f"{B_BANNER}\n{comment_lines}%\n")
        f.write(f"{systems.num_systems} {systems.n}\n")
        for k in range(systems.num_systems):
            f.write(_fmt(systems.rhs[k]) + "\n")
    return path_a, path_b
