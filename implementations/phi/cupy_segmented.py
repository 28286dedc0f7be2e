"""GPU portable: sorted and segmented Φ: a warp per run of row-sorted nonzeros, few atomics.

The nonzeros are sorted by output row once per mode (``arrange``: the permutation P and
the sorted rows and values; Π stays in file order and is read through P, as SparTen's CPU
code reads it). A warp takes a chunk of 32 x ``per_thread`` consecutive sorted nonzeros,
32 at a time, one per lane: each lane forms s_j Π(j, :) in registers. A step wholly inside
the warp's open row only adds these to each lane's sums of that row (long rows: no shuffle);
a step that ends rows sums the lanes of each row by a segmented warp reduction (shuffles,
keyed by row), adds complete rows at once and keeps its last row open. Only a row's sums
leave the warp: atomic adds fall from one per (nonzero, r) to about one per (row piece, r),
and Π is read by whole warps.

Launch parameters: threads per block, blocks (0: one chunk per warp) and nonzeros per
thread (``per_thread``: steps per chunk). Pressure points: ``no-atomics``, ``reuse``, ``both``.

``cupy-segmented-presorted`` reads Π already in row order (``pi_order="sorted"``, permuted
untimed in ``bind``): CP-APR recomputes Π once per mode and outer iteration, and its Π
kernel can write the rows in that order at the same cost (it reads every nonzero's indices
anyway), so every inner iteration's Φ streams Π instead of gathering 80-byte rows through
P (measured in this folder's EXPERIMENTS.md).
"""

from __future__ import annotations

from typing import Any, Callable

from ..gpu import STREAMED_LOADS, cupy, launchable, templated_kernel
from ..model import PortabenchError
from ..tensor_inputs import TensorArrays
from .variant import CupyPhiVariant, row_order

SOURCE = STREAMED_LOADS + r"""
#define FULL 0xffffffffu

// A row of Π. Π in row order is one stream: streamed loads, in pairs where R is even (rows start 16-byte
// aligned). Rows gathered through the permutation are plain loads (streamed ones, bringing 256 bytes into L2
// for each 80-byte row, were slower on nell-2's mode 2: EXPERIMENTS.md), and so is the reuse pressure
// point's row 0, read again and again.
template <int R, int STREAM>
__device__ __forceinline__ void load_pi_row(const double* p, double* v)
{
    if (!STREAM) {
#pragma unroll
        for (int r = 0; r < R; ++r) v[r] = p[r];
    } else if (R % 2 == 0) {
#pragma unroll
        for (int r = 0; r < R; r += 2) {
            const double2 t = pb_load_streamed(reinterpret_cast<const double2*>(p + r));
            v[r] = t.x;
            v[r + 1] = t.y;
        }
    } else {
#pragma unroll
        for (int r = 0; r < R; ++r) v[r] = pb_load_streamed(p + r);
    }
}

template <int R, int ATOMIC>
__device__ __forceinline__ void flush(double* out, int row, const double* sums)
{
#pragma unroll
    for (int r = 0; r < R; ++r) {
        if (ATOMIC) atomicAdd(out + (long long)row * R + r, sums[r]);
        else out[(long long)row * R + r] += sums[r];
    }
}

// Nonzero z of the sorted order: its row, its value and its row of Π (through P unless Π is in row order).
template <int R, int PERMUTED, int REUSE>
__device__ __forceinline__ void load_nonzero(const long long z, const int* __restrict__ perm,
                                             const int* __restrict__ rows, const double* __restrict__ values,
                                             const double* __restrict__ pi, int& i, double& value, double* v)
{
    i = rows[z];
    value = values[z];
    const long long j = PERMUTED ? (long long)perm[z] : z;
    load_pi_row<R, !PERMUTED && !REUSE>(pi + (REUSE ? 0LL : j * R), v);
}

// Lane 0 adds a row's sums to Φ; sums spread over the warp's lanes are summed into every lane first.
template <int R, int ATOMIC>
__device__ __forceinline__ void close_row(double* out, int row, double* sums, bool spread, int lane)
{
    if (spread) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
            for (int r = 0; r < R; ++r) sums[r] += __shfl_xor_sync(FULL, sums[r], off);
        }
    }
    if (lane == 0) flush<R, ATOMIC>(out, row, sums);
}

template <int R, int ATOMIC, int REUSE, int PERMUTED>
__global__ void phi_segmented(const int* __restrict__ perm, const int* __restrict__ rows,
                              const double* __restrict__ values, const double* __restrict__ b,
                              const double* __restrict__ pi, double* __restrict__ out,
                              const long long nnz, const double epsilon, const int per_thread)
{
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long chunk = 32LL * per_thread;
    const long long chunks = (nnz + chunk - 1) / chunk;
    for (long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; w < chunks; w += warps) {
        const long long start = w * chunk;
        const long long stop = min(start + chunk, nnz);
        // The warp's open row (warp-uniform) and its partial sums: in lane 0 alone after a step that ended
        // rows, spread over every lane (each its own nonzeros') after steps wholly inside the row.
        int open_row = -1;
        bool spread = false;
        double acc[R];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = 0.0;
        // A step's loads (row, value, Π's row) are issued one step ahead, before the previous step's sums
        // and shuffles: a warp's steps are sequential, and each would otherwise wait out its loads' latency.
        int next_i = -1;
        double next_value = 0.0, next_pi[R];
        if (start + lane < stop) load_nonzero<R, PERMUTED, REUSE>(start + lane, perm, rows, values, pi, next_i,
                                                                   next_value, next_pi);
        for (long long z0 = start; z0 < stop; z0 += 32) {
            const long long z = z0 + lane;
            const bool live = z < stop;
            const int i = live ? next_i : -1;
            const double value = next_value;
            double v[R];
#pragma unroll
            for (int r = 0; r < R; ++r) v[r] = next_pi[r];
            if (z + 32 < stop) load_nonzero<R, PERMUTED, REUSE>(z + 32, perm, rows, values, pi, next_i, next_value,
                                                                next_pi);
            if (live) {
                const double* bi = b + (REUSE ? 0LL : (long long)i * R);
                double dot = 0.0;
#pragma unroll
                for (int r = 0; r < R; ++r) dot += bi[r] * v[r];
                const double s = value / fmax(dot, epsilon);
#pragma unroll
                for (int r = 0; r < R; ++r) v[r] *= s;
            } else {
#pragma unroll
                for (int r = 0; r < R; ++r) v[r] = 0.0;
            }
            // A step wholly inside the open row (long rows: most steps) only adds: no shuffle, no atomic.
            if (__all_sync(FULL, !live || i == open_row)) {
#pragma unroll
                for (int r = 0; r < R; ++r) acc[r] += v[r];
                spread = true;
                continue;
            }
            // Segmented suffix sums (rows are contiguous): lane l ends with the sum of its row's
            // lanes l..31, so each row's first lane (its head) holds the row's sum in this step.
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const int other = __shfl_down_sync(FULL, i, off);
                const bool same = lane + off < 32 && other == i;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const double t = __shfl_down_sync(FULL, v[r], off);
                    if (same) v[r] += t;
                }
            }
            const int previous = __shfl_up_sync(FULL, i, 1);
            bool head = live && (lane == 0 || previous != i);
            const int last = 31 - __clz(__ballot_sync(FULL, head));  // the head of the step's last row
            // The open row ends in this step: at its first row if that continues it (a step not wholly inside
            // the open row that starts in it has a later row), else before the step.
            if (__shfl_sync(FULL, i, 0) == open_row && lane == 0) {
#pragma unroll
                for (int r = 0; r < R; ++r) acc[r] += v[r];
                head = false;
            }
            if (open_row >= 0) close_row<R, ATOMIC>(out, open_row, acc, spread, lane);
            if (head && lane != last) flush<R, ATOMIC>(out, i, v);
            // The step's last row stays open, in lane 0.
            open_row = __shfl_sync(FULL, i, last);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const double t = __shfl_sync(FULL, v[r], last);
                acc[r] = lane == 0 ? t : 0.0;
            }
            spread = false;
        }
        if (open_row >= 0) close_row<R, ATOMIC>(out, open_row, acc, spread, lane);
    }
}
"""

THREADS = 256
PER_THREAD = 16  # 512 sorted nonzeros per warp (the launch sweep: EXPERIMENTS.md)
PI_ORDERS = ("tensor", "sorted")


class PhiCupySegmented(CupyPhiVariant):
    name = "cupy-segmented"
    family = "portable"
    description = ("CuPy RawModule: a warp per run of row-sorted nonzeros, segmented shuffle sums, atomics per row piece; "
                   "a row open across steps summed per lane, without shuffles")
    perturbations = ("none", "no-atomics", "reuse", "both")

    def __init__(self, perturbation: str = "none", threads: int = THREADS, blocks: int = 0,
                 per_thread: int = PER_THREAD, pi_order: str = "tensor") -> None:
        super().__init__(perturbation)
        if pi_order not in PI_ORDERS:
            raise PortabenchError(f"{self.name}: pi_order must be one of {', '.join(PI_ORDERS)}, got {pi_order!r}")
        self.threads = max(32, int(threads) // 32 * 32)  # whole warps
        self.blocks, self.per_thread, self.pi_order = int(blocks), max(1, int(per_thread)), pi_order

    def arrange(self, tensor: TensorArrays, mode: int) -> tuple[Any, Any, Any]:
        perm = row_order(cupy(), tensor.idx[mode])
        return perm, tensor.idx[mode][perm], tensor.values[perm]

    def bind(self, arranged: tuple[Any, Any, Any], b: Any, pi: Any, epsilon: float, out: Any,
             perturbation: str) -> Callable[[], Any]:
        cp = cupy()
        perm, rows, values = arranged
        nnz, rank = pi.shape
        permuted = self.pi_order == "tensor"
        if not permuted:
            pi = self._row_ordered(pi, perm)
        kernel = templated_kernel(SOURCE, "phi_segmented", rank, perturbation not in ("no-atomics", "both"),
                                  perturbation in ("reuse", "both"), permuted)
        launchable(kernel, self.threads, self.name)
        chunks = -(-nnz // (32 * self.per_thread))
        grid = (self.blocks or max(1, -(-chunks * 32 // self.threads)),)
        args = (perm, rows, values, b, pi, out, cp.int64(nnz), cp.float64(epsilon), cp.int32(self.per_thread))

        def call() -> None:
            out.fill(0.0)
            kernel(grid, (self.threads,), args)

        return call

    def _row_ordered(self, pi: Any, perm: Any) -> Any:
        """Π in row order, made once per Π (a perturbed variant binds twice to the same arrays)."""
        source, ordered = getattr(self, "_pi_rows", (None, None))
        if source is not pi:
            ordered = cupy().ascontiguousarray(pi[perm])
            self._pi_rows = (pi, ordered)
        return ordered
