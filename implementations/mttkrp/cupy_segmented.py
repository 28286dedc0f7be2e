"""GPU portable: the permuted, segmented algorithm: sorted nonzeros, sums in registers, few atomics.

**Arrangement** (once per mode, in ``arrange``): nonzeros sorted by output row and second
mode (``sorting.py``), cut into blocks of ``per_warp`` nonzeros per warp, each block split
evenly among its warps in whole warp steps (a slice's tail is padded with zero-valued copies
of a real nonzero, so the kernel has no bounds checks). Blocks launch longest first, and the
last wave's are cut in ``TAIL_PARTS``, so that no block runs alone at the end
(``block_table``; measured in EXPERIMENTS.md).

**Kernel.** A warp holds S = 32 / L *slots* of L lanes; lane c of a slot owns VEC adjacent
columns (VEC = 2 for even R: 16-byte factor loads), so L = R / VEC (at most 32; wider ranks
take K column chunks per lane). Each step the S slots take ``batch`` consecutive nonzeros
each, S x batch consecutive nonzeros per warp, whose indices and values arrive in vector loads
shared by the slot's lanes (evict-first, each miss fetching 256 bytes into L2); a slot
multiplies the factor rows into register sums while the output row stays the same and flushes
a sum with atomics when it changes. The next step's indices are loaded before this step's
factor rows are used, so the two latencies overlap. N, R, the batch and the block size
(``threads``) are template parameters: no dynamic allocation, and ``__launch_bounds__`` caps
registers at 64 so that 32 warps fit per SM.

**Packed indices** (``pack``, on by default). In a 3-way tensor whose two other modes' indices
fit in 31 bits together, they are read as one int (``index_packing``): 16 bytes a nonzero instead
of 20.

**Flagged rows** (``flag_rows``: "auto", "always" or "never"). Where output rows are long, the
output row is not read per nonzero: the sign bit of the first other-index word (the packed word,
or position 1's index) flags a nonzero whose row may differ from that of the slot's previous
nonzero (``row_flags``), and only a flagged nonzero reads its row. 12 bytes a nonzero on a packed
3-way tensor. "auto" flags where row pieces average at least ``FLAG_MIN_RUN`` nonzeros: on short
rows each flag's row read would stall the slot.

**Staging** (``stage``: "auto", "none" or "always"). When few nonzeros share a (row, second
index) pair (under ``REUSE_LIMIT``), every nonzero gathers N - 1 factor rows from L2, and L2
bandwidth limits the kernel. "auto" then stages the largest other factor U_s: nonzeros are
sorted by slices of mode s first (``sorting.py``), each block copies its slice of U_s into
shared memory and reads it there, halving a 3-way tensor's L2 gathers. Shared memory is
taken from the L1 cache, so "auto" stages only when no other factor would fit in L1
anyway, and only when slices leave at least ``MIN_PIECE`` nonzeros per (slice, output
row). A slice holds ``slice_rows`` factor rows (0: ``default_slice_rows``). With wide rows
(``WIDE_ROW_BYTES``: R >= 32) "auto" stages wherever slices leave ``MIN_PIECE`` nonzeros, long
fibers or not: a 256-byte row gathered from L2 costs more than the L1 that staging takes
(EXPERIMENTS.md). A 3-way tensor with wide rows also takes ``WIDE_BATCH`` nonzeros per
slot and step instead of ``BATCH`` (``batch=0``, the default; ``batch_size``).

**Second-mode slices** (``slice_second``: "auto", "none" or "always"). Where fibers are long and
nothing is staged, the nonzeros are sorted by slices of ``SECOND_SLICE_BYTES`` of the second
mode's factor first, then by row and second index: fibers stay whole, and the warps of an SM,
working through nearby nonzeros, find the slice's rows in L1 at each fiber's start instead of
fetching them from L2. The price is one row piece (and its atomics) per (slice, row). "auto"
slices where a fiber holds ``REUSE_LIMIT`` nonzeros or more on average, the second factor would
not fit in L1 whole, and a (slice, row) piece keeps ``MIN_PIECE`` nonzeros or more (EXPERIMENTS.md).

**Narrow values** (``value_type``: "auto", "uint8", "float32" or "float64"). The values are read
in the narrowest type that holds every one exactly (``value_storage``; count tensors: one byte up to
255) and multiplied as doubles, so the output does not change: fewer bytes a nonzero (EXPERIMENTS.md).

**Slice copies** (``slice_copy``: "auto", "async" or "plain"). A block copies its staged slice with
``cp.async`` (sm_80 and later: a thread's copies all in flight at once) or with a plain loop, which
waits for each load in turn. "auto" copies asynchronously on 3-way tensors (``async_copy``), where
it measured faster, and not on the 4-way stand-ins, where it did not (EXPERIMENTS.md).

Why this shape, with the measurements and what did not help: this folder's EXPERIMENTS.md.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..gpu import STREAMED_LOADS, allow_shared_memory, cupy, launchable, multiprocessors, templated_kernel
from ..model import PortabenchError
from ..tensor_inputs import UpToMaxOrder, factor_arguments
from .sorting import row_pairs, second_mode, sorted_tensor
from .variant import CupyMttkrpVariant, TensorArrays

SOURCE = STREAMED_LOADS + r"""
template <int VEC> struct Row;
template <> struct Row<1> {
    double v[1];
    __device__ static Row load(const double* p) { Row r; r.v[0] = *p; return r; }
};
template <> struct Row<2> {
    double v[2];
    __device__ static Row load(const double* p) {
        const double2 t = *reinterpret_cast<const double2*>(p);
        Row r; r.v[0] = t.x; r.v[1] = t.y; return r;
    }
};

// The index and value streams are read through pb_load_streamed: each step reads few contiguous bytes
// of them (EXPERIMENTS.md).
// B consecutive ints / doubles from p, in vector loads where B allows (p aligned to B elements).
template <int B> __device__ __forceinline__ void load_ints(const int* p, int* o) {
    if (B % 4 == 0) {
#pragma unroll
        for (int b = 0; b < B; b += 4) {
            const int4 t = pb_load_streamed(reinterpret_cast<const int4*>(p + b));
            o[b] = t.x; o[b + 1] = t.y; o[b + 2] = t.z; o[b + 3] = t.w;
        }
    } else if (B % 2 == 0) {
#pragma unroll
        for (int b = 0; b < B; b += 2) {
            const int2 t = pb_load_streamed(reinterpret_cast<const int2*>(p + b));
            o[b] = t.x; o[b + 1] = t.y;
        }
    } else {
#pragma unroll
        for (int b = 0; b < B; ++b) o[b] = p[b];
    }
}
// B consecutive values from p as doubles; VB: the bytes a value is stored in (8: double, 4: float, 1:
// unsigned char; narrower only where every value converts exactly: ``value_storage``).
template <int VB> struct Value { typedef double type; };
template <> struct Value<4> { typedef float type; };
template <> struct Value<1> { typedef unsigned char type; };
template <int B, int VB> __device__ __forceinline__ void load_values(const typename Value<VB>::type* p, double* o) {
    if (VB == 8 && B % 2 == 0) {
#pragma unroll
        for (int b = 0; b < B; b += 2) {
            const double2 t = pb_load_streamed(reinterpret_cast<const double2*>(p + b));
            o[b] = t.x; o[b + 1] = t.y;
        }
    } else if (VB == 4 && B % 4 == 0) {
#pragma unroll
        for (int b = 0; b < B; b += 4) {
            const float4 t = pb_load_streamed(reinterpret_cast<const float4*>(p + b));
            o[b] = t.x; o[b + 1] = t.y; o[b + 2] = t.z; o[b + 3] = t.w;
        }
    } else if (VB == 4 && B % 2 == 0) {
#pragma unroll
        for (int b = 0; b < B; b += 2) {
            const float2 t = pb_load_streamed(reinterpret_cast<const float2*>(p + b));
            o[b] = t.x; o[b + 1] = t.y;
        }
    } else if (VB == 1 && B % 2 == 0) {
#pragma unroll
        for (int b = 0; b < B; b += 2) {
            const unsigned short t = pb_load_streamed(reinterpret_cast<const unsigned short*>(p + b));
            o[b] = t & 0xff; o[b + 1] = t >> 8;
        }
    } else {
#pragma unroll
        for (int b = 0; b < B; ++b) o[b] = p[b];
    }
}

// The indices of B consecutive nonzeros at j, by position. Position 0 is the output row, or with
// FL = 1 its flag: the row is not read, and the sign bit of the word at `first` (the packed word, or
// position 1's index) says the row may have changed. PK = 1 (3-way): positions 1 and 2 share the word
// at `first`, position 1 in the bits above `shift`.
template <int N, int B, int PK, int FL> struct Indices {
    __device__ static void load(const int* const* pos, const int* first, int shift, long long j, int (*ind)[B]) {
        int word[B];
        if (PK || FL) load_ints<B>(first + j, word);
        if (!FL) load_ints<B>(pos[0] + j, ind[0]);
#pragma unroll
        for (int b = 0; b < B; ++b) {
            if (!(PK || FL)) break;
            const int w = word[b] & 0x7fffffff;
            if (FL) ind[0][b] = word[b] < 0;
            if (PK) {
                ind[1][b] = w >> shift;
                ind[2][b] = w & ((1 << shift) - 1);
            } else {
                ind[1][b] = w;
            }
        }
#pragma unroll
        for (int q = PK ? 3 : (FL ? 2 : 1); q < N; ++q) load_ints<B>(pos[q] + j, ind[q]);
    }
};

// Copies n doubles from src to the shared dst, the block's threads striding (VEC = 2: n even, both 16-byte
// aligned). AC = 1, where cp.async exists (sm_80 and later): every copy of a thread goes in flight at once,
// without registers, and wait_for_copies() waits for them; else each load is waited for in turn.
// blockDim.x, not T, strides the copy: with the stride a constant, the plain loop compiled to code that
// made the whole kernel slower (EXPERIMENTS.md).
template <int VEC, int AC> __device__ __forceinline__ void copy_to_shared(double* dst, const double* src, int n) {
#if PB_PTX_SM80
    if (AC) {
        const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
        for (int t = threadIdx.x; t < n / VEC; t += blockDim.x) {
            if (VEC == 2)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(to + 16 * t), "l"(src + 2 * t) : "memory");
            else
                asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" :: "r"(to + 8 * t), "l"(src + t) : "memory");
        }
        return;
    }
#endif
    for (int t = threadIdx.x; t < n; t += blockDim.x) dst[t] = src[t];
}
template <int AC> __device__ __forceinline__ void wait_for_copies() {
#if PB_PTX_SM80
    if (AC) asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

__device__ __forceinline__ const double* pick(const double* u0, const double* u1, const double* u2,
                                              const double* u3, const double* u4, int m) {
    return m == 0 ? u0 : m == 1 ? u1 : m == 2 ? u2 : m == 3 ? u3 : u4;
}

// Position 0 is the output mode, positions 1..N-1 the other modes in order. SQ > 0: the factor
// at position SQ is read from the block's slice in shared memory (rows lo .. lo + slice_rows - 1), copied
// there asynchronously with AC = 1.
template <int N, int R, int B, int VEC, int L, int K, int SQ, int T, int PK, int FL, int VB, int AC>
__global__ void __launch_bounds__(T, (1024 / (T * K)) > 0 ? 1024 / (T * K) : 1)
mttkrp_segmented(const int* __restrict__ idx, const typename Value<VB>::type* __restrict__ values,
                 const double* __restrict__ u0, const double* __restrict__ u1,
                 const double* __restrict__ u2, const double* __restrict__ u3,
                 const double* __restrict__ u4, double* __restrict__ out,
                 const long long nnz, const int mode, const long long* __restrict__ block_range,
                 const int* __restrict__ block_slice,
                 const int staged, const int slice_rows, const int staged_dim,
                 const int* __restrict__ first, const int shift)
{
    extern __shared__ double slice[];
    constexpr int S = 32 / L;                // slots (nonzeros side by side) per warp
    constexpr int Q = S * B;                 // nonzeros per warp step
    constexpr bool FULL = K * L * VEC == R;  // every lane's columns exist
    const long long bstart = block_range[2 * blockIdx.x], bstop = block_range[2 * blockIdx.x + 1];
    int lo = 0;
    if (SQ > 0) {
        lo = block_slice[blockIdx.x] * slice_rows;
        copy_to_shared<VEC, AC>(slice, pick(u0, u1, u2, u3, u4, staged) + (long long)lo * R,
                                min(slice_rows, staged_dim - lo) * R);
        wait_for_copies<AC>();
        __syncthreads();
    }
    const int lane = threadIdx.x % 32, slot = lane / L, cl = lane % L;
    if (slot >= S) return;
    // The block's nonzeros split evenly among its warps, in whole steps (warp_run).
    const long long run = (bstop - bstart + (T / 32) * Q - 1) / ((T / 32) * Q) * Q;
    const long long wstart = bstart + (long long)(threadIdx.x / 32) * run;
    if (wstart >= bstop) return;
    const long long wstop = min(wstart + run, bstop);
    const int* pos_idx[N];
    const double* pos_u[N];
#pragma unroll
    for (int q = 0; q < N; ++q) {
        const int m = q == 0 ? mode : (q - 1 < mode ? q - 1 : q);
        pos_idx[q] = idx + (long long)m * nnz;
        pos_u[q] = pick(u0, u1, u2, u3, u4, m);
    }
    int row = pos_idx[0][wstart + slot * B];
    double acc[K][VEC];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[k][v] = 0.0;
    int ind[N][B];
    double x[B];
    Indices<N, B, PK, FL>::load(pos_idx, first, shift, wstart + slot * B, ind);
    load_values<B, VB>(values + wstart + slot * B, x);
    for (long long j0 = wstart; j0 < wstop; j0 += Q) {
        Row<VEC> f[N][B][K];  // every factor load of the step is issued before any is used
#pragma unroll
        for (int q = 1; q < N; ++q)
#pragma unroll
            for (int b = 0; b < B; ++b) {
                const double* base = q == SQ ? slice + (ind[q][b] - lo) * R : pos_u[q] + (long long)ind[q][b] * R;
#pragma unroll
                for (int k = 0; k < K; ++k) {
                    const int c = (cl + k * L) * VEC;
                    if (FULL || c < R) f[q][b][k] = Row<VEC>::load(base + c);
                }
            }
        // The next step's indices (the last step re-reads its own), in flight during this one.
        const long long jn = min(j0 + Q, wstop - Q) + slot * B;
        int next[N][B];
        double xn[B];
        Indices<N, B, PK, FL>::load(pos_idx, first, shift, jn, next);
        load_values<B, VB>(values + jn, xn);
#pragma unroll
        for (int b = 0; b < B; ++b) {
            // A flagged nonzero reads its row; an unflagged one has the slot's current row.
            const int r = !FL ? ind[0][b] : ind[0][b] ? pos_idx[0][j0 + slot * B + b] : row;
            if (r != row) {
#pragma unroll
                for (int k = 0; k < K; ++k) {
                    const int c = (cl + k * L) * VEC;
#pragma unroll
                    for (int v = 0; v < VEC; ++v) {
                        if (FULL || c < R) atomicAdd(&out[(long long)row * R + c + v], acc[k][v]);
                        acc[k][v] = 0.0;
                    }
                }
                row = r;
            }
#pragma unroll
            for (int k = 0; k < K; ++k)
#pragma unroll
                for (int v = 0; v < VEC; ++v) {
                    double t = x[b];
#pragma unroll
                    for (int q = 1; q < N; ++q) t *= f[q][b][k].v[v];
                    acc[k][v] += t;
                }
        }
#pragma unroll
        for (int q = 0; q < N; ++q)
#pragma unroll
            for (int b = 0; b < B; ++b) ind[q][b] = next[q][b];
#pragma unroll
        for (int b = 0; b < B; ++b) x[b] = xn[b];
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int c = (cl + k * L) * VEC;
#pragma unroll
        for (int v = 0; v < VEC; ++v)
            if (FULL || c < R) atomicAdd(&out[(long long)row * R + c + v], acc[k][v]);
    }
}
"""

THREADS = 512
PER_WARP = 1024
BATCH = 2
WIDE_BATCH = 3  # nonzeros per slot and step on a 3-way tensor with wide rows (4- and 5-way ones would spill)
WIDE_ROW_BYTES = 256  # a factor row this wide (R = 32 in float64) or wider is a "wide row"
REUSE_LIMIT = 2.0  # stage a factor when fewer nonzeros than this share a (row, second index) pair
MIN_PIECE = 8  # ... unless slicing leaves fewer nonzeros than this per (slice, output row)
WARPS_PER_SM = 32  # what the kernel's register cap (64 per thread) lets fit: slices leave room for them
STAGE_CHOICES = ("auto", "none", "always")
FLAG_CHOICES = ("auto", "always", "never")
SECOND_SLICE_BYTES = 32 * 1024  # a second-mode slice's factor rows (a flat optimum: EXPERIMENTS.md)
FLAG_MIN_RUN = 256  # "auto" flags rows where row pieces average this many nonzeros (EXPERIMENTS.md)
SIGN_BIT = -(2**31)  # an int32's sign bit: the row flag
VALUE_TYPES = ("uint8", "float32", "float64")  # the value types the kernel reads, narrowest first
VALUE_CHOICES = ("auto", *VALUE_TYPES)
COPY_CHOICES = ("auto", "async", "plain")
ASYNC_COPY_ORDERS = (3,)  # "auto" copies slices asynchronously on tensors of these orders
TAIL_PARTS = 4  # the last wave's blocks are cut in this many, so that no block runs alone at the end


def lane_shape(rank: int) -> tuple[int, int, int]:
    """(VEC, L, K): doubles per factor load, lanes per nonzero, column chunks per lane."""
    vec = 2 if rank % 2 == 0 else 1
    lanes = min(32, rank // vec)
    return vec, lanes, -(-rank // (vec * lanes))


def wide_rows(rank: int) -> bool:
    """Whether a float64 factor row of ``rank`` columns is ``WIDE_ROW_BYTES`` or wider."""
    return rank * 8 >= WIDE_ROW_BYTES


def batch_size(order: int, rank: int, setting: int = 0) -> int:
    """Nonzeros per slot and warp step: ``setting``, or for 0 ``WIDE_BATCH`` on a 3-way tensor with
    wide rows, else ``BATCH``."""
    return setting or (WIDE_BATCH if order == 3 and wide_rows(rank) else BATCH)


def async_copy(order: int, setting: str = "auto") -> bool:
    """Whether staged slices are copied with ``cp.async``: ``setting``, or for "auto" on a tensor whose
    order is in ``ASYNC_COPY_ORDERS``."""
    return setting == "async" or (setting == "auto" and order in ASYNC_COPY_ORDERS)


def choose_staging(dims: tuple[int, ...], mode: int, rank: int, nnz: int, pairs: int, rows: int,
                   cache_bytes: int, stage: str = "auto") -> tuple[int, int] | None:
    """(staged mode, rows per slice) or None, for a tensor whose nonzeros form ``pairs`` distinct
    (row, second index) pairs (not looked at for wide rows), slices of ``rows`` factor rows (0: none
    fit in shared memory) and ``cache_bytes`` of on-chip memory per SM that staging takes from the L1
    cache. ``stage``: "auto" (the rule above), "always" (the largest other factor) or "none"."""
    others = [m for m in range(len(dims)) if m != mode]
    if stage == "none" or rows < 1 or not others:
        return None
    staged = max(others, key=lambda m: (dims[m], -m))
    if stage == "always":
        return staged, rows
    slices = -(-dims[staged] // rows)
    if nnz < MIN_PIECE * slices * dims[mode]:
        return None
    if wide_rows(rank):
        return staged, rows
    if nnz >= REUSE_LIMIT * pairs or any(dims[m] * rank * 8 <= cache_bytes for m in others if m != staged):
        return None
    return staged, rows


def choose_second_slices(dims: tuple[int, ...], mode: int, rank: int, nnz: int, pairs: int, cache_bytes: int,
                         setting: str = "auto") -> tuple[int, int] | None:
    """(second mode, rows per slice) or None, for a tensor that is not staged, whose nonzeros form
    ``pairs`` distinct (row, second index) pairs, on an SM with ``cache_bytes`` of L1 cache.
    ``setting``: "auto" (the rule in the module's docstring), "always" or "none"."""
    if setting == "none" or len(dims) < 2:
        return None
    second = second_mode(dims, mode)
    rows = max(1, SECOND_SLICE_BYTES // (8 * rank))
    slices = -(-dims[second] // rows)
    if setting == "always":
        return second, rows
    if (nnz < REUSE_LIMIT * pairs or dims[second] * rank * 8 <= cache_bytes
            or nnz < MIN_PIECE * slices * dims[mode]):
        return None
    return second, rows


@functools.cache
def shared_memory() -> tuple[int, int]:
    """(bytes per SM, largest bytes per block) of shared memory on the current device."""
    cp = cupy()
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    per_block = int(props.get("sharedMemPerBlockOptin") or props.get("sharedMemPerBlock", 48 * 1024))
    per_sm = int(props.get("sharedMemPerMultiprocessor") or per_block)
    return per_sm, per_block


def slice_bytes(plan: tuple[int, int] | None, dims: tuple[int, ...], rank: int) -> int:
    """The shared memory a block's staged slice takes, for a staging ``plan`` (``choose_staging``)."""
    return min(plan[1], dims[plan[0]]) * rank * 8 if plan else 0


def default_slice_rows(rank: int, threads: int) -> int:
    """Factor rows per shared-memory slice: the blocks that WARPS_PER_SM warps make take half of an
    SM's shared memory, and the rest stays L1 cache for the other factors (0: no row fits)."""
    per_sm, per_block = shared_memory()
    blocks = max(1, WARPS_PER_SM * 32 // threads)
    return max(0, min(per_block, per_sm // 2 // blocks - 1024) // (8 * rank))


def index_packing(dims: tuple[int, ...], mode: int) -> int | None:
    """The shift that packs a 3-way tensor's two other indices into one non-negative int32 (the
    first other mode above it, the second below), or None (another order, or too many bits)."""
    if len(dims) != 3:
        return None
    high, low = (m for m in range(3) if m != mode)
    shift = (dims[low] - 1).bit_length()
    return shift if (dims[high] - 1).bit_length() + shift <= 31 else None


def value_storage(xp: Any, values: Any, setting: str = "auto") -> str:
    """The type the kernel reads ``values`` in: ``setting``, or with "auto" the narrowest of
    ``VALUE_TYPES`` that holds every value exactly (counts: uint8 up to 255, float32 up to 2**24)."""
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    for name in VALUE_TYPES if setting == "auto" else (setting,):
        limits = np.iinfo(name) if name == "uint8" else np.finfo(name)
        if name == "float64" or (limits.min <= low and high <= limits.max  # in range first: no overflow in the cast
                                 and bool(xp.array_equal(values.astype(name).astype(xp.float64), values))):
            return name
    raise PortabenchError(f"{MttkrpCupySegmented.name}: value_type {setting!r} does not hold every value exactly; "
                          f"use 'auto' or 'float64'")


def warp_run(nonzeros: Any, warps: int, step: int) -> Any:
    """Nonzeros per warp in a block of ``nonzeros`` (whole steps of ``step``): the kernel splits a block
    evenly among its ``warps``, the last warp taking what is left."""
    return -(-nonzeros // (warps * step)) * step


def row_flags(xp: Any, rows: Any, block_range: np.ndarray, warps: int, step: int, batch: int) -> Any:
    """True for each nonzero whose output row may differ from that of its slot's previous nonzero (the
    one before it in its batch, else the slot's last one a warp step earlier), and for every nonzero of
    a warp's first step; ``rows``: the padded output rows, in blocks of ``warps`` warps as ``block_table``
    lays them out (every block starts at a multiple of ``step``)."""
    e = xp.arange(rows.size, dtype=xp.int64)
    prev = xp.where(e % batch != 0, e - 1, e - step + batch - 1)
    by_start = block_range[np.argsort(block_range[:, 0])]
    starts = xp.asarray(by_start[:, 0])
    runs = xp.asarray(warp_run(by_start[:, 1] - by_start[:, 0], warps, step))
    block_of = xp.searchsorted(starts, e, side="right") - 1
    first_step = (e - starts[block_of]) % runs[block_of] < step
    return first_step | (rows != rows[xp.maximum(prev, 0)])


def padded_runs(xp: Any, ordered: TensorArrays, slice_of: Any, nslices: int,
                step: int) -> tuple[TensorArrays, np.ndarray]:
    """The tensor with each slice's nonzeros (contiguous in ``ordered``; ``slice_of``: each one's
    slice) padded to a multiple of ``step`` with zero-valued copies of the slice's last nonzero,
    which add nothing to its last row; and the padded nonzeros per slice (``xp``: numpy or cupy)."""
    to_host = getattr(xp, "asnumpy", np.asarray)
    counts = np.asarray(to_host(xp.bincount(slice_of, minlength=nslices)), dtype=np.int64)
    padded = -(-counts // step) * step
    extra = padded - counts
    shift = (np.cumsum(padded) - padded) - (np.cumsum(counts) - counts)  # where each slice moves
    dest = xp.arange(ordered.nnz, dtype=xp.int64) + xp.asarray(shift)[slice_of]
    pad_at = xp.asarray(np.repeat(np.cumsum(padded) - extra, extra)
                        + np.arange(extra.sum()) - np.repeat(np.cumsum(extra) - extra, extra))
    pad_from = xp.asarray(np.repeat(np.cumsum(counts) - 1, extra))
    idx = xp.empty((ordered.order, int(padded.sum())), dtype=xp.int32)
    values = xp.zeros(int(padded.sum()), dtype=xp.float64)
    for m in range(ordered.order):
        idx[m, dest] = ordered.idx[m]
        idx[m, pad_at] = ordered.idx[m, pad_from]
    values[dest] = ordered.values
    return TensorArrays(idx, values, ordered.dims), padded


def block_table(padded: np.ndarray, per_block: int, resident: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """(each block's first nonzero and the one past its last, shape (blocks, 2); each block's slice), in
    launch order: blocks of ``per_block`` nonzeros within one slice each (slices laid end to end; a slice's
    last block may be short), whole blocks first, then the shorter ones, longest first. Where there are
    more blocks than ``resident`` (what the GPU runs at once), the last ``resident`` are each cut into
    ``TAIL_PARTS`` pieces of whole steps (fewer where a block has fewer steps): the blocks that start last
    then end soon after the others, instead of running alone."""
    blocks = -(-padded // per_block)
    within = np.arange(blocks.sum()) - np.repeat(np.cumsum(blocks) - blocks, blocks)
    first = np.repeat(np.cumsum(padded) - padded, blocks) + within * per_block
    last = np.minimum(first + per_block, np.repeat(np.cumsum(padded), blocks))
    slice_of = np.repeat(np.arange(padded.size, dtype=np.int32), blocks)
    order = np.argsort(first - last, kind="stable")
    first, last, slice_of = first[order], last[order], slice_of[order]
    tail = first.size - resident if first.size > resident else first.size
    cuts = first[tail:, None] + (last - first)[tail:, None] * np.arange(TAIL_PARTS + 1) // TAIL_PARTS // step * step
    pieces = cuts[:, 1:] > cuts[:, :-1]
    ranges = np.concatenate([np.stack([first[:tail], last[:tail]], axis=1),
                             np.stack([cuts[:, :-1][pieces], cuts[:, 1:][pieces]], axis=1)])
    slices = np.concatenate([slice_of[:tail], np.repeat(slice_of[tail:], pieces.sum(axis=1))])
    return ranges.astype(np.int64), slices.astype(np.int32)


def resident_blocks(threads: int, chunks: int, shared_bytes: int) -> int:
    """Blocks of ``threads`` that the current GPU holds at once: as many as the kernel's register cap
    (``__launch_bounds__``) and ``shared_bytes`` of shared memory a block allow on each SM."""
    shared_per_sm, _ = shared_memory()
    blocks_per_sm = max(1, WARPS_PER_SM * 32 // (threads * chunks))
    if shared_bytes:  # 1 KiB a block the runtime keeps
        blocks_per_sm = max(1, min(blocks_per_sm, shared_per_sm // (shared_bytes + 1024)))
    return blocks_per_sm * multiprocessors()


class MttkrpCupySegmented(UpToMaxOrder, CupyMttkrpVariant):
    name = "cupy-segmented"
    family = "portable"
    description = ("CuPy RawModule: warps of R/2-lane slots over runs of row-sorted nonzeros, vector loads, "
                   "register sums, one atomic per row piece; a low-reuse factor staged in shared memory, or long "
                   "fibers sorted by slices of the second factor; "
                   "a 3-way tensor's two other indices packed in one int, output rows read only where flagged")

    def __init__(self, threads: int = THREADS, per_warp: int = PER_WARP, batch: int = 0,
                 stage: str = "auto", slice_rows: int = 0, pack: bool = True, flag_rows: str = "auto",
                 slice_second: str = "auto", value_type: str = "auto", slice_copy: str = "auto") -> None:
        self.threads, self.per_warp, self.batch = int(threads), int(per_warp), int(batch)
        self.stage, self.slice_rows, self.pack = str(stage), int(slice_rows), bool(pack)
        self.flag_rows, self.slice_second, self.value_type = str(flag_rows), str(slice_second), str(value_type)
        self.slice_copy = str(slice_copy)
        if self.threads % 32 or not 32 <= self.threads <= 1024 or self.per_warp < 1 or not 0 <= self.batch <= 8:
            raise PortabenchError(f"{self.name}: threads must be a multiple of 32 up to 1024, per_warp positive and "
                                  f"batch in 0..8 (0: batch_size's rule), got {threads}, {per_warp}, {batch}")
        if self.stage not in STAGE_CHOICES or self.slice_rows < 0:
            raise PortabenchError(f"{self.name}: stage must be one of {', '.join(STAGE_CHOICES)} and slice_rows "
                                  f">= 0 (0: as shared memory allows), got {stage!r}, {slice_rows}")
        if self.flag_rows not in FLAG_CHOICES:
            raise PortabenchError(f"{self.name}: flag_rows must be one of {', '.join(FLAG_CHOICES)}, got {flag_rows!r}")
        if self.slice_second not in STAGE_CHOICES:
            raise PortabenchError(f"{self.name}: slice_second must be one of {', '.join(STAGE_CHOICES)}, "
                                  f"got {slice_second!r}")
        if self.value_type not in VALUE_CHOICES:
            raise PortabenchError(f"{self.name}: value_type must be one of {', '.join(VALUE_CHOICES)}, "
                                  f"got {value_type!r}")
        if self.slice_copy not in COPY_CHOICES:
            raise PortabenchError(f"{self.name}: slice_copy must be one of {', '.join(COPY_CHOICES)}, "
                                  f"got {slice_copy!r}")

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> dict[str, Any]:
        cp = cupy()
        vec, lanes, chunks = lane_shape(rank)
        batch = batch_size(tensor.order, rank, self.batch)
        step = 32 // lanes * batch  # nonzeros per warp step
        per_warp = -(-self.per_warp // step) * step
        # "auto" counts the (row, second index) pairs in the order it will likely use (by second-mode slices
        # where all but the pairs allow them: that order keeps each pair's nonzeros together), and sorts
        # again only if it chooses another. Wide rows are staged without counting them (only second slices look).
        cache = shared_memory()[0]
        rows = self.slice_rows or default_slice_rows(rank, self.threads)
        wide = wide_rows(rank)
        plan = choose_staging(tensor.dims, mode, rank, tensor.nnz, 0, rows, cache, self.stage) if wide else None
        probe = plan or choose_second_slices(tensor.dims, mode, rank, tensor.nnz, 0, cache, self.slice_second)
        count = plan is None and (self.slice_second == "auto" or (self.stage == "auto" and not wide))
        ordered = sorted_tensor(cp, tensor, mode, probe)[0] if count else None
        pairs = row_pairs(cp, ordered, mode) if count else 0
        if not wide:
            plan = choose_staging(tensor.dims, mode, rank, tensor.nnz, pairs, rows, cache, self.stage)
        slices = plan or choose_second_slices(tensor.dims, mode, rank, tensor.nnz, pairs, cache, self.slice_second)
        if ordered is None or slices != probe:
            ordered, _ = sorted_tensor(cp, tensor, mode, slices)
        if slices is not None:
            slice_of, nslices = ordered.idx[slices[0]] // slices[1], -(-tensor.dims[slices[0]] // slices[1])
        else:
            slice_of, nslices = cp.zeros(tensor.nnz, dtype=cp.int32), 1
        padded, counts = padded_runs(cp, ordered, slice_of, nslices, step)
        warps = self.threads // 32
        resident = resident_blocks(self.threads, chunks, slice_bytes(plan, tensor.dims, rank))
        block_range, block_slice = block_table(counts, per_warp * warps, resident, step)
        shift = index_packing(tensor.dims, mode) if self.pack else None
        others = [padded.idx[m] for m in range(tensor.order) if m != mode]
        word = others[0] if shift is None else (others[0] << shift) | others[1]  # the first other-index word
        rows = padded.idx[mode]
        pieces = 1 + int(cp.count_nonzero(rows[1:] != rows[:-1])) if padded.nnz else 1
        flagged = self.flag_rows == "always" or (self.flag_rows == "auto" and padded.nnz >= FLAG_MIN_RUN * pieces)
        if flagged:
            flags = row_flags(cp, rows, block_range, warps, step, batch)
            word = cp.where(flags, word | cp.int32(SIGN_BIT), word).astype(cp.int32)
        first = word if flagged or shift is not None else None  # None: the kernel reads position 1's own index
        values = padded.values.astype(value_storage(cp, padded.values, self.value_type), copy=False)
        return {"tensor": TensorArrays(padded.idx, values, padded.dims), "mode": mode, "plan": plan,
                "slices": slices, "shape": (vec, lanes, chunks), "batch": batch,
                "block_range": cp.asarray(block_range), "block_slice": cp.asarray(block_slice),
                "first": first, "packed": shift is not None, "flagged": flagged, "shift": shift or 0}

    def bind(self, arranged: dict[str, Any], factors: list[Any], out: Any) -> Callable[[], Any]:
        cp = cupy()
        tensor, mode, plan = arranged["tensor"], arranged["mode"], arranged["plan"]
        rank = out.shape[1]
        staged, rows = plan if plan else (0, 0)
        position = 0 if plan is None else (staged + 1 if staged < mode else staged)
        kernel = templated_kernel(SOURCE, "mttkrp_segmented", tensor.order, rank, arranged["batch"], *arranged["shape"],
                                  position, self.threads, int(arranged["packed"]), int(arranged["flagged"]),
                                  tensor.values.itemsize, int(async_copy(tensor.order, self.slice_copy)))
        threads = launchable(kernel, self.threads, self.name)
        shared = slice_bytes(plan, tensor.dims, rank)
        allow_shared_memory(kernel, shared)
        blocks = int(arranged["block_slice"].size)
        args = (tensor.idx, tensor.values, *factor_arguments("mttkrp", factors), out, cp.int64(tensor.nnz),
                cp.int32(mode), arranged["block_range"], arranged["block_slice"],
                cp.int32(staged), cp.int32(rows), cp.int32(tensor.dims[staged]),
                tensor.idx if arranged["first"] is None else arranged["first"], cp.int32(arranged["shift"]))

        def call() -> None:
            out.fill(0.0)
            if blocks:
                kernel((blocks,), (threads,), args, shared_mem=shared)

        return call
