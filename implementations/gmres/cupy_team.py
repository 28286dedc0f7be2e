"""GPU portable: team-batched GMRES (paper [004]), a CuPy RawKernel; one thread block per group of m systems.

The whole solve is one kernel launch: no host round trip inside it. A block of ``m * Q``
threads owns m systems; thread t works for system ``s = t % m`` on rows ``t / m``,
``t / m + Q``, ... (the paper's TeamVectorRange over the m n (row, system) pairs). Values and
right-hand sides are stored entry-major within each group (``values[g][l][s]``: Kokkos'
LayoutLeft per team, set up untimed), and the block's vectors as ``[vector][row][s]``, so a
warp reads consecutive systems (coalesced) and a block streams one contiguous range. Batched SpMV, dots, axpys and norms run at the block level; each dot
ends in a per-system sum of the Q partials (one block barrier, the paper's
``team_barrier``). Thread s of the first row-lane does system s's Givens rotations, and
a system that converged (or failed) stops being updated while the others of its group go
on. Cycles of at most ``restart`` steps restart from the recomputed residual.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..gpu import CupyArrays, allow_shared_memory, cupy, synchronize
from ..model import PortabenchError
from .definition import GmresProblem
from .variant import GmresVariant, check_group

# Launch shape, register cap and shared w: measured, with what was tried and did not help, in this
# folder's EXPERIMENTS.md.
THREADS = 576  # target block size; Q = THREADS // m row-lanes per system
MAX_REGISTERS = 56
# Two blocks per SM share its 228 KiB of shared memory: w goes there (gri30 and isooctane at
# m = 32: 23 and 46 KiB per block) when a block then needs at most this.
SHARED_W_LIMIT = 100 * 1024

_SOURCE = r"""
template <bool W_SHARED, bool V_SHARED>
__global__ void gmres_team(
    const int N, const int n, const int m, const int Q, const int R, const int max_iter, const double tol,
    const int* __restrict__ row_ptr, const int* __restrict__ col_idx, const int* __restrict__ diag_pos,
    const double* __restrict__ values,   // (groups, nnz, m): entry-major within each group
    const double* __restrict__ b,        // (groups, n, m)
    double* __restrict__ scratch,        // per block: (R + 4) vectors of n * m: V_0..V_R, w, dinv, x
    double* __restrict__ hess,           // per system: R * R + 5 R + 2 scalars (Hs below)
    double* __restrict__ x_out,          // (N, n)
    int* __restrict__ iterations,        // (N,)
    int* __restrict__ converged)         // (N,)
{
    extern __shared__ double smem[];
    const int T = m * Q;
    double* partial = smem;              // 2 T: two buffers
    double* beta0 = partial + 2 * T;     // m: ||r_0||
    double* beta = beta0 + m;            // m: the cycle's ||r||
    int* active = (int*)(beta + m);      // m: still iterating in this cycle
    int* steps = active + m;             // m: steps done in this cycle
    int* done = steps + m;               // m: steps done in all
    int* ok = done + m;                  // m: converged
    double* w_shared = (double*)(ok + m); // n * m if W_SHARED (the 16 m bytes of ints keep it aligned)
    double* v_shared = w_shared + (W_SHARED ? (long)n * m : 0);  // n * m if V_SHARED: the step's v_j

    const int t = threadIdx.x;
    const int s = t % m;
    const int q = t / m;
    const long k = (long)blockIdx.x * m + s;
    const bool real = k < N;             // the last group may be partial
    const long nm = (long)n * m;
    const int nnz = row_ptr[n];
    const double* vals = values + (long)blockIdx.x * nnz * m + s;  // entry l of system s: vals[l * m]
    const double* bs = b + (long)blockIdx.x * nm + s;
    double* V = scratch + (long)blockIdx.x * (R + 4) * nm;
    // w = M^-1 A v_j: each thread reads and writes only its own rows of it, 3 (j + 1) times per
    // step in Gram-Schmidt; in shared memory (when it fits) that traffic never reaches DRAM.
    double* w = W_SHARED ? w_shared : V + (long)(R + 1) * nm;
    double* dinv = V + (long)(R + 2) * nm;
    double* xs = dinv + nm;
    // system s's own scalars (used by its Givens thread only): R (R x R, column-major), the
    // current Hessenberg column, the rotated right-hand side g, the rotations and y
    double* Hs = hess + (real ? k : 0)  /* a padding system never writes */ * (long)(R * R + 5 * R + 2);
    double* hc = Hs + R * R;             // R + 1
    double* gs = hc + R + 1;             // R + 1
    double* c = gs + R + 1;              // R
    double* sg = c + R;                  // R
    double* ys = sg + R;                 // R
#define AT(vec, row) ((vec) + (long)(row) * m + s)

    // Per-system sum of the Q partials of every thread, computed by each of the system's
    // threads alike (same order, same result). The partials alternate between two buffers,
    // so one barrier per reduction suffices: a thread can only overwrite a buffer after the
    // next reduction's barrier, which every thread reaches after reading it.
    int buffer = 0;
#define REDUCE(value, result)                                          \
    partial[buffer * T + t] = (value);                                 \
    __syncthreads();                                                   \
    {                                                                  \
        double acc = 0.0;                                              \
        for (int p = 0; p < Q; ++p) acc += partial[buffer * T + s + p * m]; \
        result = acc;                                                  \
    }                                                                  \
    buffer ^= 1;

    // Jacobi setup, x = 0, r0 = dinv * b
    double local = 0.0, sum;
    for (int r = q; r < n; r += Q) {
        double d = real ? vals[(long)diag_pos[r] * m] : 1.0;
        double v = real ? bs[(long)r * m] / d : 0.0;
        *AT(dinv, r) = 1.0 / d;
        *AT(V, r) = v;
        *AT(xs, r) = 0.0;
        local += v * v;
    }
    REDUCE(local, sum)
    if (q == 0) {
        beta0[s] = sqrt(sum);
        done[s] = 0;
        ok[s] = (beta0[s] == 0.0 || !real) ? 1 : 0;
        active[s] = ok[s] ? 0 : 1;
        beta[s] = beta0[s];
    }
    __syncthreads();
    int cycle = 0;
    while (__syncthreads_or(active[s])) {
        if (cycle > 0) {  // restart: r = dinv * (b - A x)
            local = 0.0;
            if (active[s]) {
                for (int r = q; r < n; r += Q) {
                    double acc = 0.0;
                    for (int l = row_ptr[r]; l < row_ptr[r + 1]; ++l) acc += vals[(long)l * m] * *AT(xs, col_idx[l]);
                    double v = *AT(dinv, r) * (bs[(long)r * m] - acc);
                    *AT(V, r) = v;
                    local += v * v;
                }
            }
            REDUCE(local, sum)
            if (q == 0 && active[s]) beta[s] = sqrt(sum);
            __syncthreads();
        }
        if (active[s]) {
            for (int r = q; r < n; r += Q) {
                const double v = *AT(V, r) / beta[s];
                *AT(V, r) = v;
                if (V_SHARED) *AT(v_shared, r) = v;
            }
        }
        if (q == 0) { steps[s] = 0; if (active[s]) gs[0] = beta[s]; }
        __syncthreads();
        const int cycle_len = min(R, n);
        for (int j = 0; j < cycle_len; ++j) {
            if (!__syncthreads_or(active[s])) break;
            const bool on = active[s];
            // v_j as the SpMV reads it: each row n_r times, from shared memory when it is there
            const double* vj = V_SHARED ? v_shared : V + (long)j * nm;
            if (on) {  // w = dinv * (A v_j) = v_j + dinv * (off-diagonal part of A) v_j
                // dinv * a_rr = 1: skipping the diagonal saves its value's load (n of nnz per SpMV)
                for (int r = q; r < n; r += Q) {
                    const int diagonal = diag_pos[r];
                    double acc = 0.0;
                    for (int l = row_ptr[r]; l < diagonal; ++l) acc += vals[(long)l * m] * *AT(vj, col_idx[l]);
                    #pragma unroll 4
                    for (int l = diagonal + 1; l < row_ptr[r + 1]; ++l) acc += vals[(long)l * m] * *AT(vj, col_idx[l]);
                    *AT(w, r) = *AT(vj, r) + *AT(dinv, r) * acc;
                }
            }
            for (int i = 0; i <= j; ++i) {  // modified Gram-Schmidt
                double* Vi = V + (long)i * nm;
                local = 0.0;
                if (on) for (int r = q; r < n; r += Q) local += *AT(w, r) * *AT(Vi, r);
                REDUCE(local, sum)
                const double h = sum;
                if (q == 0 && on) hc[i] = h;
                if (on) for (int r = q; r < n; r += Q) *AT(w, r) -= h * *AT(Vi, r);
            }
            local = 0.0;
            if (on) for (int r = q; r < n; r += Q) local += *AT(w, r) * *AT(w, r);
            REDUCE(local, sum)
            const double hn = sqrt(sum);
            if (on && hn > 0.0) {
                double* Vn = V + (long)(j + 1) * nm;
                for (int r = q; r < n; r += Q) {
                    const double v = *AT(w, r) / hn;
                    *AT(Vn, r) = v;
                    if (V_SHARED) *AT(v_shared, r) = v;  // every read of v_j (the SpMV) is done: barriers since
                }
            }
            if (q == 0 && on) {  // Givens rotations of system s
                hc[j + 1] = hn;
                for (int i = 0; i < j; ++i) {
                    const double a = hc[i], e = hc[i + 1];
                    hc[i] = c[i] * a + sg[i] * e;
                    hc[i + 1] = -sg[i] * a + c[i] * e;
                }
                const double rho = hypot(hc[j], hc[j + 1]);
                if (rho == 0.0) {  // breakdown: singular preconditioned matrix; x keeps the last cycle's value
                    active[s] = 0;
                } else {
                    c[j] = hc[j] / rho;
                    sg[j] = hc[j + 1] / rho;
                    hc[j] = rho;
                    for (int i = 0; i <= j; ++i) Hs[(long)j * R + i] = hc[i];
                    gs[j + 1] = -sg[j] * gs[j];
                    gs[j] = c[j] * gs[j];
                    steps[s] = j + 1;
                    done[s] += 1;
                    if (fabs(gs[j + 1]) / beta0[s] < tol) { ok[s] = 1; active[s] = 0; }
                    else if (done[s] >= max_iter) active[s] = 0;
                }
            }
            __syncthreads();
        }
        // end of cycle: y = R^{-1} g, x += V y, for every system that took steps
        if (q == 0) {
            const int cn = steps[s];
            for (int i = cn - 1; i >= 0; --i) {
                double acc = gs[i];
                for (int l = i + 1; l < cn; ++l) acc -= Hs[(long)l * R + i] * ys[l];
                ys[i] = acc / Hs[(long)i * R + i];
            }
            // still active: not converged, iterations left, no breakdown (a full cycle)
            active[s] = (!ok[s] && done[s] < max_iter && cn == cycle_len && real) ? 1 : 0;
        }
        __syncthreads();
        const int cn = steps[s];
        for (int r = q; r < n; r += Q) {
            double acc = *AT(xs, r);
            for (int i = 0; i < cn; ++i) acc += ys[i] * *AT(V + (long)i * nm, r);
            *AT(xs, r) = acc;
        }
        __syncthreads();
        ++cycle;
    }
    if (real) {
        for (int r = q; r < n; r += Q) x_out[k * n + r] = *AT(xs, r);
        if (q == 0) { iterations[k] = done[s]; converged[k] = ok[s]; }
    }
}
"""


_NAMES = {(w, v): f"gmres_team<{str(w).lower()}, {str(v).lower()}>" for w in (False, True) for v in (False, True)}


@functools.cache
def _module(max_registers: int | None = None) -> Any:
    options = ("-std=c++14",) + (() if max_registers is None else (f"--maxrregcount={max_registers}",))
    return cupy().RawModule(code=_SOURCE, options=options, name_expressions=list(_NAMES.values()))


def launch_shape(m: int, n: int, threads: int = THREADS) -> tuple[int, int]:
    """(Q row-lanes per system, threads per block): about ``threads`` threads, at most n lanes."""
    q = max(1, min(threads // m, n))
    return q, m * q


def shared_bytes(m: int, threads: int, n: int = 0, w_shared: bool = False, v_shared: bool = False) -> int:
    """Dynamic shared memory per block: partial sums and per-system scalars, plus w and v_j if shared."""
    return 8 * (2 * threads + 2 * m) + 4 * 4 * m + 8 * n * m * (int(w_shared) + int(v_shared))


def w_in_shared(m: int, threads: int, n: int) -> bool:
    """Whether w goes to shared memory: when the block then still needs at most
    ``SHARED_W_LIMIT`` bytes, so that register-limited occupancy is kept."""
    return shared_bytes(m, threads, n, True) <= SHARED_W_LIMIT


def v_in_shared(m: int, threads: int, n: int, w_shared: bool) -> bool:
    """Whether the step's v_j goes to shared memory too, under the same limit (w first)."""
    return w_shared and shared_bytes(m, threads, n, True, True) <= SHARED_W_LIMIT


def per_system_scalars(restart: int) -> int:
    return restart * restart + 5 * restart + 2


def _grouped(cp: Any, rows: np.ndarray, m: int, groups: int) -> Any:
    """(N, L) system-major -> (groups, L, m) on the GPU: each group's block entry-major and
    contiguous (streamed in order by its thread block); padding systems are zeros."""
    padded = cp.zeros((groups * m, rows.shape[1]))
    padded[: rows.shape[0]] = cp.asarray(rows)
    return cp.ascontiguousarray(padded.reshape(groups, m, rows.shape[1]).transpose(0, 2, 1))


class GmresCupyTeam(CupyArrays, GmresVariant):
    name = "cupy-team"
    family = "portable"
    description = "CuPy RawKernel team-batched GMRES: one block per group of m systems, one launch"

    def __init__(self, m: int = 32, threads: int = THREADS, max_registers: int | None = MAX_REGISTERS,
                 shared_w: bool | None = None, shared_v: bool | None = None) -> None:
        """``shared_w``, ``shared_v``: keep w, and the step's v_j, in shared memory (None: where they fit,
        see ``w_in_shared`` and ``v_in_shared``)."""
        self.max_registers = max_registers
        self.shared_w, self.shared_v = shared_w, shared_v
        self.m = check_group(self.name, m)
        if not 32 <= int(threads) <= 1024:
            raise PortabenchError(f"{self.name}: threads per block must be in 32..1024, got {threads}")
        self.threads = int(threads)

    def prepare_solver(self, problem: GmresProblem) -> None:
        cp = cupy()
        s = problem.systems
        self._restart = min(int(problem.restart), s.n)
        self._q, self._threads = launch_shape(self.m, s.n, self.threads)
        self._blocks = math.ceil(s.num_systems / self.m)
        w_shared = w_in_shared(self.m, self._threads, s.n) if self.shared_w is None else bool(self.shared_w)
        v_shared = v_in_shared(self.m, self._threads, s.n, w_shared) if self.shared_v is None else bool(self.shared_v)
        self._shared = shared_bytes(self.m, self._threads, s.n, w_shared, v_shared)
        kernel = _module(self.max_registers).get_function(_NAMES[w_shared, v_shared])
        limit = cp.cuda.Device().attributes.get("MaxSharedMemoryPerBlockOptin", 48 * 1024)
        if self._shared > limit:
            raise PortabenchError(f"{self.name}: m={self.m} needs {self._shared} B of shared memory per block, "
                                  f"the GPU allows {limit}: use a smaller m")
        allow_shared_memory(kernel, self._shared)
        scratch = self._blocks * (self._restart + 4) * s.n * self.m + s.num_systems * per_system_scalars(self._restart)
        need = 8 * (s.values.size + s.rhs.size * 2 + scratch)
        free = cp.cuda.Device().mem_info[0]
        if need > 0.8 * free:
            raise PortabenchError(f"{self.name}: {need / 2**30:.1f} GiB of GPU memory needed, {free / 2**30:.1f} GiB free: "
                                  "use fewer systems")
        self._values = _grouped(cp, s.values, self.m, self._blocks)
        self._rhs = _grouped(cp, s.rhs, self.m, self._blocks)
        self._row_ptr = cp.asarray(s.row_ptr, dtype=cp.int32)
        self._col_idx = cp.asarray(s.col_idx, dtype=cp.int32)
        self._diag = cp.asarray(s.diagonal_positions, dtype=cp.int32)
        self._scratch = cp.empty(self._blocks * (self._restart + 4) * s.n * self.m, dtype=cp.float64)
        self._hess = cp.empty(s.num_systems * per_system_scalars(self._restart), dtype=cp.float64)
        self._kernel = kernel
        self._problem_scalars = (np.int32(s.num_systems), np.int32(s.n), np.int32(self.m), np.int32(self._q),
                                 np.int32(self._restart), np.int32(problem.max_iter), np.float64(problem.tol))
        self.solve()  # compile and warm up
        synchronize()

    def solve(self) -> tuple[Any, Any]:
        cp = cupy()
        s = self._problem.systems
        x = cp.empty((s.num_systems, s.n), dtype=cp.float64)
        iterations = cp.empty(s.num_systems, dtype=cp.int32)
        self._converged = cp.empty(s.num_systems, dtype=cp.int32)
        self._kernel((self._blocks,), (self._threads,),
                     (*self._problem_scalars, self._row_ptr, self._col_idx, self._diag, self._values, self._rhs,
                      self._scratch, self._hess, x, iterations, self._converged),
                     shared_mem=self._shared)
        synchronize()
        return x, iterations

