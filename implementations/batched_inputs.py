"""Inputs shared by the batched kernels (batched SpMV, batched GMRES): N small systems on one pattern.

A batched kernel's *case* is a ``batched`` dataset of the registry and its *size* is N, the
number of systems: the PeleLM stand-ins (``gri30``, ``isooctane``) at N systems, or Kokkos
Kernels' shipped example (``kk-batched``, 96 systems) tiled to N. The paper's figures use
N = 51200 (``portabench run --size KERNEL=N[,N]`` chooses others).
"""

from __future__ import annotations

import functools

import numpy as np

from portabench.datasets import load
from portabench.datasets.batched import BatchedSystems
from portabench.datasets.batched.pele import MECHANISMS, SEED_N, tiled
from portabench.datasets.stored import package_sources, stored_arrays

from .model import Device, PortabenchError

CASES = ("gri30", "isooctane", "kk-batched")
BENCHMARK_CASES = ("gri30", "isooctane")  # the paper's two mechanisms
# The benchmark N per device (the paper's figures use 51200), and the small N of the batch-size study.
DEFAULT_SIZE: dict[Device, int] = {"cpu": 10240, "gpu": SEED_N}
SMALL_SIZE = 1024
MAX_SYSTEMS = 1 << 22


def check_count(count: int) -> int:
    if isinstance(count, bool) or int(count) != count or not 1 <= int(count) <= MAX_SYSTEMS:
        raise PortabenchError(f"the number of systems N must be an integer in 1..{MAX_SYSTEMS}, got {count!r}")
    return int(count)


@functools.lru_cache(maxsize=2)
def _systems(case: str, count: int, seed: int) -> BatchedSystems:
    if case == "kk-batched":
        base = load("kk-batched")
        reps = -(-count // base.num_systems)
        take = np.arange(count)
        return BatchedSystems(n=base.n, row_ptr=base.row_ptr, col_idx=base.col_idx,
                              values=np.tile(base.values, (reps, 1))[:count],
                              rhs=np.tile(base.rhs, (reps, 1))[:count],
                              pool_index=take % base.num_systems)
    return _stored_standin(case, count, seed)


def _stored_standin(case: str, count: int, seed: int) -> BatchedSystems:
    """The stand-in of ``count`` systems: its pool of distinct systems (generated once, each pool system's
    iteration count checked, then read back from the dataset cache by every later process) tiled to
    ``count`` as the generator tiles it."""
    import portabench.datasets as datasets

    size = MECHANISMS[case].pool

    def generate() -> dict[str, np.ndarray]:
        s = load(f"{case}@{size / SEED_N!r}", seed=seed)
        return {"n": np.array(s.n), "row_ptr": s.row_ptr, "col_idx": s.col_idx, "values": s.values, "rhs": s.rhs}

    a = stored_arrays("batched-pool", {"case": case, "seed": seed}, package_sources(datasets), generate)
    return tiled(BatchedSystems(n=int(a["n"]), row_ptr=a["row_ptr"], col_idx=a["col_idx"], values=a["values"],
                                rhs=a["rhs"]), count)


def pool_size(case: str) -> int:
    """How many distinct systems ``case`` has: system k of any N is pool system k mod this."""
    if case == "kk-batched":
        return load("kk-batched").num_systems
    if case not in MECHANISMS:
        raise PortabenchError(f"unknown batched case {case!r}; known: {', '.join(CASES)}")
    return MECHANISMS[case].pool


def batched_systems(case: str, count: int, seed: int = 0) -> BatchedSystems:
    """``count`` systems of dataset ``case`` (read-only: cached, shared by problems)."""
    if case not in CASES:
        raise PortabenchError(f"unknown batched case {case!r}; known: {', '.join(CASES)}")
    systems = _systems(case, check_count(count), int(seed))
    if systems.num_systems != count:  # the stand-ins round scale * 51200
        raise PortabenchError(f"{case}: asked for {count} systems, got {systems.num_systems}")
    for arr in (systems.values, systems.rhs):
        arr.setflags(write=False)
    return systems
