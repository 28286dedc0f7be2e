"""What every CP-APR MU variant shares: the solver's loop over the project's own Π and Φ.

A variant names the Π and Φ variants it is built from and the array library ``xp`` (NumPy or
CuPy) of its O(I_n R) steps, and implements

- ``build(tensors, factors, pis, phis)``: for each mode n, a zero-argument Π call writing ``pis[n]``
  from the nonzeros ``tensors[n]`` and the (current) ``factors``, and a Φ call writing ``phis[n]`` from
  B = ``factors[n]`` and ``pis[n]``, bound once to these buffers (the Π/Φ variants' ``arrange`` and
  ``bind``, untimed). On one device every mode has the whole tensor and one Π buffer;
- ``kkt_update(b, phi, stoptol)``: the KKT violation max |min(B, 1 - Φ)|, and B = B * Φ where it
  is not below ``stoptol`` (the one step of the inner loop besides Φ).

A solver split across devices (``share_rows``) updates, in each mode, the rows of B it owns, from the
nonzeros of those rows: ``ModeRows`` says which rows, takes the worst KKT violation over the devices
and gathers the updated rows from their owners before λ (one device: every row, nothing to join).

The timed run copies the starting model into the working buffers (on the device), then runs the
oracle's loop (``reference.cpapr_mu``): every array stays where ``to_device`` put it; only each
KKT violation (one number) comes back to decide the inner loop. ``output`` sorts the components
(untimed, on the host).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Callable

import numpy as np

from .. import tensor_inputs
from ..gpu import CupyArrays
from ..model import BoundVariant
from ..tensor_inputs import TensorArrays
from .definition import MuProblem, flatten

WARM_UP_NONZEROS = 64  # enough to compile and launch every code path

Calls = list[tuple[Callable[[], Any], Callable[[], Any]]]


def bound_calls(pi_variant: Any, phi_variant: Any, tensors: list[TensorArrays], factors: list[Any], pis: list[Any],
                phis: list[Any], epsilon: float) -> Calls:
    """Per mode, a Π variant's and a Φ variant's calls bound to the solver's buffers (``phi_variant``:
    one for every mode, or a list of one per mode)."""
    per_mode = phi_variant if isinstance(phi_variant, list) else [phi_variant] * len(tensors)
    return [(pi_variant.bind(pi_variant.arrange(tensor, n), factors, pi),
             per_mode[n].bind(per_mode[n].arrange(tensor, n), factors[n], pi, epsilon, phis[n], "none"))
            for n, (tensor, pi) in enumerate(zip(tensors, pis))]


class ModeRows:
    """The rows of each mode's factor a solver updates, and how the devices' updates join: on one device,
    every row, and nothing to join (``harness.distributed.split_run.SplitRows`` splits them across devices)."""

    def __init__(self, dims: tuple[int, ...]) -> None:
        self.bounds = [(0, d) for d in dims]

    @property
    def split(self) -> bool:
        return False

    def worst(self, violation: float) -> float:
        """The KKT violation over every device's rows."""
        return violation

    def gather(self, b: Any, mode: int) -> None:
        """Every device's updated rows of ``b`` (mode ``mode``'s factor), in place."""


def library_kkt_update(xp: Any, b: Any, phi: Any, stoptol: float) -> float:
    """The vendor variants' KKT check and update, as built-ins: max |min(B, 1 - Φ)|; B *= Φ unless
    that is below ``stoptol``."""
    worst = float(xp.abs(xp.minimum(b, 1.0 - phi)).max())
    if worst >= stoptol:
        b *= phi
    return worst


class MuVariant(BoundVariant):
    """The solver loop; a variant gives ``xp``, ``build`` and ``kkt_update``."""

    kernel = "cpapr_mu"
    xp: Any = np

    _rows: ModeRows | None = None

    @abstractmethod
    def build(self, tensors: list[TensorArrays], factors: list[Any], pis: list[Any], phis: list[Any],
              epsilon: float) -> Calls:
        """Per mode, (Π call, Φ call) bound to these buffers."""

    def share_rows(self, rows: ModeRows) -> None:
        """Solve as one of several devices, updating ``rows`` (before ``prepare``)."""
        self._rows = rows

    @abstractmethod
    def kkt_update(self, b: Any, phi: Any, stoptol: float) -> float:
        """max |min(B, 1 - Φ)|; B *= Φ unless that is below ``stoptol``."""

    def _setup(self, problem: MuProblem, count: int | None, rows: ModeRows) -> None:
        if rows.split:  # each mode's nonzeros in the rows this device owns
            whole = problem.tensor
            shares = [host_share(self.kernel, whole, n, *rows.bounds[n]) for n in range(whole.order)]
        else:
            shares = [tensor_inputs.host_arrays(self.kernel, problem.tensor, count)] * problem.tensor.order
        placed = {id(h): TensorArrays(self.to_device(h.idx), self.to_device(h.values), h.dims) for h in shares}
        pis = {id(h): self.full((h.nnz, problem.rank), np.nan) for h in shares}
        weights, factors = problem.start
        self._start = (self.to_device(np.array(weights)), [self.to_device(np.array(a)) for a in factors])
        self._weights = self.full(weights.shape, np.nan)
        self._factors = [self.full(a.shape, np.nan) for a in factors]
        self._phis = [self.full(a.shape, 0.0) for a in factors]
        self._calls = self.build([placed[id(h)] for h in shares], self._factors, [pis[id(h)] for h in shares],
                                 self._phis, problem.epsilon)
        self._problem, self._bounds = problem, rows
        self._inner = np.zeros((problem.outer, problem.tensor.order), dtype=np.int64)

    def prepare(self, problem: MuProblem) -> None:
        # Compile, load and launch every step once on a few nonzeros, on this device alone, so no first-call
        # cost is timed.
        alone = ModeRows(problem.tensor.dims)
        self._setup(problem, min(WARM_UP_NONZEROS, problem.tensor.nnz), alone)
        self.run()
        self._setup(problem, None, self._rows or alone)
        self.synchronize()

    def column_sums(self, a: Any) -> Any:
        """The sums of the columns of ``a`` (a mode's factor, I_n x R)."""
        return a.sum(axis=0)

    def _normalize(self, a: Any) -> Any:
        """Columns of ``a`` divided by their sums where positive; the sums."""
        sums = self.column_sums(a)
        a /= self.xp.where(sums > 0, sums, self.xp.ones_like(sums))
        return sums

    def run(self) -> None:
        xp, p = self.xp, self._problem
        weights, factors, phis = self._weights, self._factors, self._phis
        weights[...] = self._start[0]
        for a, start in zip(factors, self._start[1]):
            a[...] = start
            weights *= self._normalize(a)
        self._inner[...] = 0
        rows = self._bounds
        for k in range(p.outer):
            converged = True
            for n, (pi_call, phi_call) in enumerate(self._calls):
                b = factors[n]
                if k > 0:  # the complementary-slackness offset (Chi and Kolda: Φ > 1)
                    b += p.kappa * ((phis[n] > 1.0) & (b < p.kappatol))
                b *= weights
                weights.fill(1.0)
                pi_call()
                low, high = rows.bounds[n]
                mine, phi = b[low:high], phis[n][low:high]  # views: every row on one device
                for _ in range(p.inner):
                    self._inner[k, n] += 1
                    phi_call()
                    if rows.worst(self.kkt_update(mine, phi, p.stoptol)) < p.stoptol:
                        break
                    converged = False
                rows.gather(b, n)
                weights[...] = self._normalize(b)
            if converged:
                break
        self.synchronize()

    def inner_iterations(self) -> np.ndarray:
        """Inner iterations per (outer iteration, mode) of the last run."""
        return self._inner.copy()

    def output(self) -> np.ndarray:
        weights = self.to_host(self._weights)
        order = np.argsort(-weights, kind="stable")
        return flatten(weights[order], [self.to_host(a)[:, order] for a in self._factors])


def host_share(kernel: str, tensor: Any, mode: int, low: int, high: int) -> TensorArrays:
    """The nonzeros of ``tensor`` whose mode-``mode`` index is in [low, high), as the variants take them."""
    from portabench.datasets.tensors import SparseTensor

    keep = np.flatnonzero((tensor.coords[:, mode] >= low) & (tensor.coords[:, mode] < high))
    return tensor_inputs.host_arrays(kernel, SparseTensor(tensor.dims, tensor.coords[keep], tensor.values[keep]))


class CupyMuVariant(CupyArrays, MuVariant):
    """A GPU variant through CuPy: arrays in device memory, runs synchronised."""

    @property
    def xp(self) -> Any:  # type: ignore[override]
        from ..gpu import cupy

        return cupy()
