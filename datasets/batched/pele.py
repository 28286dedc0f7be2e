"""Stand-ins for the PeleLM chemistry Jacobians of the batched GMRES paper [004], and the
shipped Kokkos Kernels batched example.

The real matrices (PeleLM, reacting Navier-Stokes, one Newton matrix per cell) are not
public. What is published (paper [004], ``reference/NOTES.md``): **gri30** n = 54, 87.79 %
dense, Jacobi-preconditioned GMRES converges in at most 7 iterations; **isooctane**
n = 144, 29.59 % dense, at most 17; each Jacobian is scaled by an error-weight vector,
all share one sparsity pattern, 90 (gri30) / 72 (isooctane) distinct matrices are tiled
up to N systems (N = 51200 in the paper's figures), tolerance 1e-8. The stand-ins
reproduce all of that, as follows.

**Pattern** (one per mechanism, the same for every seed and scale: it is the
mechanism's, not the state's). Unknowns are the n - 1 species then the temperature
(last), as in PelePhysics. Every diagonal is present; the temperature row (heat release
depends on every species) and column (every rate depends on T through Arrhenius) are
dense. Species-species couplings follow a "shared reactions" model: each species gets a
hub weight ``h`` (lognormal: small radicals such as H, O, OH take part in most
reactions, heavy species in few) and pairs are ranked by ``h_i h_j`` times Gumbel noise;
the top-ranked pairs are coupled both ways (reversible reactions make chemistry
Jacobians structurally near-symmetric), plus one one-way entry when needed, so that
nnz = round(density n^2) exactly: 2560 for gri30, 6136 for isooctane.

**Values.** Pool matrix p is ``A_p = D_p (I + s R_p)``:

- ``R_p`` has the pattern's off-diagonal entries and a zero diagonal: a sign and a
  lognormal magnitude per entry, larger between hubs (``sqrt(h_i h_j)``; the
  temperature is the largest hub), fixed for the mechanism, times a per-matrix
  lognormal factor (the cell's thermochemical state) and a per-matrix intensity
  (``10^U(-0.5, 0)``: how reactive the cell is, which spreads the iteration counts over
  the pool, as in the paper's sorted/unsorted orderings);
- ``D_p`` is the positive diagonal of the Newton matrix ``I - gamma J`` times the
  error weights ``1 / (rtol |y_i| + atol)``, one factor per row, modelled as
  ``10^(u_i + 0.2 z)`` with ``u_i`` uniform over six decades (species abundances span
  many decades) and ``z`` standard normal per matrix. So each matrix's values span 9-10
  orders of magnitude (diagonals about 7) and unpreconditioned GMRES needs ~50 (gri30) /
  ~115 (isooctane) iterations, while Jacobi preconditioning divides ``D_p`` out
  exactly: ``diag(A_p)^{-1} A_p = I + s R_p``;
- the right-hand side is ``b_p = D_p c_p`` with ``c_p`` standard normal (a residual in
  the same scaled units). A system is a (matrix, right-hand side) pair: system k is pool
  system ``k mod pool`` (``pool_index``), so checking the pool checks every system, and
  the oracle needs ``pool`` solves, not N.

**Calibration.** ``s`` sets the off-diagonal strength and hence the iteration count.
Because the Krylov spaces of ``I + s R`` and ``R`` coincide, one Arnoldi process on
each ``R_p`` gives the GMRES residuals for every ``s`` from a small Hessenberg problem;
``s`` is chosen (bisection in log s) so that the worst pool system's relative
preconditioned residual after ``max_iterations`` steps is ``tol / 2`` (a factor 2 of
safety against rounding). Then every pool system is solved with the float64 oracle
(``portabench.reference.gmres``, the real A_p and b_p, Jacobi, tol 1e-8) and
generation fails with ``DatasetError`` unless every system converges within
``max_iterations`` and the worst needs at least ``max_iterations - 2``. Measured over
seeds 0-59 and 1000-1099: the worst pool system needs exactly 7 (gri30) and 17
(isooctane) iterations, the easiest 5 and 9 (means 6.1 and 12.2 for seed 0);
``pool_iterations`` gives them per seed. A pool (calibration and check included) is cached per
(mechanism, seed).

**Scale.** ``N = max(1, round(scale * 51200))`` systems; the values of system k do
not depend on the scale (a smaller stand-in is a prefix of a larger one).
``default_scale`` 0.02 gives 1024 systems (21 MB of gri30 values, 50 MB of isooctane).
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np


from .. import memory
from ..errors import DatasetError
from ..registry import Dataset, register
from .kokkos import read_kokkos, write_kokkos
from .systems import BatchedSystems

SEED_N = 51200  # systems in the paper's figures (V100)
DEFAULT_SCALE = 0.02  # 1024 systems: a quick run on a 2-core CPU
TOL = 1e-8
SAFETY = 0.5  # the worst pool residual after max_iterations steps is SAFETY * tol
BAND = 2  # the worst pool system may need up to BAND iterations fewer than the published maximum
INTENSITY_DECADES = 0.5  # per-matrix intensity 10^U(-0.5, 0)
WEIGHT_DECADES = 6.0  # row scales (error weights x Newton diagonal) span six decades


@dataclass(frozen=True)
class Mechanism:
    """A PeleLM mechanism's published facts (paper [004])."""

    name: str
    n: int
    density_percent: float
    pool: int
    max_iterations: int
    species: str

    @property
    def nnz(self) -> int:
        return round(self.density_percent / 100 * self.n * self.n)


MECHANISMS = {
    m.name: m
    for m in (
        Mechanism("gri30", 54, 87.79, 90, 7, "GRI-Mech 3.0: 53 species + temperature"),
        Mechanism("isooctane", 144, 29.59, 72, 17, "isooctane: 143 species + temperature"),
    )
}


def num_systems(scale: float) -> int:
    """N at ``scale``: ``max(1, round(scale * 51200))``."""
    if not scale > 0:
        raise DatasetError(f"scale must be positive, got {scale}")
    return max(1, round(scale * SEED_N))


# -- the mechanism: pattern and fixed coupling magnitudes --------------------------


@dataclass(frozen=True)
class _Skeleton:
    rows: np.ndarray  # (nnz,) row of each entry, CSR order
    row_ptr: np.ndarray
    col_idx: np.ndarray
    off: np.ndarray  # (nnz,) bool: off-diagonal entries
    magnitude: np.ndarray  # (nnz,) signed base coupling (0 on the diagonal)
    weight_profile: np.ndarray  # (n,) log10 of the mechanism's row scales


@functools.lru_cache(maxsize=None)
def _skeleton(name: str) -> _Skeleton:
    mech = MECHANISMS[name]
    n, nnz = mech.n, mech.nnz
    rng = np.random.default_rng([zlib.crc32(name.encode()), 0])  # the mechanism's, not the seed's
    ns = n - 1  # species; the temperature is unknown n - 1
    extra = nnz - (n + 2 * ns)  # species-species entries beyond the diagonal and the T row/column
    if not 0 <= extra <= ns * (ns - 1):
        raise DatasetError(f"{name}: nnz={nnz} cannot hold a full diagonal and a dense temperature row/column")
    log_hub = rng.normal(0.0, 1.0, n)
    log_hub[-1] = log_hub[:-1].max() + 0.5  # the temperature couples most strongly
    iu, ju = np.triu_indices(ns, 1)
    score = log_hub[iu] + log_hub[ju] + rng.gumbel(size=iu.size)
    ranked = np.argsort(-score, kind="stable")
    pairs = ranked[: extra // 2]
    rows = [np.arange(n), np.full(ns, n - 1), np.arange(ns), iu[pairs], ju[pairs]]
    cols = [np.arange(n), np.arange(ns), np.full(ns, n - 1), ju[pairs], iu[pairs]]
    if extra % 2:  # one irreversible coupling to make nnz exact
        rows.append(iu[ranked[extra // 2 : extra // 2 + 1]])
        cols.append(ju[ranked[extra // 2 : extra // 2 + 1]])
    r, c = np.concatenate(rows), np.concatenate(cols)
    order = np.lexsort((c, r))
    r, c = r[order], c[order]
    assert r.size == nnz and np.unique(r * n + c).size == nnz
    row_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=row_ptr[1:])
    off = r != c
    magnitude = np.exp(0.5 * (log_hub[r] + log_hub[c]) + 0.75 * rng.standard_normal(nnz))
    magnitude *= np.where(rng.random(nnz) < 0.5, -1.0, 1.0)
    magnitude[~off] = 0.0
    profile = rng.uniform(0.0, WEIGHT_DECADES, n)
    return _Skeleton(r, row_ptr, c, off, magnitude, profile)


# -- one seed's pool ------------------------------------------------------------------


@dataclass(frozen=True)
class Pool:
    """A calibrated pool: ``values`` (pool, nnz) and ``rhs`` (pool, n) of the distinct systems,
    the strength ``s``, and the oracle's iteration count for each pool system."""

    mechanism: Mechanism
    row_ptr: np.ndarray
    col_idx: np.ndarray
    values: np.ndarray
    rhs: np.ndarray
    strength: float
    iterations: np.ndarray


def _arnoldi(R: np.ndarray, c: np.ndarray, steps: int) -> np.ndarray:
    """Hessenberg matrices (P, steps + 1, steps) of ``R_p`` from ``c_p / ||c_p||``, all p at once (MGS)."""
    P, n, _ = R.shape
    V = np.zeros((P, steps + 1, n))
    H = np.zeros((P, steps + 1, steps))
    V[:, 0] = c / np.linalg.norm(c, axis=1, keepdims=True)
    for j in range(steps):
        w = np.einsum("pik,pk->pi", R, V[:, j])
        for i in range(j + 1):
            H[:, i, j] = np.einsum("pi,pi->p", w, V[:, i])
            w -= H[:, i, j, None] * V[:, i]
        H[:, j + 1, j] = np.linalg.norm(w, axis=1)
        if np.any(H[:, j + 1, j] <= 1e-12 * np.abs(H[:, : j + 1, j]).max()):
            raise DatasetError("stand-in calibration: Arnoldi breakdown (degenerate pool matrix)")
        V[:, j + 1] = w / H[:, j + 1, j, None]
    return H


def _residuals(H: np.ndarray, s: float, k: int) -> np.ndarray:
    """Relative GMRES residuals after k steps on ``I + s R_p`` for every p, from R's Hessenberg H."""
    Hs = s * H[:, : k + 1, :k]
    Hs[:, np.arange(k), np.arange(k)] += 1.0
    Q, _ = np.linalg.qr(Hs, mode="complete")
    return np.abs(Q[:, 0, k])  # the part of e_1 outside range(Hs)


def _calibrate(H: np.ndarray, steps: int) -> float:
    """The strength s at which the worst pool residual after ``steps`` steps is SAFETY * TOL."""
    goal = np.log(SAFETY * TOL)

    def f(log_s: float) -> float:
        return float(np.log(_residuals(H, float(np.exp(log_s)), steps).max()) - goal)

    lo, hi = -12.0, 2.0
    if not (f(lo) < 0 < f(hi)):
        raise DatasetError("stand-in calibration: cannot bracket the off-diagonal strength")
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return float(np.exp(lo))


@functools.lru_cache(maxsize=4)
def pool(name: str, seed: int) -> Pool:
    """The calibrated, oracle-checked pool of mechanism ``name`` for ``seed`` (cached, read-only)."""
    mech = MECHANISMS[name]
    sk = _skeleton(name)
    n, nnz, P = mech.n, mech.nnz, mech.pool
    rng = np.random.default_rng([zlib.crc32(name.encode()), 1, seed])
    intensity = 10.0 ** rng.uniform(-INTENSITY_DECADES, 0.0, P)
    state = np.exp(0.3 * rng.standard_normal((P, nnz)))
    coupling = intensity[:, None] * state * sk.magnitude  # (P, nnz), zero on the diagonal
    log_scale = sk.weight_profile + 0.2 * rng.standard_normal((P, n))
    row_scale = 10.0**log_scale  # D_p
    c = rng.standard_normal((P, n))

    R = np.zeros((P, n, n))
    R[:, sk.rows, sk.col_idx] = coupling
    H = _arnoldi(R, c, mech.max_iterations)
    s = _calibrate(H, mech.max_iterations)

    unit = s * coupling
    unit[:, ~sk.off] = 1.0  # I + s R_p on the pattern
    values = unit * row_scale[:, sk.rows]  # A_p = D_p (I + s R_p)
    rhs = row_scale * c  # b_p = D_p c_p

    # Check with the oracle on every pool system: the published bound must hold, not be assumed.
    from portabench.reference.gmres import gmres  # SciPy's linear algebra: imported when a pool is built

    iterations = np.empty(P, dtype=np.int64)
    probe = BatchedSystems(n=n, row_ptr=sk.row_ptr, col_idx=sk.col_idx, values=values, rhs=rhs)
    for p in range(P):
        result = gmres(probe.matrix(p), rhs[p], tol=TOL, max_iter=mech.max_iterations)
        if not result.converged:
            raise DatasetError(
                f"{name}@seed {seed}: pool matrix {p} does not converge in {mech.max_iterations} "
                f"Jacobi-preconditioned GMRES iterations (residual {result.residuals[-1]:.3g} > tol {TOL:g})"
            )
        iterations[p] = result.iterations
    if iterations.max() < mech.max_iterations - BAND:
        raise DatasetError(
            f"{name}@seed {seed}: the worst pool matrix converges in {iterations.max()} iterations, "
            f"more than {BAND} below the published {mech.max_iterations}"
        )
    for arr in (probe.row_ptr, probe.col_idx, probe.values, probe.rhs, iterations):
        arr.setflags(write=False)
    return Pool(mech, probe.row_ptr, probe.col_idx, probe.values, probe.rhs, s, iterations)


def pool_iterations(name: str, seed: int = 0) -> np.ndarray:
    """Oracle iteration counts (Jacobi GMRES, tol 1e-8) of each pool system of ``name`` for ``seed``."""
    return pool(name, seed).iterations


def standin(name: str, scale: float, seed: int = 0) -> BatchedSystems:
    """Stand-in for PeleLM mechanism ``name``: ``round(scale * 51200)`` systems tiled from its pool."""
    if name not in MECHANISMS:
        raise DatasetError(f"unknown PeleLM mechanism {name!r}; known: {', '.join(MECHANISMS)}")
    count, mech = num_systems(scale), MECHANISMS[name]
    # The N systems' values and right-hand sides, before the pool is built or anything tiled.
    memory.check_fits(8 * count * (mech.nnz + mech.n), f"{name}@{scale:g}: the stand-in ({count} systems)",
                      "choose a smaller scale")
    p = pool(name, int(seed))
    return tiled(BatchedSystems(n=p.mechanism.n, row_ptr=p.row_ptr, col_idx=p.col_idx, values=p.values, rhs=p.rhs),
                 count)


def tiled(pool_systems: BatchedSystems, count: int) -> BatchedSystems:
    """``count`` systems, system k a copy of pool system ``k mod pool size`` (``pool_index``)."""
    size = pool_systems.num_systems
    values = np.empty((count, pool_systems.values.shape[1]))
    rhs = np.empty((count, pool_systems.n))
    for start in range(0, count, size):  # block copies: far faster here than a fancy-indexed gather
        stop = min(start + size, count)
        values[start:stop] = pool_systems.values[: stop - start]
        rhs[start:stop] = pool_systems.rhs[: stop - start]
    return BatchedSystems(n=pool_systems.n, row_ptr=pool_systems.row_ptr, col_idx=pool_systems.col_idx,
                          values=values, rhs=rhs, pool_index=np.arange(count) % size)


def write_batched(systems: BatchedSystems, path: Path) -> None:
    """Write ``systems`` as Kokkos Kernels A/B files: ``path`` and its ``...B`` sibling."""
    write_kokkos(systems, path)


def read_shipped(path: Path) -> BatchedSystems:
    """The shipped Kokkos Kernels example: ``batched_A.mm`` and its sibling ``batched_B.mm``."""
    return read_kokkos(path)


for _m in MECHANISMS.values():
    register(Dataset(
        name=_m.name,
        kind="batched",
        summary=(f"PeleLM {_m.name} chemistry Jacobians (stand-in): n={_m.n}, {_m.density_percent} % dense, "
                 f"pool of {_m.pool}, Jacobi GMRES <= {_m.max_iterations} iterations at tol 1e-8"),
        facts={
            "n": _m.n, "density_percent": _m.density_percent, "nnz": _m.nnz, "pool": _m.pool,
            "max_iterations": _m.max_iterations, "tol": TOL, "N_seed": SEED_N, "species": _m.species,
            "source": "paper [004] (Kokkos Kernels batched GMRES, SIAM PP22); PeleLM Jacobians are not public",
        },
        standin=functools.partial(standin, _m.name),
        write=write_batched,
        default_scale=DEFAULT_SCALE,
    ))

register(Dataset(
    name="kk-batched",
    kind="batched",
    summary="Kokkos Kernels' batched GMRES perf-test example (real, shipped): 96 systems, n=200, 1624 nonzeros",
    facts={"n": 200, "nnz": 1624, "N": 96, "format": "Kokkos Kernels batched CRS Matrix Market (A) + 2D view (B)",
           "source": "kokkos/kokkos-kernels perf_test/batched/sparse/data/{A,B}.mm (synthetic)"},
    shipped="kokkos-kernels/batched_A.mm",
    read=read_shipped,
    write=write_batched,
))
