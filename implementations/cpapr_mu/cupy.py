"""GPU portable: MU on the project's CuPy kernels: Π written in each mode's row order (``pi``'s
``cupy-rows-sorted``) and Φ reading it streamed (``phi``'s segmented warp kernel, as
``cupy-segmented-presorted``), with the KKT check, the update and the factors' column sums as CuPy
kernels (the two reductions grid-wide: CuPy's own reduce a column, or the whole array, in one block).

Π is computed once per mode and read by l_max Φ calls, so writing it in the row order Φ wants
pays l_max times (the sorted write costs about one Φ's gather through the permutation:
``implementations/pi/EXPERIMENTS.md``). Both use the same permutation, built once
per mode (``arrange``, untimed).
"""

from __future__ import annotations

import functools
from typing import Any

from ..gpu import WARP_SHUFFLE, cupy, multiprocessors
from ..model import PortabenchError
from ..phi.cupy_segmented import PhiCupySegmented
from ..pi.cupy_rows_sorted import CupyRowsSorted
from ..tensor_inputs import TensorArrays, UpToMaxOrder
from .variant import Calls, CupyMuVariant


class _PresortedPhi(PhiCupySegmented):
    """The segmented Φ reading Π already in row order: the solver's Π kernel writes it so."""

    def __init__(self) -> None:
        super().__init__(pi_order="sorted")

    def _row_ordered(self, pi: Any, perm: Any) -> Any:
        return pi


class CupyMu(UpToMaxOrder, CupyMuVariant):  # its Π is pi's cupy-rows-sorted
    name = "cupy"
    family = "portable"
    description = ("CuPy kernels: Π written in row order, segmented warp Φ reading it streamed, grid-wide KKT and "
                   "column-sum reductions, the update")

    def build(self, tensors: list[TensorArrays], factors: list[Any], pis: list[Any], phis: list[Any],
              epsilon: float) -> Calls:
        pi_variant, phi_variant = CupyRowsSorted(), _PresortedPhi()
        calls = []
        for n, (tensor, pi) in enumerate(zip(tensors, pis)):
            arranged = phi_variant.arrange(tensor, n)  # (P, rows and values in row order)
            calls.append((pi_variant.bind((tensor, n, arranged[0]), factors, pi),
                          phi_variant.bind(arranged, factors[n], pi, epsilon, phis[n], "none")))
        return calls

    def kkt_update(self, b: Any, phi: Any, stoptol: float) -> float:
        cp = cupy()
        violation, update = _kernels()
        if not (b.flags.c_contiguous and phi.flags.c_contiguous):
            raise PortabenchError("cupy: the KKT check reads B and Φ as contiguous rows")
        size = b.size
        worst = cp.zeros(1, dtype=cp.uint64)
        blocks = _blocks(size)
        violation((blocks,), (THREADS,), (b, phi, cp.int64(size), worst))
        value = float(worst.view(cp.float64).get()[0])
        if value >= stoptol:
            update(phi, b)
        return value

    def column_sums(self, a: Any) -> Any:
        cp = cupy()
        size, rank = a.size, a.shape[1]
        if not a.flags.c_contiguous or rank > THREADS:
            raise PortabenchError(f"cupy: column sums of a contiguous factor of at most {THREADS} columns")
        blocks = _blocks(size)
        stride = blocks * THREADS // rank * rank  # a thread's elements all lie in one column
        sums = cp.zeros(rank)
        _column_sums()((blocks,), (THREADS,), (a, cp.int64(size), cp.int32(rank), cp.int64(stride), sums),
                       shared_mem=THREADS * 8)
        return sums


THREADS = 256
BLOCKS_PER_SM = 8  # the grid-stride reductions: enough blocks to fill every SM, one atomic each

# max |min(B, 1 - Φ)| over the whole array: each thread over a grid-stride share, then the warp and the block by
# shuffles and shared memory, then one atomic max per block on the bits (non-negative doubles order as their bits).
# fmax skips NaN, as the CuPy ReductionKernel this replaced did (that one reduced with one block per output:
# slow on lbnl's largest factor, EXPERIMENTS.md).
_KKT_SOURCE = WARP_SHUFFLE + r"""
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#define PB_WARP warpSize
#else
#define PB_WARP 32
#endif
extern "C" __global__ void mu_kkt_violation(const double* __restrict__ b, const double* __restrict__ phi,
                                            const long long size, unsigned long long* __restrict__ worst) {
  __shared__ double warps[32];
  double m = 0.0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size; i += stride)
    m = fmax(m, fabs(fmin(b[i], 1.0 - phi[i])));
  for (int d = PB_WARP / 2; d > 0; d /= 2) m = fmax(m, PB_SHFL_DOWN(m, d, PB_WARP));
  const int lane = threadIdx.x % PB_WARP, warp = threadIdx.x / PB_WARP;
  if (lane == 0) warps[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < (blockDim.x + PB_WARP - 1) / PB_WARP ? warps[lane] : 0.0;
    for (int d = PB_WARP / 2; d > 0; d /= 2) m = fmax(m, PB_SHFL_DOWN(m, d, PB_WARP));
    if (lane == 0) atomicMax(worst, (unsigned long long)__double_as_longlong(m));
  }
}
"""


# Column sums of a C-contiguous I x R factor (CuPy's sum(axis=0) reduces each of the R columns in one block):
# each thread sums a grid-stride share of one column, the block adds its threads' sums by column in shared
# memory, then one atomic add per column and block.
_COLUMN_SUMS_SOURCE = r"""
extern "C" __global__ void mu_column_sums(const double* __restrict__ a, const long long size, const int rank,
                                          const long long stride, double* __restrict__ sums) {
  extern __shared__ double part[];
  const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  double acc = 0.0;
  if (t < stride)
    for (long long e = t; e < size; e += stride) acc += a[e];
  part[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x < rank) {  // thread c adds the block's threads of column c
    const int base = (int)(((long long)blockIdx.x * blockDim.x) % rank);
    double s = 0.0;
    for (int u = ((int)threadIdx.x - base + rank) % rank; u < blockDim.x; u += rank) s += part[u];
    atomicAdd(sums + threadIdx.x, s);
  }
}
"""


def _blocks(size: int) -> int:
    """Blocks of a grid-stride reduction over ``size`` elements: enough to fill every SM, no more."""
    return max(1, min(-(-size // THREADS), BLOCKS_PER_SM * multiprocessors()))


@functools.cache
def _column_sums() -> Any:
    return cupy().RawKernel(_COLUMN_SUMS_SOURCE, "mu_column_sums")


@functools.cache
def _kernels() -> tuple[Any, Any]:
    """The KKT violation (a grid-wide max) and the update (elementwise), compiled once."""
    cp = cupy()
    return (cp.RawKernel(_KKT_SOURCE, "mu_kkt_violation"),
            cp.ElementwiseKernel("float64 phi", "float64 b", "b *= phi", "mu_update"))
