"""GPU portable: PDNR multi-kernel (paper [002]'s all-node kernel): rows with more nonzeros than the
threshold are solved by device-wide kernels over their nonzeros, the other rows by ``cupy_single``'s
kernel, a warp per row, or a thread per row for rows of at most SHORT_ROW nonzeros, each on its own
stream so that the three kinds overlap.

The heavy rows of a mode advance in lock-step, each stage one launch for all of them: the sums over
their nonzeros (gradient, Hessian and the objective at b in one pass: blocks of CHUNK nonzeros of one
row, warp sums, one atomic add per warp), then the R-sized Newton step (a thread per row: KKT check,
direction, first trial point), then per backtracking trial the objective at the trial point (blocks
again) and the line-search decision (a thread per row). Every stage is built from ``row_cuda.ROW_MATH``'s
pieces, the ones ``cupy_single``'s kernel runs in one loop, split at each sum; the Newton loop runs on the
device, and the host only reads two counters after each trial (rows that entered the search, rows still
searching) to stop launching once none is left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..gpu import cupy, multiprocessors, templated_kernel
from .cupy_single import THREADS, CupySingle
from .row_cuda import ROW_MATH
from .row_numba import EPS_DIV, MAX_BACKTRACK, MAX_INNER, MU0
from .variant import settings_vector

SOURCE = ROW_MATH + r"""
// per heavy row (slot): flags (long long), scalars and the sums: phi (R), H's upper triangle, the
// objective's log term at b, the log term at the trial point
enum { F_ACTIVE, F_SEARCHING, F_EVALUATE, F_STEP, F_COUNT, NF };
enum { S_MU, S_FOLD, S_ALPHA, S_FUNIT, S_FNEW, S_TOTAL, S_DESCENT, S_PREDICTED, NSC };
#define NSUM(R) ((R) + (R) * ((R) + 1) / 2 + 2)

template <int R>
__device__ void propose(const double* b, const double* g, const double* d, double* trial, double* c, long long* f,
                        double* sums, const double* s) {
    double total;
    const double descent = trial_point<R>(b, d, c[S_ALPHA], g, trial, total);
    c[S_DESCENT] = descent;
    c[S_TOTAL] = total;
    f[F_EVALUATE] = !REJECTED_OUTRIGHT(descent, total, s);
    sums[NSUM(R) - 1] = 0.0;
}

template <int R>
__device__ void finish(double* b, const double* trial_in, double* c, long long* f, double* sums, const double* s,
                       long long* steps, long long row) {
    double trial[R];
    for (int r = 0; r < R; ++r) trial[r] = trial_in[r];
    end_step<R>(b, trial, sums, f[F_COUNT], c[S_FOLD], c[S_FNEW], c[S_FUNIT], c[S_TOTAL], c[S_PREDICTED], c[S_MU], s);
    f[F_SEARCHING] = 0;
    f[F_STEP] += 1;
    if (f[F_STEP] >= (long long)s[0]) { f[F_ACTIVE] = 0; steps[row] = f[F_STEP]; }
    for (int k = 0; k < NSUM(R); ++k) sums[k] = 0.0;  // the next Newton step's sums
}

template <int R>
__global__ void heavy_sums(const double* __restrict__ pi, const double* __restrict__ x,
                           const int* __restrict__ block_slot, const long long* __restrict__ block_lo,
                           const long long* __restrict__ block_hi, const double* __restrict__ B,
                           const long long* __restrict__ rows, const double eps, const long long* __restrict__ flags,
                           double* __restrict__ sums) {
    const int slot = block_slot[blockIdx.x];
    if (!flags[slot * NF + F_ACTIVE]) return;
    double b[R], phi[R], hess[R * (R + 1) / 2];
    for (int r = 0; r < R; ++r) b[r] = B[rows[slot] * R + r];
    double log_b = 0.0;
    partial_sums<R, true>(pi, x, block_lo[blockIdx.x], block_hi[blockIdx.x], threadIdx.x, blockDim.x, b, eps, phi,
                          hess, &log_b);
    double* out = sums + slot * NSUM(R);
    const bool leader = (threadIdx.x % PDNR_WARP) == 0;
    for (int r = 0; r < R; ++r) {
        const double v = warp_sum(phi[r]);
        if (leader) atomicAdd(out + r, v);
    }
    for (int t = 0; t < R * (R + 1) / 2; ++t) {
        const double v = warp_sum(hess[t]);
        if (leader) atomicAdd(out + R + t, v);
    }
    const double v = warp_sum(log_b);
    if (leader) atomicAdd(out + NSUM(R) - 2, v);
}

template <int R>
__global__ void heavy_trial_log(const double* __restrict__ pi, const double* __restrict__ x,
                                const int* __restrict__ block_slot, const long long* __restrict__ block_lo,
                                const long long* __restrict__ block_hi, const long long* __restrict__ flags,
                                const double* __restrict__ vec, double* __restrict__ sums) {
    const int slot = block_slot[blockIdx.x];
    if (!flags[slot * NF + F_EVALUATE]) return;
    double trial[R];
    for (int r = 0; r < R; ++r) trial[r] = vec[slot * 3 * R + 2 * R + r];
    const double v = warp_sum(partial_log_sum<R>(pi, x, block_lo[blockIdx.x], block_hi[blockIdx.x], threadIdx.x,
                                                 blockDim.x, trial));
    if ((threadIdx.x % PDNR_WARP) == 0) atomicAdd(sums + slot * NSUM(R) + NSUM(R) - 1, v);
}

// a thread per heavy row: the KKT check, the damped Newton direction and the first trial point
template <int R>
__global__ void heavy_begin(const double* __restrict__ B, const long long* __restrict__ rows, const long long n,
                            const double* __restrict__ s, long long* __restrict__ flags, double* __restrict__ sums,
                            double* __restrict__ vec, double* __restrict__ scal, long long* __restrict__ steps,
                            unsigned long long* __restrict__ counters) {
    const long long slot = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (slot >= n) return;
    long long* f = flags + slot * NF;
    if (!f[F_ACTIVE]) return;
    double b[R];
    for (int r = 0; r < R; ++r) b[r] = B[rows[slot] * R + r];
    double* sm = sums + slot * NSUM(R);
    double* g = vec + slot * 3 * R;
    double* c = scal + slot * NSC;
    if (kkt_and_gradient<R>(b, sm, g) < s[2]) {
        f[F_ACTIVE] = 0;
        steps[rows[slot]] = f[F_STEP];
        return;
    }
    c[S_PREDICTED] = direction<R>(b, g, sm + R, c[S_MU], s[4], g + R);
    c[S_FOLD] = row_sum<R>(b) - sm[NSUM(R) - 2];
    c[S_ALPHA] = 1.0;
    c[S_FUNIT] = INFINITY;
    c[S_FNEW] = INFINITY;
    f[F_COUNT] = 1;
    f[F_SEARCHING] = 1;
    propose<R>(b, g, g + R, g + 2 * R, c, f, sm, s);
    atomicAdd(counters, 1ULL);
}

// a thread per heavy row: accept the trial point, or backtrack (counting rows still searching in counters[k])
template <int R>
__global__ void heavy_judge(double* __restrict__ B, const long long* __restrict__ rows, const long long n,
                            const double* __restrict__ s, long long* __restrict__ flags, double* __restrict__ sums,
                            double* __restrict__ vec, double* __restrict__ scal, long long* __restrict__ steps,
                            unsigned long long* __restrict__ counters, const int k) {
    const long long slot = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (slot >= n) return;
    long long* f = flags + slot * NF;
    if (!f[F_SEARCHING]) return;
    double* b = B + rows[slot] * R;
    double* sm = sums + slot * NSUM(R);
    double* g = vec + slot * 3 * R;
    double* c = scal + slot * NSC;
    c[S_FNEW] = f[F_EVALUATE] ? c[S_TOTAL] - sm[NSUM(R) - 1] : INFINITY;
    f[F_EVALUATE] = 0;
    if (accepted(c[S_FNEW], c[S_FOLD], c[S_DESCENT], c[S_FUNIT], f[F_COUNT], s)) {
        finish<R>(b, g + 2 * R, c, f, sm, s, steps, rows[slot]);
        return;
    }
    backtrack(c[S_ALPHA], f[F_COUNT], s);
    if (f[F_COUNT] > s[1]) { finish<R>(b, g + 2 * R, c, f, sm, s, steps, rows[slot]); return; }
    propose<R>(b, g, g + R, g + 2 * R, c, f, sm, s);
    atomicAdd(counters + k, 1ULL);
}
"""
CHUNK = 4 * THREADS  # nonzeros per block of the heavy rows' sums: several blocks per SM on the fullest rows
ROW_THREADS = 64  # heavy rows per block of the R-sized step kernels
FLAGS, SCALARS = 5, 8  # the source's NF and NSC
ACTIVE, MU = 0, 0  # the source's F_ACTIVE (a flag) and S_MU (a scalar)
# Heavy rows in lock-step cost little more than one heavy row, so the best switch is lower than paper [002]'s
# 2^14 (one heavy row at a time): a light row is one warp's serial work, and at 2^14 the longest light
# rows set the mode's time (the threshold study, EXPERIMENTS.md).
LOCKSTEP_THRESHOLD = 1 << 12
# Rows of at most SHORT_ROW nonzeros get a thread each: a warp per row leaves most lanes idle and repeats the
# R-sized step 32 times (lbnl's last mode, rows of about 2 nonzeros, is the case in point). Longer rows walked
# by one thread set the kernel's tail instead, and a mode's short rows that a warp each would run in one wave
# of the GPU gain nothing from their own launch (the short-row sweep, EXPERIMENTS.md).
SHORT_ROW = 8
HEAVY_KERNELS = ("heavy_sums", "heavy_trial_log", "heavy_begin", "heavy_judge")


@dataclass
class HeavyRows:
    """One mode's heavy rows: their indices (slots), and the blocks of their nonzeros (slot, lo, hi)."""

    rows: Any
    block_slot: Any
    block_lo: Any
    block_hi: Any

    @property
    def count(self) -> int:
        return int(self.rows.shape[0])

    @property
    def blocks(self) -> int:
        return int(self.block_slot.shape[0])


def heavy_blocks(starts: np.ndarray, heavy: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slot, lo, hi) of each block of ``chunk`` nonzeros of the rows ``heavy`` (row offsets ``starts``)."""
    lo, hi = starts[heavy], starts[heavy + 1]
    counts = -(-(hi - lo) // chunk)
    slot = np.repeat(np.arange(heavy.size, dtype=np.int32), counts)
    first = np.repeat(lo, counts) + chunk * (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    return slot, first.astype(np.int64), np.minimum(first + chunk, np.repeat(hi, counts)).astype(np.int64)


class LockstepHeavyRows:
    """The heavy rows' host loop, on whatever arrays ``to_device`` makes and whatever ``launch_stage`` runs
    (the GPU kernels here; the tests run the same source built for the host)."""

    threshold: int
    xp: Any
    _host_modes: list
    _modes: list
    _pi: Any
    to_device: Any  # the variant's
    to_host: Any

    def setup_heavy(self, problem) -> None:
        """Each mode's heavy rows and blocks, its light rows, and the per-row state of the largest."""
        rank = problem.rank
        self._host_settings = settings_vector(problem.settings)
        self._plans: list[HeavyRows | None] = []
        self._light: list[Any] = []
        most = 0
        for m in self._host_modes:
            lengths = m.lengths()
            heavy = np.flatnonzero(lengths > self.threshold)
            self._light.append(self.to_device(np.flatnonzero(lengths <= self.threshold).astype(np.int64)))
            if heavy.size == 0:
                self._plans.append(None)
                continue
            slot, lo, hi = heavy_blocks(np.asarray(m.starts), heavy, CHUNK)
            self._plans.append(HeavyRows(*(self.to_device(a) for a in (heavy.astype(np.int64), slot, lo, hi))))
            most = max(most, heavy.size)
        xp = self.xp
        self._flags = xp.zeros((most, FLAGS), dtype=xp.int64)
        self._scalars = xp.zeros((most, SCALARS))
        self._sums = xp.zeros((most, rank + rank * (rank + 1) // 2 + 2))
        self._vectors = xp.zeros((most, 3 * rank))
        self._counters = xp.zeros(1 + int(self._host_settings[MAX_BACKTRACK]), dtype=xp.uint64)
        self._device_settings = self.to_device(self._host_settings)

    def launch_stage(self, kernel: str, units: int, per_block: bool, args: tuple) -> None:
        """``kernel`` of the source over ``units`` blocks of CHUNK nonzeros (``per_block``) or ``units`` heavy rows."""
        raise NotImplementedError

    def solve_heavy(self, mode: int, b: Any, steps: Any) -> None:
        """Every heavy row of ``mode`` to convergence or the step cap, the stages launched in lock-step."""
        plan, s, xp = self._plans[mode], self._host_settings, self.xp
        if plan is None:
            return
        n, counters = plan.count, self._counters
        flags, scalars, sums, vectors = (a[:n] for a in (self._flags, self._scalars, self._sums, self._vectors))
        flags.fill(0)
        flags[:, ACTIVE] = 1
        scalars[:, MU] = s[MU0]
        sums.fill(0.0)
        values, settings = self._modes[mode].values, self._device_settings
        blocks = (plan.block_slot, plan.block_lo, plan.block_hi)
        stage = self.launch_stage
        for _ in range(int(s[MAX_INNER])):
            counters.fill(0)
            stage("heavy_sums", plan.blocks, True, (self._pi, values, *blocks, b, plan.rows, xp.float64(s[EPS_DIV]),
                                                    flags, sums))
            stage("heavy_begin", n, False, (b, plan.rows, xp.int64(n), settings, flags, sums, vectors, scalars, steps,
                                            counters))
            for k in range(1, int(s[MAX_BACKTRACK]) + 1):
                stage("heavy_trial_log", plan.blocks, True, (self._pi, values, *blocks, flags, vectors, sums))
                stage("heavy_judge", n, False, (b, plan.rows, xp.int64(n), settings, flags, sums, vectors, scalars,
                                                steps, counters, xp.int32(k)))
                counts = self.to_host(counters)
                if counts[0] == 0:  # every heavy row has converged
                    return
                if counts[k] == 0:
                    break


class CupyMulti(LockstepHeavyRows, CupySingle):
    name = "cupy-multi"
    family = "portable"
    description = ("CuPy: rows over the threshold by device-wide kernels in lock-step, the rest a warp (or, if "
                   "short, a thread) per row alongside (paper [002]'s multi-kernel)")

    def __init__(self, threshold: int = LOCKSTEP_THRESHOLD, short_row: int = SHORT_ROW,
                 short_rows_min: int | None = None) -> None:
        """``short_row``: rows of at most this many nonzeros get a thread each, where a mode has at least
        ``short_rows_min`` of them (None: as many as this GPU runs warps at once)."""
        super().__init__(threshold)
        self.short_row = int(short_row)
        self.short_rows_min = short_rows_min

    def prepare_solver(self, problem) -> None:
        super().prepare_solver(problem)
        self._heavy_kernels = {k: templated_kernel(SOURCE, k, problem.rank) for k in HEAVY_KERNELS}
        self.setup_heavy(problem)
        self._short, self._medium = [], []
        wave = self.short_rows_min
        if wave is None:
            threads = int(cupy().cuda.Device().attributes["MaxThreadsPerMultiProcessor"])
            wave = multiprocessors() * threads // 32
        for m, light in zip(self._host_modes, self._light):
            rows = cupy().asnumpy(light)
            short = m.lengths()[rows] <= self.short_row
            if np.count_nonzero(short) < wave:  # a warp each: all of them in one wave
                short[:] = False
            self._short.append(self.to_device(rows[short]))
            self._medium.append(self.to_device(rows[~short]))

    def launch_stage(self, kernel: str, units: int, per_block: bool, args: tuple) -> None:
        grid = units if per_block else -(-units // ROW_THREADS)
        self._heavy_kernels[kernel]((grid,), (THREADS if per_block else ROW_THREADS,), args)

    def solve_mode(self, mode: int, b: Any, steps: Any) -> None:
        if self._plans[mode] is None and not self._short[mode].shape[0]:  # nothing to run beside the warps
            self.solve_rows(mode, self._medium[mode], b, steps)
            return
        cp = cupy()
        main = cp.cuda.get_current_stream()
        ready, done = main.record(), []  # Π and B are ready
        for side, rows, lanes in zip(self._side_streams(), (self._medium[mode], self._short[mode]), (32, 1)):
            if rows.shape[0]:
                side.wait_event(ready)
                with side:
                    self.solve_rows(mode, rows, b, steps, lanes)
                done.append(side.record())
        self.solve_heavy(mode, b, steps)
        for event in done:
            main.wait_event(event)

    def _side_streams(self) -> tuple[Any, Any]:
        if not hasattr(self, "_sides"):
            self._sides = tuple(cupy().cuda.Stream(non_blocking=True) for _ in range(2))
        return self._sides
