"""The SuiteSparse matrices of the BCSR SpMV paper [001], their seeded stand-ins, and its block-size sweep.

Real matrices are downloaded from ``https://sparse.tamu.edu/MM/<Group>/<Name>.tar.gz``
(no published checksum) or, for ``bcsstk01``, shipped with portabench. Every matrix
dataset here, real or stand-in, loads as a ``BlockMatrix`` (``bcsr.py``) at the block
size of the paper's table (``facts["bs"]``): the SpMV kernel needs the BCSR form and its
block size, and ``BlockMatrix.to_csr()`` gives the CSR form to vendor CSR variants.

**Block counts.** The paper's table (``reference/NOTES.md``) gives n, nnz, bs, block
rows and nnzb per matrix. Checked against each other:

- block rows = ceil(n / bs): 1596, 6593, 23558, 36320, 54527, 314565. RM07R's "545K" is
  a typo for 54.5K (381689 / 7 = 54527), and its 1.504M blocks make 27.6 blocks/row.
- nnz is the full matrix's count (SuiteSparse's convention), but for the symmetric
  matrices nnzb counts the blocks of the *stored lower triangle* (what a Matrix Market
  file holds): 111.4K, 289.3K and 4.471M blocks of 9, 36 and 9 entries hold fewer
  entries than the full nnz of raefsky4, pwtk and audikw_1, which is impossible for
  blocks of the full matrix. audikw_1 fits the triangle reading exactly: its full
  matrix would have 2 x 4.471M - 314565 = 8.627M blocks x 9 = 77.65M entries = its nnz
  (dense 3x3 node blocks, fill 1.00). bmw7st_1's numbers fit either reading; it is
  read like the other symmetric ones.

So here, for a symmetric matrix, ``facts["nnzb"]`` and ``facts["blocks_per_row"]`` are
the paper's stored-triangle numbers (compare with ``BlockMatrix.nnzb_lower``) and
``facts["nnzb_full"] = 2 nnzb - block_rows`` is the block count of the full matrix,
which is what a ``BlockMatrix`` stores and what a full SpMV reads; ``facts["fill"]`` is
``nnzb_full bs^2 / nnz``. (The paper's kernels may well have multiplied by the stored
triangle only; ``BlockMatrix.lower_triangle()`` gives that matrix.)

**Stand-ins** (``standin(scale, seed) -> BlockMatrix``). ``scale`` multiplies the number
of block rows (``scale = 1``: the real size; ``n mod bs`` is kept, so bmw7st_1 and pwtk
stay padded at every scale); blocks per block row, block size and fill are the real
matrix's at every scale. The pattern is FEM-like: block rows are the nodes of a 2-D or
3-D grid (the seed calls GT01R a 2-D fluid, the shell models raefsky4 and bmw7st_1 are
meshed surfaces, the others 3-D), numbered lexicographically, and each node couples to
grid neighbours drawn with probabilities falling off with mesh distance (all nearest
neighbours, then a partial outer shell), so block columns sit in a few bands near the
diagonal, as x reuse in a real SpMV expects. The number of blocks is exact: at scale 1
the stand-in's stored-triangle nnzb (symmetric) or nnzb (unsymmetric) equals the
published one, and its nnz is within 1 % of the published nnz (the zeros inside blocks
are random, at the density that gives the published fill).

- structural (raefsky4, bmw7st_1, pwtk, audikw_1): symmetric pattern and values, strictly
  diagonally dominant with a positive diagonal, hence symmetric positive definite;
- Fluorem (gt01r, rm07r): 90 % of the off-diagonal blocks have their mirror block, the
  values are unsymmetric (a mirror block has its own values); diagonally dominant.

**Block-size sweep** (``block-sweep-bs<B>``): the paper's "variable block sizes" figures
plot throughput for block sizes 1-32 without listing the matrices, so the sweep is
synthetic: block sizes 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, each with the same bytes of
block values (``scale = 1``: 256 MiB, well beyond a CPU's last-level cache), so larger
blocks mean fewer block rows and blocks. Pattern: symmetric, 3-D mesh-like, 15 blocks per
block row, dense blocks (fill 1), SPD values.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .. import memory
from ..errors import DatasetError
from ..registry import Dataset, Remote, register
from .bcsr import BlockMatrix, to_bcsr
from .mmio import read_mtx, read_triplets, write_mtx

SUITESPARSE_MM = "https://sparse.tamu.edu/MM/"
QUICK_BYTES = 4 << 20  # a stand-in's default size: ~4 MiB of block values, quick on a 2-core CPU
MIN_BLOCK_ROWS = 16


@dataclass(frozen=True)
class SuiteSparseMatrix:
    """One row of the paper's table (n, nnz: SuiteSparse's; bs, nnzb: the paper's)."""

    group: str
    name: str
    n: int
    nnz: int  # full matrix
    bs: int
    nnzb: int  # stored triangle for a symmetric matrix (see the module docstring)
    symmetric: bool
    kind: str
    mesh_dim: int  # of the stand-in's grid
    block_rows_published: str

    @property
    def block_rows(self) -> int:
        return math.ceil(self.n / self.bs)

    @property
    def nnzb_full(self) -> int:
        return 2 * self.nnzb - self.block_rows if self.symmetric else self.nnzb

    @property
    def fill(self) -> float:
        return self.nnzb_full * self.bs**2 / self.nnz

    @property
    def url(self) -> str:
        return f"{SUITESPARSE_MM}{self.group}/{self.name}.tar.gz"


SUITESPARSE: dict[str, SuiteSparseMatrix] = {m.name.lower(): m for m in [
    SuiteSparseMatrix("Fluorem", "GT01R", 7_980, 430_909, 5, 20_370, False, "2D inviscid fluid", 2, "1.60K"),
    SuiteSparseMatrix("Simon", "raefsky4", 19_779, 1_328_611, 3, 111_400, True, "container buckling problem", 2, "6.59K"),
    SuiteSparseMatrix("GHS_psdef", "bmw7st_1", 141_347, 7_339_667, 6, 229_100, True, "car body analysis", 2, "23.6K"),
    SuiteSparseMatrix("Boeing", "pwtk", 217_918, 11_634_424, 6, 289_300, True, "pressurized wind tunnel", 3, "36.9K"),
    SuiteSparseMatrix("Fluorem", "RM07R", 381_689, 37_464_962, 7, 1_504_000, False, "3D viscous turbulence", 3,
                      "545K (typo: 54.5K)"),
    SuiteSparseMatrix("GHS_psdef", "audikw_1", 943_695, 77_651_847, 3, 4_471_000, True, "AUDI crankshaft model", 3,
                      "314K"),
]}

SWEEP_BLOCK_SIZES: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32)
SWEEP_BYTES = 256 << 20  # block values at scale 1
SWEEP_BLOCKS_PER_ROW = 15
SWEEP_MESH_DIM = 3
MIRRORED = 0.9  # Fluorem stand-ins: fraction of off-diagonal blocks whose mirror block is stored


# ----------------------------------------------------------------------------- pattern

def _grid_offsets(block_rows: int, mesh_dim: int, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """Negative linear offsets of grid neighbours within ``radius`` and their squared mesh distances."""
    side = max(2, math.ceil(block_rows ** (1.0 / mesh_dim)))
    best: dict[int, int] = {}
    for disp in itertools.product(range(-radius, radius + 1), repeat=mesh_dim):
        off = sum(d * side**k for k, d in enumerate(disp))
        if -block_rows < off < 0:
            dist2 = sum(d * d for d in disp)
            best[off] = min(dist2, best.get(off, dist2))
    offsets = np.array(sorted(best), dtype=np.int64)
    return offsets, np.array([best[o] for o in offsets], dtype=np.float64)


def _lower_candidates(block_rows: int, goal: float, mesh_dim: int,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """About ``goal`` distinct strictly-lower block positions (rows, cols) with mesh locality."""
    radius = 1
    while True:
        offsets, dist2 = _grid_offsets(block_rows, mesh_dim, radius)
        room = np.maximum(block_rows + offsets, 0).astype(np.float64)  # rows that have this neighbour
        everything = len(offsets) == block_rows - 1
        if room.sum() >= 2 * goal or everything:
            break
        radius += 1
    weight = np.exp(-dist2)
    if room.sum() <= goal:
        prob = np.ones_like(weight)
    else:  # prob = min(1, c * weight) with sum(prob * room) = goal
        lo, hi = 0.0, 1.0
        while (np.minimum(1.0, hi * weight) * room).sum() < goal:
            hi *= 2.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if (np.minimum(1.0, mid * weight) * room).sum() < goal:
                lo = mid
            else:
                hi = mid
        prob = np.minimum(1.0, hi * weight)
    rows, cols = [], []
    for off, p in zip(offsets, prob):
        r = np.arange(-off, block_rows, dtype=np.int64)
        if p < 1.0:
            r = r[rng.random(r.size) < p]
        rows.append(r)
        cols.append(r + off)
    return np.concatenate(rows), np.concatenate(cols)


def _lower_positions(block_rows: int, count: int, mesh_dim: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Exactly ``count`` distinct strictly-lower block positions, in random order."""
    if count > block_rows * (block_rows - 1) // 2:
        raise DatasetError(f"{count} off-diagonal block pairs do not fit in {block_rows} block rows")
    goal = 1.08 * count + 16
    while True:
        rows, cols = _lower_candidates(block_rows, goal, mesh_dim, rng)
        if rows.size >= count:
            pick = rng.choice(rows.size, size=count, replace=False)
            return rows[pick], cols[pick]
        goal *= 1.3


# ----------------------------------------------------------------------------- values

def _random_blocks(rows: np.ndarray, cols: np.ndarray, bs: int, density: float, n: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Normal values in blocks at (rows, cols), entries kept with probability ``density``.

    Entries in padded rows/columns (index >= n) are zero; every block keeps >= 1 nonzero.
    """
    values = rng.standard_normal((rows.size, bs, bs))
    if density < 1.0:
        values *= rng.random((rows.size, bs, bs), dtype=np.float32) < density
    _clear_padding(values, rows, cols, bs, n)
    empty = np.flatnonzero(~values.any(axis=(1, 2)))
    if empty.size:
        valid_r = np.minimum(bs, n - rows[empty] * bs)
        valid_c = np.minimum(bs, n - cols[empty] * bs)
        i = (rng.random(empty.size) * valid_r).astype(np.int64)
        j = (rng.random(empty.size) * valid_c).astype(np.int64)
        values[empty, i, j] = rng.standard_normal(empty.size) + np.where(rng.random(empty.size) < 0.5, -2.0, 2.0)
    return values


def _clear_padding(values: np.ndarray, rows: np.ndarray, cols: np.ndarray, bs: int, n: int) -> None:
    last = (n - 1) // bs
    valid = n - last * bs
    if valid == bs:
        return
    values[rows == last, valid:, :] = 0.0
    values[cols == last, :, valid:] = 0.0


def _row_abs_sums(values: np.ndarray, block_rows: np.ndarray, bs: int, n_padded: int,
                  transpose: bool = False) -> np.ndarray:
    """Per matrix row, the sum of |entries| of ``values`` placed at block rows ``block_rows``."""
    sums = np.abs(values).sum(axis=1 if transpose else 2)  # (blocks, bs)
    index = (block_rows[:, None] * bs + np.arange(bs)).ravel()
    return np.bincount(index, weights=sums.ravel(), minlength=n_padded)


def fem_block_matrix(block_rows: int, bs: int, blocks_per_row: float, *, seed: int, n: int | None = None,
                     symmetric: bool = True, mirrored: float = MIRRORED, density: float = 1.0,
                     mesh_dim: int = 3) -> BlockMatrix:
    """A seeded FEM-like BCSR matrix (the generator behind every stand-in here).

    ``blocks_per_row``: mean stored blocks per block row of the *full* matrix, the
    diagonal block included (always stored). ``n``: the true size (default
    ``block_rows * bs``; a smaller one pads the last block row). ``symmetric``: symmetric
    pattern and values, SPD by strict diagonal dominance; otherwise a fraction
    ``mirrored`` of the off-diagonal blocks have their mirror block, with independent
    values, and the diagonal still dominates. ``density``: the probability that an
    off-diagonal entry inside a stored block is nonzero (the diagonal always is).
    """
    n = block_rows * bs if n is None else n
    if not (block_rows - 1) * bs < n <= block_rows * bs:
        raise DatasetError(f"n={n} does not fit {block_rows} block rows of size {bs}")
    if block_rows < MIN_BLOCK_ROWS:
        raise DatasetError(f"{block_rows} block rows are too few for a stand-in (at least {MIN_BLOCK_ROWS})")
    if not 1.0 <= blocks_per_row <= block_rows:
        raise DatasetError(f"blocks_per_row={blocks_per_row} must lie between 1 and the {block_rows} block rows")
    if mesh_dim not in (1, 2, 3):
        raise DatasetError(f"mesh_dim must be 1, 2 or 3, not {mesh_dim}")
    rng = np.random.default_rng(seed)
    n_padded = block_rows * bs
    off_total = round(blocks_per_row * block_rows) - block_rows  # off-diagonal blocks
    diag = np.arange(block_rows, dtype=np.int64)

    if symmetric:
        lr, lc = _lower_positions(block_rows, off_total // 2, mesh_dim, rng)
        lower = _random_blocks(lr, lc, bs, density, n, rng)
        # Diagonal blocks: a random strictly-lower part, mirrored.
        dvals = np.tril(_random_blocks(diag, diag, bs, density, n, rng), k=-1)
        dvals += dvals.transpose(0, 2, 1)
        rows = np.concatenate([diag, lr, lc])
        cols = np.concatenate([diag, lc, lr])
        parts = [dvals, lower, lower.transpose(0, 2, 1)]
        rowabs = (_row_abs_sums(dvals, diag, bs, n_padded) + _row_abs_sums(lower, lr, bs, n_padded)
                  + _row_abs_sums(lower, lc, bs, n_padded, transpose=True))
    else:
        pairs = round(mirrored * off_total / 2)
        singles = off_total - 2 * pairs
        lr, lc = _lower_positions(block_rows, pairs + singles, mesh_dim, rng)
        flip = rng.random(singles) < 0.5  # a single block sits above or below the diagonal
        sr = np.where(flip, lc[pairs:], lr[pairs:])
        sc = np.where(flip, lr[pairs:], lc[pairs:])
        orow = np.concatenate([lr[:pairs], lc[:pairs], sr])
        ocol = np.concatenate([lc[:pairs], lr[:pairs], sc])
        off = _random_blocks(orow, ocol, bs, density, n, rng)
        dvals = _random_blocks(diag, diag, bs, density, n, rng)
        dvals[:, np.arange(bs), np.arange(bs)] = 0.0
        rows = np.concatenate([diag, orow])
        cols = np.concatenate([diag, ocol])
        parts = [dvals, off]
        rowabs = _row_abs_sums(dvals, diag, bs, n_padded) + _row_abs_sums(off, orow, bs, n_padded)

    # Strict diagonal dominance with a positive diagonal; padded rows keep a zero diagonal.
    dominant = rowabs + rng.uniform(0.5, 1.5, n_padded)
    dominant[n:] = 0.0
    dvals[:, np.arange(bs), np.arange(bs)] = dominant.reshape(block_rows, bs)

    order = np.argsort(rows * block_rows + cols, kind="stable")
    where = np.empty_like(order)
    where[order] = np.arange(order.size)
    data = np.empty((order.size, bs, bs))
    start = 0
    for part in parts:
        data[where[start:start + len(part)]] = part
        start += len(part)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=block_rows))])
    bsr = sp.bsr_array((data, cols[order], indptr), shape=(n_padded, n_padded))
    return BlockMatrix(bsr=bsr, n=n, bs=bs, symmetric=symmetric)


# ----------------------------------------------------------------------------- stand-ins

def standin_size(name: str, scale: float) -> tuple[int, int]:
    """(n, block rows) of the stand-in of SuiteSparse matrix ``name`` at ``scale``."""
    m = SUITESPARSE[name]
    if not scale > 0:
        raise DatasetError(f"scale must be positive, not {scale}")
    full_rows = max(1, round((m.n // m.bs) * scale))
    n = full_rows * m.bs + m.n % m.bs
    return n, math.ceil(n / m.bs)


def _check_memory(spec: str, blocks: int, bs: int) -> None:
    """Refuse a stand-in whose blocks cannot fit in memory twice (the generator's parts, then the matrix's
    array), before any is allocated."""
    memory.check_fits(2 * blocks * (bs * bs * 8 + 8), f"{spec}: the stand-in ({blocks} blocks of {bs} x {bs})",
                      "choose a smaller scale")


def standin(name: str, scale: float, seed: int) -> BlockMatrix:
    """The seeded stand-in of SuiteSparse matrix ``name`` (lowercase) at ``scale`` (see the module docstring)."""
    m = SUITESPARSE[name]
    n, block_rows = standin_size(name, scale)
    if block_rows < MIN_BLOCK_ROWS:
        smallest = MIN_BLOCK_ROWS / (m.n // m.bs)
        raise DatasetError(f"{name}@{scale}: {block_rows} block rows are too few; use a scale of at least {smallest:.2g}")
    density = min(1.0, (m.nnz - m.n) / (m.nnzb_full * m.bs**2 - m.n))
    _check_memory(f"{name}@{scale:g}", round(m.nnzb_full / m.block_rows * block_rows), m.bs)
    return fem_block_matrix(block_rows, m.bs, m.nnzb_full / m.block_rows, seed=seed, n=n, symmetric=m.symmetric,
                            density=density, mesh_dim=m.mesh_dim)


def block_sweep(bs: int, scale: float, seed: int) -> BlockMatrix:
    """The block-size sweep matrix for ``bs``: ``scale * 256 MiB`` of block values (see the module docstring)."""
    if not scale > 0:
        raise DatasetError(f"scale must be positive, not {scale}")
    blocks = round(SWEEP_BYTES * scale / (8 * bs * bs))
    block_rows = round(blocks / SWEEP_BLOCKS_PER_ROW)
    if block_rows < 2 * SWEEP_BLOCKS_PER_ROW:
        smallest = 2 * SWEEP_BLOCKS_PER_ROW * SWEEP_BLOCKS_PER_ROW * 8 * bs * bs / SWEEP_BYTES
        raise DatasetError(f"block-sweep-bs{bs}@{scale}: {block_rows} block rows are too few; "
                           f"use a scale of at least {smallest:.2g}")
    _check_memory(f"block-sweep-bs{bs}@{scale:g}", blocks, bs)
    return fem_block_matrix(block_rows, bs, blocks / block_rows, seed=seed, symmetric=True, mesh_dim=SWEEP_MESH_DIM)


def quick_scale(values_bytes: float) -> float:
    """``QUICK_BYTES / values_bytes``, at most 1, rounded down to one significant digit."""
    raw = min(1.0, QUICK_BYTES / values_bytes)
    step = 10.0 ** math.floor(math.log10(raw))
    return math.floor(raw / step + 1e-9) * step


# ----------------------------------------------------------------------------- registry

def _reader(bs: int, symmetric: bool):
    def read(path: Path) -> BlockMatrix:
        return to_bcsr(read_mtx(path), bs, symmetric=symmetric)

    return read


def _standin(name: str):
    def generate(scale: float, seed: int) -> BlockMatrix:
        return standin(name, scale, seed)

    return generate


def _sweep(bs: int):
    def generate(scale: float, seed: int) -> BlockMatrix:
        return block_sweep(bs, scale, seed)

    return generate


for _key, _m in SUITESPARSE.items():
    register(Dataset(
        name=_key,
        kind="matrix",
        summary=f"SuiteSparse {_m.group}/{_m.name}: n={_m.n:,}, {_m.nnz:,} nonzeros, BCSR bs={_m.bs}",
        facts={
            "group": _m.group, "name": _m.name, "n": _m.n, "nnz": _m.nnz, "bs": _m.bs,
            "block_rows": _m.block_rows, "block_rows_published": _m.block_rows_published,
            "nnzb": _m.nnzb, "blocks_per_row": round(_m.nnzb / _m.block_rows, 2),
            "nnzb_counts": "stored lower triangle" if _m.symmetric else "full matrix",
            "nnzb_full": _m.nnzb_full, "fill": round(_m.fill, 3), "padded": _m.n % _m.bs != 0,
            "symmetric": _m.symmetric, "kind": _m.kind, "source": _m.url,
        },
        remote=Remote(url=_m.url, filename=f"{_m.name}.tar.gz", sha256=None,
                      also=(f"{_m.name}.tar", f"{_m.name}.mtx.gz", f"{_m.name}.mtx")),
        read=_reader(_m.bs, _m.symmetric),
        standin=_standin(_key),
        write=write_mtx,
        default_scale=quick_scale(_m.nnzb_full * _m.bs**2 * 8),
    ))

BCSSTK01_BS = 6  # 8 nodes x 6 degrees of freedom: 32 blocks (20 in the lower triangle)


def _read_bcsstk01(path: Path) -> BlockMatrix:
    return to_bcsr(read_triplets(path, base=0, symmetric=True), BCSSTK01_BS, symmetric=True)


register(Dataset(
    name="bcsstk01",
    kind="matrix",
    summary=f"SuiteSparse HB/bcsstk01 (real, shipped): n=48, 400 nonzeros, symmetric positive definite, BCSR bs={BCSSTK01_BS}",
    facts={"group": "HB", "name": "bcsstk01", "n": 48, "nnz": 400, "nnz_stored": 224, "bs": BCSSTK01_BS,
           "block_rows": 8, "nnzb": 20, "nnzb_counts": "stored lower triangle", "nnzb_full": 32, "symmetric": True,
           "kind": "structural stiffness matrix", "source": "SuiteSparse CSparse/Matrix/bcsstk01"},
    shipped="suitesparse/bcsstk01.tri0",
    read=_read_bcsstk01,
    write=write_mtx,
))

for _bs in SWEEP_BLOCK_SIZES:
    register(Dataset(
        name=f"block-sweep-bs{_bs}",
        kind="matrix",
        summary=f"block-size sweep (paper [001]), bs={_bs}: synthetic, 256 MiB of block values at scale 1",
        facts={"bs": _bs, "values_bytes_at_scale_1": SWEEP_BYTES, "blocks_per_row": SWEEP_BLOCKS_PER_ROW,
               "symmetric": True, "kind": "synthetic 3-D mesh-like, dense blocks"},
        standin=_sweep(_bs),
        write=write_mtx,
        default_scale=1 / 64,
    ))
