"""Reading and writing sparse matrices: Matrix Market files and SuiteSparse triplet files.

Matrix Market (``.mtx``, ``.mtx.gz``, or a SuiteSparse download ``<Name>.tar.gz``) goes
through ``scipy.io.mmread``, the maintained reader; this module adds what a benchmark
needs around it: one canonical result type, the main matrix picked out of a SuiteSparse
archive, and errors that name the file (and line) instead of a traceback from scipy.

The triplet files are the two layouts in which SuiteSparse ships ``bcsstk01``:

- CSparse's: ``row col value`` per line, 0-based, no header (the size is the largest
  index + 1);
- CHOLMOD's ``.tri``: ``%`` comment lines, a header ``nrow ncol nnz [stype]``, then 1-based
  ``row col value`` lines. ``stype`` -1 / 1 / 0: lower triangle / upper triangle / all stored.

Every reader returns a ``scipy.sparse.csr_array`` of float64 in canonical form (sorted
indices, duplicates summed). Symmetric and skew-symmetric files are expanded to the full
matrix. Explicitly stored zeros are kept: they are part of the pattern a solver works on.
"""

from __future__ import annotations

import gzip
import re
import tarfile
import warnings
import zlib
from pathlib import Path
from typing import IO, Any

import numpy as np
import scipy.io
import scipy.sparse as sp

from .. import memory
from ..errors import DatasetError, MalformedFileError, PatternMatrixWarning, gzip_failure
from ..paths import check_input_file

PathLike = str | Path
_SCIPY_LINE = re.compile(r"^\s*Line (\d+):\s*(.*)$", re.S)
_HEADER_LINES = 100_000  # comment lines read before the size line (SuiteSparse writes a few)
_READ_ERRORS = (ValueError, OSError, EOFError, RuntimeError, zlib.error, tarfile.TarError, UnicodeError, OverflowError)


# ----------------------------------------------------------------------------- helpers

def _canonical(a: Any, where: str) -> sp.csr_array:
    """A float64 csr_array with sorted indices and summed duplicates; finite values only."""
    if isinstance(a, np.ndarray):  # Matrix Market "array" (dense) format
        if np.iscomplexobj(a):
            raise DatasetError(f"{where}: complex matrices are not supported")
        a = sp.coo_array(a)
    if np.iscomplexobj(a.data):
        raise DatasetError(f"{where}: complex matrices are not supported")
    coo = sp.coo_array(a)
    bad = ~np.isfinite(coo.data.astype(np.float64, copy=False))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise DatasetError(f"{where}: non-finite value {coo.data[k]} at entry "
                           f"({int(coo.row[k]) + 1}, {int(coo.col[k]) + 1}) (1-based)")
    csr = sp.csr_array(coo, dtype=np.float64)
    csr.sum_duplicates()  # also sorts the indices
    return csr


def _wrap_scipy_error(exc: Exception, where: str) -> MalformedFileError:
    text = str(exc).strip() or type(exc).__name__
    match = _SCIPY_LINE.match(text)
    if match:
        return MalformedFileError(where, f"not a valid Matrix Market file: {match.group(2).strip()}", int(match.group(1)))
    return MalformedFileError(where, f"not a valid Matrix Market file: {text}")


def _banner(source: PathLike | IO[bytes]) -> str:
    """The first line of a Matrix Market file or stream, lower-cased ('' if unreadable: mmread names why)."""
    try:
        if isinstance(source, (str, Path)):
            opener = gzip.open if str(source).lower().endswith(".gz") else open
            with opener(source, "rb") as f:
                first = f.readline(256)
        else:
            first = source.readline(256)
            source.seek(0)
    except _READ_ERRORS:
        return ""
    return first.decode("ascii", errors="replace").lower()


def _header_shape(source: PathLike | IO[bytes]) -> tuple[int, int, int] | None:
    """(rows, columns, stored entries) from a Matrix Market header (an array's entries are all its
    cells), or None where it cannot be read (mmread then says why)."""

    def size_line(f: IO[bytes]) -> tuple[bytes, bytes | None]:
        banner = f.readline(1024)
        for _ in range(_HEADER_LINES):
            line = f.readline(1 << 16)
            if not line:
                break
            if line.strip() and not line.lstrip().startswith(b"%"):
                return banner, line
        return banner, None

    try:
        if isinstance(source, (str, Path)):
            opener = gzip.open if str(source).lower().endswith(".gz") else open
            with opener(source, "rb") as f:
                banner, line = size_line(f)
        else:
            banner, line = size_line(source)
            source.seek(0)
    except _READ_ERRORS:
        return None
    if not banner.lower().startswith(b"%%matrixmarket") or line is None:
        return None
    count = 2 if b" array" in banner.lower() else 3
    try:
        sizes = [int(f) for f in line.split()]
    except ValueError:
        return None
    if len(sizes) != count:
        return None
    return sizes[0], sizes[1], sizes[0] * sizes[1] if count == 2 else sizes[2]


def mtx_shape(path: PathLike) -> tuple[int, int, int] | None:
    """(rows, columns, stored entries) a plain or gzipped Matrix Market file's header claims (None: an
    archive, or no readable header), read without reading the entries."""
    path = Path(path)
    if path.name.lower().endswith((".tar.gz", ".tgz", ".tar")) or not path.is_file():
        return None
    return _header_shape(path)


def read_bytes(rows: int, entries: int) -> int:
    """Host memory reading a matrix takes at least: each entry's row, column and value as read (COO), its
    column and value in CSR, and the CSR row pointers twice (a conversion, to blocks or to 64-bit indices,
    copies them)."""
    return 40 * entries + 2 * 8 * (rows + 1)


def _mmread(source: PathLike | IO[bytes], where: str) -> sp.csr_array:
    pattern = _banner(source).split()[3:4] == ["pattern"]
    shape = _header_shape(source)
    if shape is not None:  # what the header claims must fit before scipy allocates it
        rows, cols, entries = shape
        memory.check_fits(read_bytes(rows, entries), f"{where}: its header's {rows} x {cols} matrix of {entries} entries",
                          "the file is too large to read on this machine")
    try:
        a = scipy.io.mmread(source, spmatrix=False)
    except _READ_ERRORS as exc:
        if isinstance(source, (str, Path)) and str(source).lower().endswith(".gz") \
                and isinstance(exc, (EOFError, gzip.BadGzipFile, zlib.error)):
            raise gzip_failure(source, exc) from None
        raise _wrap_scipy_error(exc, where) from None
    matrix = _canonical(a, where)
    if pattern:
        # Benchmarks on such a file run on a matrix of ones: not the values the original holds.
        warnings.warn(f"{where}: a pattern-only Matrix Market file (no values): each of its {matrix.nnz} stored "
                      "entries is given the value 1.0", PatternMatrixWarning, stacklevel=3)
    return matrix


def _archive_stem(path: Path) -> str:
    name = path.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def _main_member(path: Path, names: list[str]) -> str:
    """The main matrix of a SuiteSparse archive: ``<Name>/<Name>.mtx``, not ``<Name>_b.mtx`` & co."""
    mtx = [m for m in names if m.lower().endswith(".mtx")]
    if not mtx:
        raise MalformedFileError(path, "no .mtx file in the archive")
    if len(mtx) == 1:
        return mtx[0]
    stem = _archive_stem(path)
    by_archive = [m for m in mtx if Path(m).name == f"{stem}.mtx"]
    if len(by_archive) == 1:
        return by_archive[0]
    by_folder = [m for m in mtx if Path(m).stem == Path(m).parent.name]
    if len(by_folder) == 1:
        return by_folder[0]
    raise MalformedFileError(path, f"cannot tell the main matrix among {', '.join(sorted(mtx))}")


def _read_archive(path: Path) -> sp.csr_array:
    try:
        with tarfile.open(path, "r:*") as tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            name = _main_member(path, list(members))
            where = f"{path}[{name}]"
            stream = tar.extractfile(members[name])
            if stream is None:
                raise MalformedFileError(where, "unreadable archive member")
            with stream:
                return _mmread(stream, where)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise MalformedFileError(path, f"not a readable tar archive ({type(exc).__name__}: {exc})") from None


def _check_file(path: Path) -> None:
    check_input_file(path, "the Matrix Market file")
    if path.stat().st_size == 0:
        raise MalformedFileError(path, "empty file")


# ----------------------------------------------------------------------------- Matrix Market

def read_mtx(path: PathLike) -> sp.csr_array:
    """Read a Matrix Market matrix: ``.mtx``, ``.mtx.gz``, or a SuiteSparse ``<Name>.tar.gz``.

    Handles every coordinate and array layout scipy does: general, symmetric and
    skew-symmetric (expanded to the full matrix), real or integer values, and pattern
    files, which have no values: each stored entry is given the value 1.0. Complex
    matrices are refused. From an archive the main matrix ``<Name>/<Name>.mtx`` is read
    (right-hand sides such as ``<Name>_b.mtx`` are ignored). Returns a canonical float64
    ``csr_array``; a bad file raises ``MalformedFileError`` naming it (and the line when
    scipy reports one), a NaN or infinite value a ``DatasetError``.
    """
    path = Path(path)
    _check_file(path)
    if path.name.lower().endswith((".tar.gz", ".tgz", ".tar")):
        return _read_archive(path)
    return _mmread(path, str(path))


def write_mtx(matrix: Any, path: PathLike, *, symmetric: bool | None = None, comment: str = "") -> None:
    """Write ``matrix`` (a scipy sparse matrix/array, a dense array or a ``BlockMatrix``) as Matrix Market.

    A ``BlockMatrix`` is written as its true ``n x n`` matrix (padding and the zeros
    stored inside blocks left out). ``symmetric=True`` writes only the lower triangle
    with a ``symmetric`` header (checked first: the matrix must equal its transpose);
    the default is ``symmetric`` for a ``BlockMatrix`` marked symmetric, else ``general``.
    A path ending in ``.gz`` is gzip-compressed. Values keep full float64 precision.
    """
    from .bcsr import BlockMatrix  # local: bcsr imports nothing from here, but keep the layers apart

    path = Path(path)
    if isinstance(matrix, BlockMatrix):
        if symmetric is None:
            symmetric = matrix.symmetric
        a = matrix.to_csr()
    else:
        a = sp.csr_array(matrix, dtype=np.float64)
    if symmetric:
        if a.shape[0] != a.shape[1] or (abs(a - a.T) > 0).nnz:
            raise DatasetError(f"{path}: cannot write a non-symmetric matrix as symmetric")
    symmetry = "symmetric" if symmetric else "general"
    coo = sp.coo_array(a)
    if path.name.lower().endswith(".gz"):
        with gzip.open(path, "wb") as f:
            scipy.io.mmwrite(f, coo, comment=comment, symmetry=symmetry)
    else:
        scipy.io.mmwrite(path, coo, comment=comment, symmetry=symmetry)


# ----------------------------------------------------------------------------- triplets

def _data_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, stripped text) of every non-blank, non-comment line."""
    _check_file(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedFileError(path, f"not a text file ({exc.reason} at byte {exc.start})") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s and s[0] not in "%#":
            out.append((number, s))
    return out


def _parse_entries(path: Path, lines: list[tuple[int, str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """rows, cols (float), values and line numbers of ``row col value`` lines."""
    fields = []
    for number, text in lines:
        parts = text.split()
        if len(parts) != 3:
            raise MalformedFileError(path, f"expected 3 fields 'row col value', found {len(parts)}", number)
        fields.append(parts)
    numbers = np.array([n for n, _ in lines], dtype=np.int64)
    try:
        table = np.array(fields, dtype=np.float64).reshape(-1, 3)
    except ValueError:
        for (number, _), parts in zip(lines, fields):
            for token in parts:
                try:
                    float(token)
                except ValueError:
                    raise MalformedFileError(path, f"not a number: {token!r}", number) from None
        raise  # unreachable: some token failed above
    return table[:, 0], table[:, 1], table[:, 2], numbers


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _assemble(path: Path, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, numbers: np.ndarray, *,
              base: int, shape: tuple[int, int] | None, triangle: str | None) -> sp.csr_array:
    """Validate 0/1-based float indices and values; expand a stored triangle; build the csr."""
    for name, idx in (("row", rows), ("column", cols)):
        bad = (idx != np.round(idx)) | ~np.isfinite(idx)
        if bad.any():
            k = _first(bad)
            raise MalformedFileError(path, f"{name} index {idx[k]!r} is not an integer", int(numbers[k]))
        bad = idx < base
        if bad.any():
            k = _first(bad)
            raise MalformedFileError(path, f"{name} index {int(idx[k])} is below {base} (the file is {base}-based)",
                                     int(numbers[k]))
    bad = ~np.isfinite(values)
    if bad.any():
        k = _first(bad)
        raise MalformedFileError(path, f"non-finite value {values[k]}", int(numbers[k]))
    r = rows.astype(np.int64) - base
    c = cols.astype(np.int64) - base
    if shape is None:
        shape = (int(r.max()) + 1, int(c.max()) + 1)
        if triangle:
            shape = (max(shape),) * 2
    else:
        for name, idx, size in (("row", r, shape[0]), ("column", c, shape[1])):
            bad = idx >= size
            if bad.any():
                k = _first(bad)
                raise MalformedFileError(path, f"{name} index {int(idx[k]) + base} is outside the declared size {size}",
                                         int(numbers[k]))
    if triangle:
        if shape[0] != shape[1]:
            raise MalformedFileError(path, f"a symmetric matrix must be square, not {shape[0]}x{shape[1]}")
        bad = (c > r) if triangle == "lower" else (c < r)
        if bad.any():
            k = _first(bad)
            side = "above" if triangle == "lower" else "below"
            raise MalformedFileError(path, f"entry ({int(r[k]) + base}, {int(c[k]) + base}) is {side} the diagonal "
                                     f"in a file that stores the {triangle} triangle", int(numbers[k]))
        off = r != c
        r, c, values = np.concatenate([r, c[off]]), np.concatenate([c, r[off]]), np.concatenate([values, values[off]])
    csr = sp.csr_array((values, (r, c)), shape=shape, dtype=np.float64)
    csr.sum_duplicates()
    return csr


def read_triplets(path: PathLike, *, base: int = 0, symmetric: bool = False,
                  shape: tuple[int, int] | None = None) -> sp.csr_array:
    """Read a headerless triplet file (``row col value`` per line; ``%``/``#`` comment lines skipped).

    ``base`` is the index base (0 for CSparse's files); the size is ``shape`` or else the
    largest index + 1. ``symmetric=True``: the file stores the lower triangle (row >= col)
    of a symmetric matrix, which is expanded to the full matrix (an entry above the
    diagonal is an error).
    """
    path = Path(path)
    if base not in (0, 1):
        raise DatasetError(f"index base must be 0 or 1, not {base}")
    lines = _data_lines(path)
    if not lines:
        raise MalformedFileError(path, "empty file: no entries")
    rows, cols, values, numbers = _parse_entries(path, lines)
    return _assemble(path, rows, cols, values, numbers, base=base, shape=shape,
                     triangle="lower" if symmetric else None)


def read_cholmod_triplets(path: PathLike, *, symmetric: bool | None = None) -> sp.csr_array:
    """Read CHOLMOD's ``.tri`` triplet file: header ``nrow ncol nnz [stype]``, then 1-based ``row col value``.

    ``symmetric=None`` follows the header's ``stype`` (-1: lower triangle stored, 1: upper,
    0 or absent: unsymmetric); ``True`` expands the stored triangle (lower unless stype is
    1) to the full matrix; ``False`` returns the entries as stored.
    """
    path = Path(path)
    lines = _data_lines(path)
    if not lines:
        raise MalformedFileError(path, "empty file: no header")
    header_line, header = lines[0]
    parts = header.split()
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) not in (3, 4) or min(numbers[:3]) < 0:
        raise MalformedFileError(path, f"expected a header 'nrow ncol nnz [stype]', found {header!r}", header_line)
    nrow, ncol, nnz = numbers[:3]
    stype = numbers[3] if len(numbers) == 4 else 0
    if stype not in (-1, 0, 1):
        raise MalformedFileError(path, f"stype must be -1, 0 or 1, not {stype}", header_line)
    entries = lines[1:]
    if len(entries) != nnz:
        raise MalformedFileError(path, f"header declares {nnz} entries, the file has {len(entries)}", header_line)
    if not entries:
        raise MalformedFileError(path, "empty file: no entries")
    if symmetric is None:
        symmetric = stype != 0
    triangle = ("upper" if stype == 1 else "lower") if symmetric else None
    rows, cols, values, line_numbers = _parse_entries(path, entries)
    return _assemble(path, rows, cols, values, line_numbers, base=1, shape=(nrow, ncol), triangle=triangle)


def read_matrix(path: PathLike, *, symmetric: bool | None = None) -> sp.csr_array:
    """Read any matrix file this module knows, by its name.

    ``.mtx``, ``.mtx.gz``, ``.tar.gz``/``.tgz``: Matrix Market (``symmetric`` is ignored:
    the header says); ``.tri``: CHOLMOD triplets; anything else (``.tri0``, ``.txt``):
    0-based headerless triplets, symmetric (lower triangle stored) when ``symmetric``.
    """
    name = Path(path).name.lower()
    if name.endswith((".mtx", ".mtx.gz", ".tar.gz", ".tgz", ".tar")):
        return read_mtx(path)
    if name.endswith(".tri"):
        return read_cholmod_triplets(path, symmetric=symmetric)
    return read_triplets(path, base=0, symmetric=bool(symmetric))
