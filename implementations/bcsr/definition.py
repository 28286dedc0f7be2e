"""BCSR SpMV (paper [001]): the problem, its work model and the check.

One run computes y = A x for a square matrix A stored in block-CSR: dense ``bs x bs``
blocks, 2 <= bs <= 32, float64 values, int32 block indices (``datasets/matrices/bcsr.py``).

**Cases** (``datasets/matrices/suitesparse.py``): the seeded stand-ins of the paper's six
SuiteSparse matrices, each at its own block size (``gt01r`` ... ``audikw_1``); the same
matrices as downloaded (``<name>-real``: skipped where not in the dataset cache); and the
block-size sweep ``block-sweep-bs<B>`` (B = 2 ... 32, equal bytes of block values).
``file`` is a given matrix (``portabench verify --matrix``).

**Size** (``mib``): the MiB of block values asked for. A stand-in runs at the scale giving
that many, at most its real size (scale 1), as MTTKRP's stand-ins take the nonzeros asked
for; a sweep matrix gets exactly that many; a real matrix runs as it is. The option
``copies`` (``one``, the default, or ``to-size``) says what a matrix smaller than the size
asked becomes: ``one`` keeps it at its real size; ``to-size`` replicates it block-diagonally,
``ceil(mib / its MiB)`` copies of the real-size matrix (each copy multiplies its own part of
a fresh x), so that it is at least that size and beyond the caches while every block row
keeps the real matrix's pattern. Defaults: on the GPU, 600 MiB puts every stand-in at its
real size (audikw_1: 592 MiB of blocks, 12x the H100's L2) and each sweep matrix at 600 MiB;
on the CPU, 4x the last-level cache in block values alone (128 MiB under a 32 MiB L3, as
STREAM's arrays are sized). The main comparison replicates (copies ``to-size``) on both, so
that every case is beyond the caches and each copy keeps the real size (GPU: gt01r 155 copies,
raefsky4 41, bmw7st_1 6, pwtk 5, rm07r and audikw_1 2; CPU: gt01r 33, raefsky4 9, bmw7st_1 2);
the ``real-size`` study keeps one copy (gt01r and raefsky4 then fit in an H100's L2). ``one``
is the default: a result recorded without the option is of one copy. Matrices of 16 MiB of blocks or more are generated once and kept in the
dataset cache (``datasets/matrices/store.py``): asv prepares every variant in a new process;
copies are made from the stored one in memory.

**Work model** (written once, here). Bytes: the compulsory reads of the smallest of three storages,
each read once. BCSR's are the paper's "unique data read", x, val, col_idx and row_ptr: ``8 n_padded
+ 8 nnzb bs^2 + 4 nnzb + 4 (block rows + 1)``. CSR's, of the true nonzeros (the zeros stored inside
blocks left out), are ``8 n_padded + 12 nnz + 4 (n + 1)``, fewer where blocks hold many zeros (fill,
stored entries per nonzero, above about 1.47: bmw7st_1, pwtk, rm07r), and a variant may read either
(``cupy-csr``, ``cusparse-csr``, ``mkl-csr``); charging it BCSR's bytes would credit it with more
than the machine's peak. Bit-mask blocks (bs <= 8: each block's 64-bit mask of its nonzeros, with
its column above the mask's bits to bs 6, else beside it, and the nonzeros' values) read ``8
n_padded + 8 nnz + 8 nnzb`` (``+ 4 nnzb`` from bs 7) ``+ 12 (block rows + 1)``, the fewest of the
three wherever blocks hold stored zeros (``cupy-bitmask``); a count that left them out would rate
them over CSR's bytes, an effective rate that could pass the machine's peak.
CSR16's offsets (``cupy-csr16``, ``numba-csr16``) need a matrix's column span, which a planned shape
lacks; on every stand-in they read more than bit-mask blocks. y (8 n_padded written) is not counted,
so that rates compare with the paper's figures and with the cuSPARSE rates in ``reference/NOTES.md``,
measured under the same count (dense blocks, where BCSR's count is the smaller); it would add 1 / (8
blocks per row bs) of the total (0.3 % at bs 3 and 15 blocks per row). A variant that stores more
(the padded CPU variant, CSR on dense blocks) is charged the same bytes: its extra traffic is its
cost. nnz is the case's (its fill: the published one for the stand-ins and real matrices, 1 for the
sweep; a given matrix's own). Flops: ``2 nnzb bs^2`` (blocks' stored zeros included, as every BCSR
kernel multiplies them). Working set (what the report's "in cache" looks at): BCSR's bytes, the
matrix as every variant is given it.

**Check.** Componentwise: ``|y - y_ref| / (|A| |x|)``, the largest entry. Any summation
order errs by at most L u times that bound (L: the most stored entries in one row,
u = 2^-53), so variant and oracle differ by at most 2 L u; a dropped, doubled or misplaced
block moves an entry by a sizeable fraction of its bound. A row without stored entries
(an empty block row) must be exactly zero. The output is y's first n entries (the padded
tail of a padded matrix is not part of the answer).

Inputs: the matrix's values (the stand-in's seeded ones, or the file's), x uniform in
[0.5, 1.5) with random signs (never zero or constant).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from portabench.datasets import get_dataset, load, memory
from portabench.datasets.cache import cached_path
from portabench.datasets.errors import BlockPaddingWarning
from portabench.datasets.matrices import SUITESPARSE, SWEEP_BLOCK_SIZES, BlockMatrix, block_sweep, standin, to_bcsr
from portabench.datasets.matrices.mmio import mtx_shape, read_bytes
from portabench.datasets.matrices.store import stored
from portabench.datasets.matrices.suitesparse import MIN_BLOCK_ROWS, SWEEP_BLOCKS_PER_ROW, SWEEP_BYTES, standin_size
from .. import hardware
from portabench.reference.bcsr import bcsr_matvec

from ..model import (COMPONENTWISE, MAIN, Check, Device, Kernel, PortabenchError, Problem, Study, Sweep,
                     UnknownNameError, Work, beyond_cache_bytes, componentwise_error)

STANDINS: tuple[str, ...] = tuple(SUITESPARSE)  # gt01r, raefsky4, bmw7st_1, pwtk, rm07r, audikw_1
REAL_SUFFIX = "-real"
REAL: tuple[str, ...] = tuple(f"{name}{REAL_SUFFIX}" for name in STANDINS)
SWEEP: tuple[str, ...] = tuple(f"block-sweep-bs{bs}" for bs in SWEEP_BLOCK_SIZES)
SWEEP_STUDY = "block-size"  # the study of the sweep matrices (the report draws them apart)
REAL_SIZE_STUDY = "real-size"  # the stand-ins as the seed ran them: one copy, the small ones in cache
CASES: tuple[str, ...] = STANDINS + REAL + SWEEP
FILE_CASE = "file"  # a given matrix (``portabench verify --matrix``)

MIN_BS, MAX_BS = 2, 32
MIB = 1 << 20
VALUE_BYTES, INDEX_BYTES = 8, 4  # float64 values, int32 block indices (every variant)
INT32_MAX = np.iinfo(np.int32).max
UNIT_ROUNDOFF = 2.0**-53
MIN_TOLERANCE = 1e-13
DEFAULT_MIB: dict[Device, int] = {"gpu": 600}  # the CPU's follows its last-level cache (cpu_default_mib)
HOST_COPIES = 2  # the block values a run holds at least twice in host memory: the matrix and a variant's copy
ONE, TO_SIZE = "one", "to-size"
COPIES: tuple[str, ...] = (ONE, TO_SIZE)  # the ``copies`` option, the default first (what older results ran)


@dataclass(frozen=True)
class Shape:
    """What the work model needs of a matrix: size, block size, block rows, stored blocks and
    their fill (stored entries per true nonzero); ``span``, the columns the widest block row
    covers (first stored block's first to last's last; None where not counted), is for the
    formats that store column offsets."""

    n: int
    bs: int
    block_rows: int
    nnzb: int
    fill: float = 1.0
    span: int | None = field(default=None, compare=False)  # planned shapes (``shape_of``) leave it out

    @property
    def nnz(self) -> float:
        """True nonzeros: the stored entries over the fill."""
        return self.nnzb * self.bs**2 / self.fill

    @property
    def n_padded(self) -> int:
        return self.block_rows * self.bs


def cpu_default_mib(llc_bytes: int | None = None) -> int:
    """The CPU default: block values beyond the last-level cache (this machine's if not given) by the in-cache
    rule (``model.beyond_cache_bytes``), in whole MiB."""
    llc = hardware.cpu_last_level_cache_bytes() if llc_bytes is None else llc_bytes
    return max(1, -(-beyond_cache_bytes(llc) // MIB))


def file_bytes(n: int, entries: int, bs: int) -> int:
    """Host memory a matrix file of ``n`` rows and ``entries`` stored entries takes at least to verify at block
    size ``bs``: reading it, its values in blocks twice (the matrix, a variant's copy), and ten vectors of the
    padded size (x padded and not, y, the oracle's, the error bound, the variants' outputs)."""
    return read_bytes(n, entries) + HOST_COPIES * entries * VALUE_BYTES + 10 * (-(-n // bs) * bs) * VALUE_BYTES


def check_copies(copies: Any) -> str:
    if copies not in COPIES:
        raise UnknownNameError(f"unknown copies {copies!r} of kernel 'bcsr'; known: {', '.join(COPIES)}")
    return str(copies)


def replicated(shape: Shape, copies: int) -> Shape:
    """The shape of ``copies`` copies of a matrix on the block diagonal: a padded copy's empty padding
    rows lie inside the bigger matrix (as rows with no entries), only the last copy's are padding."""
    return Shape(n=(copies - 1) * shape.n_padded + shape.n, bs=shape.bs, block_rows=copies * shape.block_rows,
                 nnzb=copies * shape.nnzb, fill=shape.fill, span=shape.span)


def replicate(matrix: BlockMatrix, copies: int) -> BlockMatrix:
    """``copies`` copies of ``matrix`` on the block diagonal (``replicated`` gives its shape)."""
    if copies == 1:
        return matrix
    bsr, rows, nnzb = matrix.bsr, matrix.block_rows, matrix.nnzb
    k = np.arange(copies, dtype=np.int64)
    indptr = np.concatenate([[0], (bsr.indptr[1:][None, :] + (k * nnzb)[:, None]).ravel()])
    indices = (bsr.indices[:nnzb][None, :] + (k * rows)[:, None]).ravel()
    data = np.tile(bsr.data[:nnzb], (copies, 1, 1))
    size = copies * matrix.n_padded
    big = sp.bsr_array((data, indices, indptr), shape=(size, size), blocksize=(matrix.bs, matrix.bs))
    return BlockMatrix(bsr=big, n=(copies - 1) * matrix.n_padded + matrix.n, bs=matrix.bs, symmetric=matrix.symmetric)


def matrix_shape(matrix: BlockMatrix, fill: float | None = None) -> Shape:
    """The shape of ``matrix``, with ``fill`` (default: the matrix's own, counted) and its span."""
    return Shape(matrix.n, matrix.bs, matrix.block_rows, matrix.nnzb, fill=matrix.fill if fill is None else fill,
                 span=column_span(matrix))


def column_span(matrix: BlockMatrix) -> int:
    """The columns the widest block row covers, from its first stored block's first column to its
    last's last (0 for a matrix without blocks)."""
    ptr, indices = matrix.bsr.indptr, matrix.bsr.indices[: matrix.nnzb]
    starts = ptr[:-1][np.diff(ptr) > 0]
    if starts.size == 0:
        return 0
    widths = np.maximum.reduceat(indices, starts) - np.minimum.reduceat(indices, starts)
    return (int(widths.max()) + 1) * matrix.bs


def bcsr_bytes(shape: Shape) -> int:
    """x, val, col_idx and row_ptr of the BCSR storage, each read once."""
    return (VALUE_BYTES * shape.n_padded + VALUE_BYTES * shape.nnzb * shape.bs**2
            + INDEX_BYTES * shape.nnzb + INDEX_BYTES * (shape.block_rows + 1))


def csr_bytes(shape: Shape) -> float:
    """x, values, column indices and row pointers of the CSR storage of the true nonzeros, each read once."""
    return VALUE_BYTES * shape.n_padded + (VALUE_BYTES + INDEX_BYTES) * shape.nnz + INDEX_BYTES * (shape.n + 1)


OFFSET_BYTES = 2  # CSR16's column offsets (``cupy-csr16``, ``numba-csr16``)
MAX_SPAN = 1 << (8 * OFFSET_BYTES)  # columns a row may cover: offsets 0..65535


def csr16_bytes(shape: Shape) -> float:
    """x, values, 2-byte column offsets, row pointers and each row's base column, each read once."""
    return (VALUE_BYTES * shape.n_padded + (VALUE_BYTES + OFFSET_BYTES) * shape.nnz
            + INDEX_BYTES * (shape.n + 1) + INDEX_BYTES * shape.n)


def fits_csr16(span: int | None) -> bool:
    """Whether every row's column offsets fit 16 bits, given the widest block row's ``span`` (a row
    covers at most its block row's columns; None: not counted, so no)."""
    return span is not None and span <= MAX_SPAN


MAX_MASK_BS = 8  # bit-mask blocks: bs^2 bits fit a 64-bit mask
MAX_PACKED_BS = 6  # bs^2 <= 36 mask bits leave 28 for the block column: 268 M block columns
MASK_BYTES = 8


def bitmask_bytes(shape: Shape) -> float:
    """x, the nonzeros' values, each block's mask (and column index, from bs 7), and each block row's
    bounds (a 4-byte pointer and an 8-byte first value), read once."""
    header = MASK_BYTES + (0 if shape.bs <= MAX_PACKED_BS else INDEX_BYTES)
    return (VALUE_BYTES * shape.n_padded + VALUE_BYTES * shape.nnz + header * shape.nnzb
            + (INDEX_BYTES + 8) * (shape.block_rows + 1))


def work_model(shape: Shape) -> Work:
    """Bytes (the smallest storage's compulsory reads; see the module docstring) and flops of one run;
    the working set (what decides "in cache") is the matrix as the problem stores it, in blocks."""
    reads = [bcsr_bytes(shape), csr_bytes(shape)] + ([bitmask_bytes(shape)] if shape.bs <= MAX_MASK_BS else [])
    return Work(bytes=float(min(reads)), flops=float(2 * shape.nnzb * shape.bs**2),
                working_set=float(bcsr_bytes(shape)))


def check_case(case: str) -> str:
    if case not in CASES:
        raise UnknownNameError(f"unknown case {case!r} of kernel 'bcsr'; known: {', '.join(CASES)}")
    return case


def _whole(value: Any) -> int | None:
    """``value`` as an int if it is one (or a string of one), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    text = str(value).strip()
    return int(text) if text.lstrip("-").isdigit() else None


def check_mib(mib: Any) -> int:
    value = _whole(mib)
    if value is None or value < 1:
        raise PortabenchError(f"bcsr: the size is a positive whole number of MiB of block values, got {mib!r}")
    return value


def check_block_size(bs: Any) -> int:
    value = _whole(bs)
    if value is None or not MIN_BS <= value <= MAX_BS:
        raise PortabenchError(f"bcsr: the block size must be an integer in {MIN_BS}..{MAX_BS}, got {bs!r}")
    return value


def real_name(case: str) -> str | None:
    """The SuiteSparse key of a ``<name>-real`` case, else None."""
    return case[: -len(REAL_SUFFIX)] if case in REAL else None


def sweep_block_size(case: str) -> int | None:
    return int(case.removeprefix("block-sweep-bs")) if case in SWEEP else None


def block_size(case: str) -> int:
    """The block size of a case (the report's x axis for the sweep)."""
    bs = sweep_block_size(check_case(case))
    return bs if bs is not None else SUITESPARSE[real_name(case) or case].bs


def real_unavailable(case: str) -> str | None:
    """Why the real matrix of ``case`` cannot be used here (not downloaded), or None."""
    name = real_name(case)
    if name is None:
        return None
    path = cached_path(get_dataset(name))
    if path.exists():
        return None
    return f"{name} is not downloaded ({path}): `portabench datasets fetch {name}`"


def standin_scale(name: str, mib: int) -> float:
    """The stand-in scale giving ``mib`` MiB of block values, at most 1 (the real size)."""
    m = SUITESPARSE[name]
    return min(1.0, mib * MIB / (m.nnzb_full * m.bs**2 * VALUE_BYTES))


def sweep_scale(mib: int) -> float:
    return mib * MIB / SWEEP_BYTES


def copies_of(case: str, mib: int, copies: str = ONE) -> int:
    """How many copies of ``case``'s real-size matrix make it (1 unless ``copies`` is ``to-size`` and the
    real matrix holds fewer than ``mib`` MiB of block values; never for a sweep matrix, made to size)."""
    if check_copies(copies) == ONE or case in SWEEP:
        return 1
    if real_name(case) is None and standin_scale(case, mib) < 1:
        return 1  # a stand-in scaled down to the size asked
    one = _one_shape(case, mib)  # the real size
    return max(1, -(-check_mib(mib) * MIB // (VALUE_BYTES * one.nnzb * one.bs**2)))


def shape_of(case: str, mib: int, copies: str = ONE) -> Shape:
    """The matrix shape of ``case`` at ``mib`` (and ``copies``) without generating it (the generators'
    own arithmetic; the tests check it against generated matrices). Real matrices: the published
    block counts (the table in ``reference/NOTES.md``, rounded to 4 digits for some)."""
    k = copies_of(case, mib, copies)
    return replicated(_one_shape(case, mib), k)


def _one_shape(case: str, mib: int) -> Shape:
    """One copy of ``case`` at ``mib``: a stand-in at most its real size."""
    check_case(case)
    bs = sweep_block_size(case)
    if bs is not None:  # block_sweep: equal bytes, 15 blocks per block row, symmetric
        blocks = round(mib * MIB / (VALUE_BYTES * bs * bs))
        block_rows = round(blocks / SWEEP_BLOCKS_PER_ROW)
        off = round(blocks / block_rows * block_rows) - block_rows
        return Shape(block_rows * bs, bs, block_rows, block_rows + 2 * (off // 2))
    name = real_name(case)
    if name is not None:
        facts = get_dataset(name).facts
        return Shape(int(facts["n"]), int(facts["bs"]), int(facts["block_rows"]), int(facts["nnzb_full"]),
                     fill=float(facts["fill"]))
    m = SUITESPARSE[case]
    n, block_rows = standin_size(case, standin_scale(case, mib))
    off = round(m.nnzb_full / m.block_rows * block_rows) - block_rows  # fem_block_matrix's off-diagonal blocks
    nnzb = block_rows + (2 * (off // 2) if m.symmetric else off)
    return Shape(n, m.bs, block_rows, nnzb, fill=m.fill)


def too_small(case: str, mib: int) -> str | None:
    """Why the generators cannot make ``case`` at ``mib`` (too few block rows), or None."""
    if real_name(case) is not None:
        return None
    shape = _one_shape(case, mib)
    least = 2 * SWEEP_BLOCKS_PER_ROW if case in SWEEP else MIN_BLOCK_ROWS
    if shape.block_rows < least:
        return f"{case} at {mib} MiB has {shape.block_rows} block rows, fewer than the {least} its generator needs"
    return None


@functools.lru_cache(maxsize=1)  # one matrix at a time: at GPU sizes each takes gigabytes
def case_matrix(case: str, mib: int, seed: int, copies: str = ONE) -> BlockMatrix:
    """The matrix of ``case`` (stand-in or sweep at ``mib``, seeded; or the real one; replicated to
    ``mib`` where ``copies`` says so), read-only."""
    k = copies_of(case, mib, copies)
    matrix = replicate(_one_matrix(case, mib, seed), k)
    for a in (matrix.bsr.indptr, matrix.bsr.indices, matrix.bsr.data):
        a.setflags(write=False)
    return matrix


def _one_matrix(case: str, mib: int, seed: int) -> BlockMatrix:
    """One copy: the stand-in or sweep matrix at ``mib`` (seeded), or the real one."""
    name = real_name(case)
    if name is not None:
        reason = real_unavailable(case)
        if reason is not None:
            raise PortabenchError(f"bcsr case {case}: {reason}")
        matrix = load(name)
    else:  # large ones come from the on-disk store: asv prepares each variant in a new process
        shape = shape_of(case, mib)
        values_bytes = VALUE_BYTES * shape.nnzb * shape.bs**2
        if case in SWEEP:
            bs, scale = sweep_block_size(case), sweep_scale(mib)
            matrix = stored(case, scale, seed, values_bytes, lambda: block_sweep(bs, scale, seed))
        else:
            scale = standin_scale(case, mib)
            matrix = stored(case, scale, seed, values_bytes, lambda: standin(case, scale, seed))
    return matrix


def check_matrix(matrix: Any) -> BlockMatrix:
    """``matrix`` if every variant can take it, else a one-line PortabenchError."""
    if not isinstance(matrix, BlockMatrix):
        raise PortabenchError(f"bcsr needs a BlockMatrix (datasets.matrices.to_bcsr), got {type(matrix).__name__}")
    check_block_size(matrix.bs)
    data = matrix.bsr.data
    if not np.isfinite(data).all():
        raise PortabenchError("bcsr: the matrix holds NaN or infinite values")
    if matrix.nnzb > INT32_MAX or matrix.n_padded > INT32_MAX:
        raise PortabenchError(f"bcsr: {matrix.nnzb} blocks / {matrix.n_padded} rows exceed int32 indices")
    indptr, indices = matrix.bsr.indptr, matrix.bsr.indices[: matrix.nnzb]
    if indptr[0] != 0 or (np.diff(indptr) < 0).any() or (indices.size and not 0 <= indices.min() <= indices.max()
                                                          < matrix.block_rows):
        raise PortabenchError("bcsr: malformed block structure (row pointers or block columns out of range)")
    return matrix


@dataclass(frozen=True)
class BcsrProblem(Problem):
    """A matrix (``case`` at ``mib``, replicated as ``copies`` says; or ``given``) and a seeded x."""

    kernel: ClassVar[str] = "bcsr"
    case: str  # the matrix
    size: int  # MiB of block values
    seed: int = 0
    copies: str = ONE
    given: BlockMatrix | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.given is None:
            check_case(self.case)
        else:
            check_matrix(self.given)
        object.__setattr__(self, "size", check_mib(self.size))  # "4" -> 4
        object.__setattr__(self, "copies", check_copies(self.copies))

    @property
    def matrix(self) -> BlockMatrix:
        if self.given is not None:
            return self.given
        return case_matrix(self.case, self.size, self.seed, self.copies)

    @property
    def bs(self) -> int:
        return self.matrix.bs

    @property
    def x(self) -> np.ndarray:
        """n entries, magnitudes uniform in [0.5, 1.5) with random signs, read-only."""
        if "x" not in self._cache:
            rng = np.random.default_rng([self.seed, 1])  # stream 1: the stand-in uses the seed itself
            n = self.matrix.n
            x = rng.uniform(0.5, 1.5, n) * rng.choice(np.array([-1.0, 1.0]), n)
            x.setflags(write=False)
            self._cache["x"] = x
        return self._cache["x"]

    @property
    def x_padded(self) -> np.ndarray:
        """x extended with zeros to the padded size: what a BCSR kernel multiplies."""
        return self.matrix.padded_vector(self.x)

    def shape(self) -> Shape:
        """The matrix's shape; its fill the case's (as ``shape_of`` gives it), a given matrix's own."""
        return matrix_shape(self.matrix, None if self.given is not None else _one_shape(self.case, self.size).fill)

    def inputs(self) -> dict[str, np.ndarray]:
        """row_ptr, col_idx (int32), values (nnzb x bs x bs, row-major blocks), x, and n."""
        m = self.matrix
        return {"row_ptr": m.bsr.indptr.astype(np.int32), "col_idx": m.bsr.indices[: m.nnzb].astype(np.int32),
                "values": m.bsr.data[: m.nnzb], "x": self.x, "n": np.array(m.n)}

    def device_footprint(self) -> tuple[str, float]:
        """The block values, what the size counts (their indices and the vectors come on top)."""
        return "the blocks", float(self.matrix.values_bytes)

    def work(self) -> Work:
        return work_model(self.shape())

    def _matvec(self, absolute: bool) -> np.ndarray:
        m = self.matrix
        y = bcsr_matvec(m.bsr.indptr, m.bsr.indices, m.bsr.data[: m.nnzb], self.x_padded, absolute=absolute)
        return y[: m.n]

    def reference(self) -> np.ndarray:
        if "y" not in self._cache:
            self._cache["y"] = self._matvec(False)
        return self._cache["y"]

    def error_scale(self) -> np.ndarray:
        """|A| |x|: the check's denominators."""
        if "bound" not in self._cache:
            self._cache["bound"] = self._matvec(True)
        return self._cache["bound"]

    @property
    def tolerance(self) -> float:
        m = self.matrix
        longest = int(np.diff(m.bsr.indptr).max(initial=0)) * m.bs  # stored entries in the longest row
        return max(MIN_TOLERANCE, 2.0 * (longest + 1) * UNIT_ROUNDOFF)


class BcsrKernel(Kernel):
    name = "bcsr"
    description = "BCSR SpMV (paper [001]): y = A x, dense bs x bs blocks, 2 <= bs <= 32"
    cases = CASES
    case_param = "matrix"
    size_param = "mib"
    size_unit = "MiB of block values"
    verify_size = 4  # MiB: every case fits (the bs-32 sweep matrix needs 3.5 MiB for its 30 block rows)
    file_kind = "matrix"
    options = {"copies": COPIES}
    label_default_options = False  # "gt01r" as before the option; "gt01r (copies=to-size)" where replicated
    # The report draws the block-size study against the block size, apart from the paper's matrices.
    sweeps = (Sweep("bcsr_block_sweep", "BCSR throughput against block size",
                    "The block-size sweep (equal bytes of block values at every bs, the paper [001]'s \"variable "
                    "block sizes\" figures): % of peak per variant, and each portable variant's speedup over the "
                    "fastest vendor variant at the same bs.",
                    figure="block-sweep", study=SWEEP_STUDY, axis="block_size", label="block size bs"),)

    def sweep_value(self, case: str) -> int:
        return block_size(case)

    def default_size(self, device: Device) -> int:
        return cpu_default_mib() if device == "cpu" else DEFAULT_MIB[device]

    def check_size(self, size: int) -> int:
        mib = check_mib(size)
        memory.check_fits(HOST_COPIES * mib * MIB, f"bcsr at {mib} MiB of block values",
                          "choose fewer MiB (--size bcsr=MIB)")
        return mib

    def studies(self, device: Device) -> list[Study]:
        # The real matrices join the main comparison where they are downloaded (`datasets fetch`).
        real = tuple(case for case in REAL if real_unavailable(case) is None)
        # A matrix smaller than the size is replicated beyond the last-level cache or L2; the real-size study
        # keeps one copy, as the seed ran them (gt01r and raefsky4 fit in an H100's L2: in cache in the report).
        return [self.study(MAIN, device, cases=STANDINS + real, options={"copies": (TO_SIZE,)},
                           title="the paper's six matrices at their block sizes, replicated beyond the caches"),
                self.study(SWEEP_STUDY, device, suffix="Sweep", cases=SWEEP,
                           title="block sizes 2 to 32 at equal bytes of blocks"),
                self.study(REAL_SIZE_STUDY, device, suffix="RealSize", cases=STANDINS + real,
                           title="the paper's six matrices at their real size (at most the size), one copy")]

    def unsupported(self, case: str, size: int, options: dict[str, str]) -> str | None:
        return real_unavailable(case) or too_small(case, size)

    def problems_from_file(self, path: Path, seed: int, options: dict[str, str], block_size: str | None = None,
                           **extra: Any) -> list[Problem]:
        """A Matrix Market file cut into blocks of ``block_size``."""
        from portabench.datasets.matrices import read_mtx

        if block_size is None:
            raise PortabenchError("--matrix needs --block-size BS (the dense block size)")
        shape = mtx_shape(path)
        if shape is not None:  # what the header claims must fit before the file is read
            n, _, entries = shape
            memory.check_fits(file_bytes(n, entries, check_block_size(block_size)),
                              f"bcsr on {path}: its header's {n} x {n} matrix of {entries} entries", "choose a smaller matrix")
        return [self.problem_from_matrix(read_mtx(path), seed, block_size=block_size)]

    def problem(self, case: str, size: int, seed: int = 0, **options: str) -> BcsrProblem:
        return BcsrProblem(case=case, size=size, seed=int(seed), copies=options.get("copies", ONE))  # checked there

    def problem_from_matrix(self, matrix: Any, seed: int = 0, block_size: int | str | None = None) -> BcsrProblem:
        """A problem on a given matrix (case ``file``), with x from ``seed``: a ``BlockMatrix``,
        or a square scipy sparse or dense matrix cut into blocks of ``block_size``."""
        if not isinstance(matrix, BlockMatrix):
            if block_size is None:
                raise PortabenchError("bcsr: a matrix that is not a BlockMatrix needs a block size")
            matrix = to_bcsr(matrix, check_block_size(block_size))
            if matrix.n_padded != matrix.n:  # the paper's own padded matrices are expected; a file's may not be
                pad = matrix.n_padded - matrix.n
                warnings.warn(f"bcsr: n = {matrix.n} is not a multiple of the block size {matrix.bs}: padded to "
                              f"{matrix.n_padded} with {pad} empty row{'s' if pad > 1 else ''} and column"
                              f"{'s' if pad > 1 else ''} (x padded with zeros, y's first n entries checked)",
                              BlockPaddingWarning, stacklevel=2)
        elif block_size is not None and check_block_size(block_size) != matrix.bs:
            raise PortabenchError(f"bcsr: block size {block_size} asked for a BlockMatrix of block size {matrix.bs}")
        matrix = check_matrix(matrix)
        return BcsrProblem(case=FILE_CASE, size=max(1, round(matrix.values_bytes / MIB)), seed=int(seed),
                           given=matrix)

    def verify_problems(self, cases: list[str], size: int, seed: int, options: dict[str, str]) -> list[Problem]:
        """One problem per case; real matrices not downloaded are left out when every case is
        asked for (naming one explicitly is an error that says how to fetch it)."""
        every = list(cases) == list(self.cases)
        return [self.problem(case, size, seed, **options) for case in cases if not (every and real_unavailable(case))]

    def work(self, case: str, size: int, **options: str) -> Work:
        return work_model(shape_of(check_case(case), check_mib(size), options.get("copies", ONE)))

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, BcsrProblem)
        return problem.reference()

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, BcsrProblem)
        error = componentwise_error(output, reference, problem.error_scale())
        return Check(max_rel_error=error, tolerance=problem.tolerance, what=COMPONENTWISE)
