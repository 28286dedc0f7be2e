"""Inputs shared by the sparse tensor kernels (MTTKRP, CP-APR's Φ and Π): FROSTT stand-ins.

A tensor kernel's *case* is a FROSTT tensor's seeded stand-in (or a given tensor, case
``file``) and its *size* is the number of nonzeros asked for: the stand-in at scale
size / nnz (a tensor with fewer nonzeros than that runs at full size, scale 1).

Variants see a tensor as ``TensorArrays``: int32 indices stored mode by mode (``idx[m]``
is mode m's index of every nonzero: coalesced on GPUs, contiguous on CPUs) and float64
values, wherever the variant put them. ``gather_kr`` forms the Khatri-Rao rows of a range of
nonzeros with an array library's gathers (MTTKRP's library formulation, CP-APR's Π).
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from portabench.datasets import get_dataset
from portabench.datasets.tensors import SparseTensor
from portabench.datasets.tensors.store import stored_standin

from .model import Device, PortabenchError

CASES: tuple[str, ...] = ("chicago-crime-comm", "enron", "lbnl-network", "nell-2", "nips", "uber")
FILE_CASE = "file"  # the case of a problem on a given tensor (``portabench verify --tensor``)
MODES: tuple[str, ...] = ("0", "1", "2", "3", "4")  # up to order 5; the suite skips modes a tensor lacks
INDEX_BYTES = 4  # variants keep int32 indices
VALUE_BYTES = 8  # float64
INT32_MAX = np.iinfo(np.int32).max
UNIT_ROUNDOFF = 2.0**-53
# Nonzeros asked for. CPU: 8 M nonzeros of a 3-way tensor move 160 MB of indices and values, 5x a
# 32 MB L3 (the report calls a working set under 4x the cache "in cache"), and keep the library
# formulations near a second per run on 2 cores. GPU: nell-2 at full size (76.9 M).
DEFAULT_NNZ: dict[Device, int] = {"cpu": 8_000_000, "gpu": 76_879_419}
# The main comparison's tensor, every mode: the papers' largest 3-way one (full size on a GPU). A
# process per (mode, variant) costs a few seconds at that size, so the "datasets" study runs the other
# five stand-ins (lbnl's skew, the 4- and 5-way gathers), every mode, on request.
MAIN_CASES: tuple[str, ...] = ("nell-2",)
OTHER_CASES: tuple[str, ...] = tuple(c for c in CASES if c not in MAIN_CASES)
MAIN_MODES: tuple[str, ...] = ("0", "1", "2")
MIN_ORDER = 2  # a Khatri-Rao product needs another mode than the output's
# The fewest nonzeros asked for with which every stand-in can be built: with fewer, lbnl-network's five
# modes cannot be dealt their slice counts (tests/test_bad_inputs_cli.py checks the bound).
MIN_NNZ, MIN_NNZ_CASE = 14, "lbnl-network"


def full_shape(case: str) -> tuple[tuple[int, ...], int]:
    """(dims, nnz) of the real tensor ``case`` (published figures)."""
    facts = get_dataset(case).facts
    return tuple(facts["dims"]), int(facts["nnz"])


def order_of(case: str) -> int:
    return len(full_shape(case)[0])


def scale_for(case: str, nnz: int) -> float:
    """The stand-in scale giving ``nnz`` nonzeros (1 where the tensor has fewer)."""
    return min(1.0, nnz / full_shape(case)[1])


@functools.lru_cache(maxsize=1)  # one tensor at a time: at GPU sizes each takes gigabytes
def standin(case: str, nnz: int, seed: int) -> SparseTensor:
    """The seeded stand-in of ``case`` with (about) ``nnz`` nonzeros, read-only."""
    tensor = stored_standin(case, scale_for(case, nnz), seed)
    for a in (tensor.coords, tensor.values):
        a.setflags(write=False)
    return tensor


def check_nnz(kernel: str, size: int, cases: tuple[str, ...]) -> int:
    """``size`` (nonzeros asked for) if every stand-in of ``cases`` can be built at it: at least MIN_NNZ, and at
    most the largest one's full size (a larger size would build that tensor and be recorded as asked)."""
    largest = max(cases, key=lambda case: full_shape(case)[1])
    top = full_shape(largest)[1]
    if not MIN_NNZ <= size <= top:
        why = (f"at least {MIN_NNZ} nonzeros ({MIN_NNZ_CASE}'s stand-in cannot be built with fewer)" if size < MIN_NNZ
               else f"up to {largest}'s full size, the largest stand-in")
        raise PortabenchError(f"{kernel}: sizes are {MIN_NNZ}..{top} nonzeros, {why}; got {size}")
    return size


def check_order(kernel: str, order: int) -> int:
    """A given tensor's order if the tensor kernels take it (at least MIN_ORDER modes)."""
    if order < MIN_ORDER:
        raise PortabenchError(f"{kernel}: the tensor has {order} mode{'s' if order != 1 else ''}; the tensor kernels "
                              f"need at least {MIN_ORDER} modes")
    return order


def check_rank(kernel: str, rank: int | str, largest: int) -> int:
    """``rank`` as an integer in 1..largest, else a clear error naming ``kernel``."""
    try:
        value = int(rank)
    except (TypeError, ValueError):
        value = 0
    if not 1 <= value <= largest or str(rank).strip() != str(value):
        raise PortabenchError(f"{kernel}: the rank R must be an integer in 1..{largest}, got {rank!r}")
    return value


def check_mode(kernel: str, mode: int | str, order: int) -> int:
    """``mode`` as an integer in 0..order-1, else a clear error naming ``kernel``."""
    try:
        value = int(mode)
    except (TypeError, ValueError):
        value = -1
    if not 0 <= value < order or str(mode).strip() != str(value):
        raise PortabenchError(f"{kernel}: mode must be an integer in 0..{order - 1} for an order-{order} tensor, got {mode!r}")
    return value


@dataclass
class TensorArrays:
    """A tensor as the variants consume it: ``idx`` (N x nnz int32), ``values``, ``dims``."""

    idx: Any
    values: Any
    dims: tuple[int, ...]

    @property
    def order(self) -> int:
        return len(self.dims)

    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])


CONVERT_BLOCK = 1 << 20


def host_arrays(kernel: str, tensor: SparseTensor, count: int | None = None) -> TensorArrays:
    """``tensor`` (its first ``count`` nonzeros) as int32 mode-by-mode indices."""
    if max(tensor.dims) > INT32_MAX:
        raise PortabenchError(f"{kernel}: mode sizes up to {INT32_MAX} are supported (int32 indices), got {max(tensor.dims)}")
    coords, values = (tensor.coords, tensor.values) if count is None else (tensor.coords[:count], tensor.values[:count])
    idx = np.empty((coords.shape[1], coords.shape[0]), dtype=np.int32)

    def convert(start: int) -> None:  # a strided transpose: in blocks on every core (seconds at 77 M nonzeros)
        idx[:, start:start + CONVERT_BLOCK] = coords[start:start + CONVERT_BLOCK].T

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(convert, range(0, coords.shape[0], CONVERT_BLOCK)))
    return TensorArrays(idx, np.array(values, dtype=np.float64), tensor.dims)


def gather_kr(xp: Any, factors: list[Any], idx: Any, mode: int, start: int, stop: int,
              out: Any, tmp: Any) -> Any:
    """The Khatri-Rao rows prod_{m != mode} U_m(i_m, :) of nonzeros start..stop-1, written
    into ``out`` (rows >= stop - start) with ``tmp`` as scratch, by the array library ``xp``."""
    count = stop - start
    kr, scratch = out[:count], tmp[:count]
    others = [m for m in range(len(factors)) if m != mode]
    xp.take(factors[others[0]], idx[others[0], start:stop], axis=0, out=kr)
    for m in others[1:]:
        xp.take(factors[m], idx[m, start:stop], axis=0, out=scratch)
        xp.multiply(kr, scratch, out=kr)
    return kr


MAX_ORDER = 5  # the GPU tensor kernels take one factor pointer per mode, up to this many


def order_unsupported(order: int, largest: int = MAX_ORDER) -> str | None:
    """A variant's ``supports`` reason for a tensor of ``order`` modes where it takes ``largest`` at most."""
    return f"tensors of order up to {largest}, this one has order {order}" if order > largest else None


class UpToMaxOrder:
    """Mixed into a tensor variant whose kernels take MAX_ORDER factors at most: it skips larger orders."""

    def supports(self, problem: Any) -> str | None:
        return order_unsupported(problem.order) or super().supports(problem)  # type: ignore[misc]


def factor_arguments(kernel: str, factors: list[Any]) -> tuple[Any, ...]:
    """A GPU tensor kernel's five factor pointers: the factors, then the first repeated (never read)."""
    if len(factors) > MAX_ORDER:
        raise PortabenchError(f"{kernel} GPU kernels take tensors of order up to {MAX_ORDER}, got {len(factors)}")
    return tuple(factors) + (factors[0],) * (MAX_ORDER - len(factors))
