"""The processes of a run across devices: one MPI rank per device, its device, and the collectives.

The ranks are launched by MPI (``mpirun``, ``mpiexec``, ``srun``), on one node or many. Ranks of one node
take its GPUs one each, by their index among the node's ranks (MPI's shared-memory split). GPU ranks sum
through NCCL (CuPy's ``cupy.cuda.nccl``; rank 0 makes the communicator's id and MPI broadcasts it), CPU
ranks through MPI itself. NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``): on a shared host a program
using it can put every GPU of the host out of service.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import numpy as np

from portabench.implementations.gpu import cupy, cupy_unavailable
from portabench.implementations.model import Device, PortabenchError
from portabench.implementations.verification import timed_call

# A sum of at most this many bytes goes through the host (a copy each way and MPI's all-reduce): so small a sum
# is all latency, and NCCL's all-reduce right after a kernel costs more of it than the host path (the split
# STREAM dot's one double; measured in results/EXPERIMENTS.md, "A one-double sum across GPUs").
HOST_SUM_BYTES = 64
MPI_MISSING = ("mpi4py is not installed: pip install 'portabench[mpi]' (mpi4py and the MPICH wheel), or mpi4py "
               "built against the cluster's own MPI")


def mpi() -> ModuleType:
    """mpi4py's MPI module (initialising MPI), or a PortabenchError saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise PortabenchError(f"{MPI_MISSING} ({exc})") from None
    return MPI


def abort_job(code: int) -> None:
    """End every rank of the job after an error on this one (the others would wait for it forever)."""
    MPI = mpi()
    if MPI.Is_initialized() and MPI.COMM_WORLD.Get_size() > 1:
        MPI.COMM_WORLD.Abort(code)


class Ranks:
    """A communicator of ranks, one device each, and what a split run needs of it: sums, barriers, the
    slowest rank's time."""

    def __init__(self, comm: Any, device: Device) -> None:
        self.comm, self.device = comm, device
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._nccl: Any = None

    @classmethod
    def world(cls, device: Device) -> Ranks:
        """Every rank of the job, each on its own GPU of its node where ``device`` is "gpu"."""
        MPI = mpi()
        ranks = cls(MPI.COMM_WORLD, device)
        node = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
        local, on_node = node.Get_rank(), node.Get_size()
        node.Free()
        if device == "cpu":
            ranks._share_cores(on_node)
        else:
            reason = cupy_unavailable()
            if reason:
                raise PortabenchError(f"rank {ranks.rank}: {reason}")
            count = cupy().cuda.runtime.getDeviceCount()
            if on_node > count:
                raise PortabenchError(f"{on_node} ranks on one node with {count} GPU(s): start one rank per GPU "
                                      f"(e.g. mpirun -n {count}, or srun --ntasks-per-node={count})")
            cupy().cuda.Device(local).use()
        return ranks

    def _share_cores(self, on_node: int) -> None:
        """Each of a node's CPU ranks takes its share of the cores for its threads (Numba's, BLAS's): more
        threads than cores make spinning threads wait for each other."""
        import numba
        from threadpoolctl import threadpool_limits

        threads = max(1, (os.cpu_count() or 1) // on_node)
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        self._limits = threadpool_limits(threads)

    def first(self, count: int) -> Ranks | None:
        """The first ``count`` ranks as a communicator of their own (None on the others)."""
        MPI = mpi()
        sub = self.comm.Split(0 if self.rank < count else MPI.UNDEFINED, self.rank)
        return None if sub == MPI.COMM_NULL else Ranks(sub, self.device)

    def free(self) -> None:
        if self.comm != mpi().COMM_WORLD:
            self.comm.Free()

    @property
    def nccl(self) -> Any:
        """The NCCL communicator of these ranks' GPUs (made on first use)."""
        if self._nccl is None:
            os.environ["NCCL_NVLS_ENABLE"] = "0"  # never multicast: see the module's docstring
            from cupy.cuda import nccl

            uid = self.comm.bcast(nccl.get_unique_id() if self.rank == 0 else None, root=0)
            self._nccl = nccl.NcclCommunicator(self.size, uid, self.rank)
        return self._nccl

    def sum(self, value: Any) -> Any:
        """``value`` summed over the ranks: a GPU array in place through NCCL, a host array in place through
        MPI, a scalar returned. On one rank: ``value``."""
        if self.size == 1:
            return value
        if self.device == "gpu" and hasattr(value, "data") and hasattr(value.data, "ptr"):  # a CuPy array
            from cupy.cuda import nccl

            if value.dtype != np.float64:
                raise PortabenchError(f"only float64 outputs are summed across GPUs, got {value.dtype}")
            if value.nbytes <= HOST_SUM_BYTES:
                host = value.get()
                self.comm.Allreduce(mpi().IN_PLACE, host, op=mpi().SUM)
                value.set(host)
                return value
            stream = cupy().cuda.get_current_stream()
            self.nccl.allReduce(value.data.ptr, value.data.ptr, value.size, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, stream.ptr)
            stream.synchronize()
            return value
        if isinstance(value, np.ndarray) and value.ndim > 0:
            self.comm.Allreduce(mpi().IN_PLACE, value, op=mpi().SUM)
            return value
        return self.comm.allreduce(float(value), op=mpi().SUM)

    def gather_rows(self, array: Any, owners: list[tuple[int, int]]) -> None:
        """Rows ``owners[r]`` of ``array`` (C-contiguous, float64) from rank r to every rank, in place."""
        if self.size == 1:
            return
        width = int(np.prod(array.shape[1:], dtype=np.int64))
        if self.device == "gpu":
            from cupy.cuda import nccl

            stream, comm = cupy().cuda.get_current_stream(), self.nccl  # made outside the group: made in it, it is not ready
            nccl.groupStart()
            for root, (low, high) in enumerate(owners):
                rows = array[low:high]
                comm.broadcast(rows.data.ptr, rows.data.ptr, rows.size, nccl.NCCL_FLOAT64, root, stream.ptr)
            nccl.groupEnd()
            stream.synchronize()
            return
        MPI = mpi()
        counts = [(high - low) * width for low, high in owners]
        offsets = [low * width for low, _ in owners]
        self.comm.Allgatherv(MPI.IN_PLACE, [array, counts, offsets, MPI.DOUBLE])

    def barrier(self) -> None:
        self.comm.Barrier()

    def slowest(self, value: float) -> float:
        return float(self.comm.allreduce(value, op=mpi().MAX))

    def timed(self, call: Any) -> tuple[float, list[float]]:
        """Seconds from a barrier until every rank has finished ``call`` (the slowest rank's), and every rank's
        seconds in its own share of the work (what ``call`` returns: the time before it joined the others)."""
        def until_every_rank_is_done() -> Any:
            share = call()
            self.barrier()
            return share

        self.barrier()
        seconds, share = timed_call(until_every_rank_is_done)
        return self.slowest(seconds), self.comm.allgather(float(share))
