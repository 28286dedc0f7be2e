"""CP-APR PDNR (paper [002]: Hansen, Plantenga and Kolda's projected damped Newton for row
subproblems, with single- and multi-kernel load balancing): the problem, its work model, the check.

One run is ``outer`` outer iterations (default 1; paper [002] runs 10: the ``outer-10`` study) of
Algorithm 1 from the seeded starting model (``cpapr_inputs``): per mode, Π, then every row
subproblem by Algorithm 2 (``reference.cpapr_pdnr`` states every constant: rank 10, at most 10
Newton steps per row, at most 10 backtracking trials, row tolerance 1e-4, as pyttb's
``cp_apr(algorithm="pdnr", inexact=False)``). The output is the model (λ, A_1..A_N) and the last
mode's Newton steps per row, packed (``pack``).

**Work model** (written once, here). The Newton steps and backtracking trials depend on the data,
so the model counts one Newton step with one trial per row, per mode and outer iteration:
per nonzero, Π (N - 2) R multiplies, the gradient and Hessian pass 2R (b·π) + 2 + 2R (φ) +
R(R + 1) (H's upper triangle, with the weight), the objective before and at the trial 2 (2R + 2);
per row, the shifted system R³/3 + 2R² + 10R. Bytes: per mode, the mode's sorted indices and values
read (4N + 8 per nonzero), Π written once and read three times (32R per nonzero), the factors read
and B written (16 R Σ I_m). Rows per second and time per outer iteration are in the README.

**Check** (before any time is recorded; all must hold, each as a ratio to its bound, the largest reported):

1. every row of the last mode that stopped before the cap (fewer than 10 Newton steps) satisfies its
   subproblem's KKT conditions, max_r |min(b_r, g_r)| < 1e-4, recomputed in float64 from the output
   model (the last mode's subproblems are the only ones the final model defines; the weights shifted
   back into it move b by a few ulps, hence ``KKT_SLACK``); a row at the cap is not checked this way;
2. no more rows at the cap than the oracle has, plus 1 % of the rows and one (a variant cannot evade
   1. by reporting rows unconverged). pyttb reports no steps (all -1): it is checked by 3. alone;
3. the objective does not rise above the start's (``OBJECTIVE_RISE``: rounding only) unless the oracle's
   does (below), and agrees with the
   oracle's within ``OBJECTIVE_RTOL`` = 2e-3 relatively. On well-posed rows (more nonzeros than R) codes agree
   far closer (the oracle and pyttb to 1e-9 on the tests' random tensors; the Numba and NumPy variants and
   the oracle to about 1e-12 on the main stand-ins). lbnl's last mode has about 2 nonzeros per row for
   R = 10 unknowns: H has rank 2 under μ = 1e-5, and Newton's direction follows the rounding of H; two correct
   codes (the oracle and pyttb) then differ by up to 8e-4 (lbnl at 5 000 nonzeros, seeds 1-8; 1e-11 in the
   other four modes). Doing nothing misses by about 50 %, skipping a mode by several %.
   The objective is the Poisson negative log-likelihood (``reference.cpapr.poisson_objective``) with each
   model value floored at ε = 1e-10: PDNR can drive a model value at a nonzero to exactly 0 (pyttb does
   the same on the lbnl stand-in, whose log-likelihood is then -inf); the floor keeps those comparable.
   Such a zero makes the floored objective jump (-x log 1e-10 per nonzero), and on some lbnl seeds above
   the start's: the algorithm's own rise (pyttb's too), so there the variant must match the oracle's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from portabench.datasets.tensors.standin import scaled_shape
from portabench.reference.cpapr import model_values
from portabench.reference.cpapr_pdnr import PdnrSettings, mode_kkt, pdnr

from ..cpapr_inputs import MAIN_CASES, MAX_RANK, OTHER_CASES, CpaprKernel, CpaprProblem
from ..model import MAIN, Check, Device, PortabenchError, Problem, Study, Work
from ..tensor_inputs import FILE_CASE, INDEX_BYTES, VALUE_BYTES, check_rank, scale_for

RANKS: tuple[str, ...] = ("10",)
OUTERS: tuple[str, ...] = ("1", "10")  # one outer iteration per run; paper [002]'s ten in a study
KKT_SLACK = 1.0 + 1e-6
CAPPED_SHARE = 0.01
OBJECTIVE_RISE = 1e-12
OBJECTIVE_RTOL = 2e-3
# CPU: the main job's size (every variant on three stand-ins with asv's repeats, a short job on two
# cores; the row-by-row oracle and pyttb are its slowest parts). GPU: bounded by the oracle, which solves
# one row at a time in Python, its time growing with the rows (lbnl's last mode has about half as many
# rows as nonzeros); the full stand-ins would be far out of reach.
DEFAULT_SIZE: dict[Device, int] = {"cpu": 20_000, "gpu": 200_000}
PYTTB_SIZE = 5_000  # pyttb's largest size: it solves the rows one at a time in Python, slow beyond this
# paper [002]'s Figure 4 thresholds, 2^8 .. 2^18 nonzeros per row
THRESHOLDS: tuple[str, ...] = tuple(str(1 << k) for k in range(8, 19, 2))


def pack(weights: np.ndarray, factors: list[np.ndarray], steps: np.ndarray) -> np.ndarray:
    """A run's output as one array: λ, each factor row-major, the last mode's Newton steps."""
    return np.concatenate([np.asarray(weights, dtype=np.float64).ravel(),
                           *[np.asarray(a, dtype=np.float64).ravel() for a in factors],
                           np.asarray(steps, dtype=np.float64).ravel()])


def unpack(output: np.ndarray, dims: tuple[int, ...], rank: int) -> tuple[np.ndarray, list[np.ndarray], np.ndarray] | None:
    """``pack``'s parts, or None where ``output`` has the wrong length."""
    need = rank * (1 + sum(dims)) + dims[-1]
    if output.ndim != 1 or output.size != need:
        return None
    weights, at, factors = output[:rank], rank, []
    for dim in dims:
        factors.append(output[at:at + dim * rank].reshape(dim, rank))
        at += dim * rank
    return weights, factors, output[at:]


def floored_objective(coords: np.ndarray, values: np.ndarray, weights: np.ndarray, factors: list[np.ndarray],
                      floor: float = PdnrSettings.eps_div) -> float:
    """Poisson negative log-likelihood with each model value at a nonzero floored at ``floor``."""
    m = np.maximum(model_values(coords, weights, factors), floor)
    total = float(np.sum(weights * np.prod([a.sum(axis=0) for a in factors], axis=0)))
    return total - float(np.dot(values, np.log(m)))


def work_model(dims: tuple[int, ...], nnz: int, rank: int, outer: int) -> Work:
    """One Newton step with one backtracking trial per row, every mode, ``outer`` times."""
    order, r = len(dims), rank
    per_nonzero = max(order - 2, 0) * r + (2 * r + 2 + 2 * r + r * (r + 1)) + 2 * (2 * r + 2)
    per_row = r**3 / 3 + 2 * r * r + 10 * r
    flops = outer * order * nnz * per_nonzero + outer * sum(dims) * per_row
    bytes_ = outer * (order * nnz * (INDEX_BYTES * order + VALUE_BYTES + 4 * VALUE_BYTES * r)
                      + order * 2 * VALUE_BYTES * r * sum(dims))
    working_set = nnz * (INDEX_BYTES * order + VALUE_BYTES + VALUE_BYTES * r) + VALUE_BYTES * r * sum(dims)
    return Work(bytes=float(bytes_), flops=float(flops), working_set=float(working_set))


@dataclass(frozen=True)
class PdnrProblem(CpaprProblem):
    """A count tensor, rank, seed and outer iterations (``cpapr_inputs``) with PDNR's settings."""

    kernel: ClassVar[str] = "cpapr_pdnr"

    @property
    def settings(self) -> PdnrSettings:
        return PdnrSettings()

    def inputs(self) -> dict[str, np.ndarray]:
        weights, factors = self.start
        t = self.tensor
        return {"coords": t.coords, "values": t.values, "weights": weights,
                **{f"factor_{m}": a for m, a in enumerate(factors)}}

    def device_footprint(self) -> tuple[str, float]:
        """The tensor sorted by the rows of each mode (per mode: int32 coordinates, the values and each
        nonzero's row), Π and the factors."""
        t = self.tensor
        need = t.nnz * (t.order * (4 * t.order + 16) + 8 * self.rank) + 8 * self.rank * sum(t.dims)
        return "the row-sorted tensor of every mode, the factors and Π", float(need)

    def work(self) -> Work:
        t = self.tensor
        return work_model(t.dims, t.nnz, self.rank, self.outer)

    def reference(self) -> np.ndarray:
        """The oracle's packed output (computed once)."""
        if "reference" not in self._cache:
            t = self.tensor
            weights, factors = self.start
            result = pdnr(t.coords, t.values, weights, factors, self.outer, self.settings)
            self._cache["reference"] = pack(result.weights, result.factors, result.steps[-1])
        return self._cache["reference"]

    def start_objective(self) -> float:
        if "start_objective" not in self._cache:
            t = self.tensor
            self._cache["start_objective"] = floored_objective(t.coords, t.values, *self.start)
        return self._cache["start_objective"]


class PdnrKernel(CpaprKernel):
    name = "cpapr_pdnr"
    description = "CP-APR PDNR (paper [002]): projected damped Newton per row subproblem, single- vs multi-kernel"
    options = {"rank": RANKS, "outer": OUTERS}
    problem_class = PdnrProblem
    verify_size = 20_000
    # The quick check (every case at 20 000 nonzeros takes minutes: the row-by-row oracle and pyttb): one
    # tensor of each order, together every variant's paths. chicago (4-way) at 70 000 has rows over the
    # multi-kernel thresholds (numba-multi's 2^14 nonzeros per row, cupy-multi's 2^12) beside light rows
    # and modes without heavy rows, and more nonzeros than numpy-batched's Hessian block (2^16); lbnl
    # (5-way) keeps its skew and its rows of fewer nonzeros than R (rank-deficient Newton systems); nell-2
    # (3-way) at pyttb's size is where pyttb runs (its row-by-row Python takes longest on lbnl's many rows).
    quick_verify = {"chicago-crime-comm": 70_000, "lbnl-network": 10_000, "nell-2": PYTTB_SIZE}

    def default_size(self, device: Device) -> int:
        return DEFAULT_SIZE[device]

    def problem(self, case: str, size: int, seed: int = 0, rank: str = RANKS[0], outer: str = OUTERS[0],
                given=None) -> PdnrProblem:
        if given is None:
            case = self.check_case(case)
        elif case != FILE_CASE:
            raise PortabenchError(f"{self.name}: a given tensor's case is {FILE_CASE!r}, got {case!r}")
        try:
            outer_ = int(outer)
        except (TypeError, ValueError):
            outer_ = 0
        return PdnrProblem(case=case, size=int(size), rank=check_rank(self.name, rank, MAX_RANK), outer=outer_,
                           seed=int(seed), given=given)

    def problem_options(self, params: dict[str, str]) -> dict[str, str]:
        """rank (any in 1..MAX_RANK) and outer (any positive count), defaults where absent."""
        rank = str(check_rank(self.name, params.get("rank", RANKS[0]), MAX_RANK))
        outer = str(params.get("outer", OUTERS[0])).strip()
        if not outer.isdigit() or int(outer) < 1:
            raise PortabenchError(f"{self.name}: outer must be a positive integer, got {outer!r}")
        return {"rank": rank, "outer": outer}

    def studies(self, device: Device) -> list[Study]:
        every = self._variants_up_to(device, max(self.benchmark_sizes(device)))
        multi = {"cpu": "numba-multi", "gpu": "cupy-multi"}[device]
        return [
            self.study(MAIN, device, cases=MAIN_CASES, variants=every,
                       title=f"{', '.join(MAIN_CASES)} (paper [002]'s Table I), R = 10, one outer iteration"),
            self.study("threshold", device, suffix="Threshold", cases=MAIN_CASES, variants=(multi,),
                       settings={"threshold": THRESHOLDS},
                       title="the multi-kernel switch threshold, 2^8 .. 2^18 nonzeros per row (paper [002]'s Figure 4)"),
            self.study("outer-10", device, suffix="Outer10", cases=MAIN_CASES, variants=every,
                       options={"outer": ("10",)}, title="paper [002]'s ten outer iterations per run"),
            self.study("datasets", device, suffix="Datasets", cases=OTHER_CASES, variants=every,
                       title=f"the other stand-ins ({', '.join(OTHER_CASES)})"),
            *([self.study("pyttb", device, suffix="Pyttb", cases=MAIN_CASES, sizes=(PYTTB_SIZE,),
                          variants=tuple(v.name for v in self.variants if v.runs_on(device)),
                          title="every variant at pyttb's size (pyttb: rows one at a time in Python)")]
              if device == "cpu" else []),
            self.study("iterations", device, suffix="Iterations", cases=MAIN_CASES, variants=every,
                       measure="iterations", title="Newton steps per row (mean and max), last outer iteration"),
        ]

    def work(self, case: str, size: int, rank: str = RANKS[0], outer: str = OUTERS[0], **options: str) -> Work:
        dims, nnz = scaled_shape(self.check_case(case), scale_for(case, int(size)))
        return work_model(dims, nnz, check_rank(self.name, rank, MAX_RANK), int(outer))

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, PdnrProblem)
        return problem.reference()

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, PdnrProblem)
        return Check(max_rel_error=check_ratio(problem, output, reference), tolerance=1.0,
                     what="largest of (converged rows' KKT / 1e-4, excess capped rows / allowance, "
                          "objective rise over the start, objective gap / 2e-3)")


def check_ratio(problem: PdnrProblem, output: np.ndarray, reference: np.ndarray) -> float:
    """The check above as one number (<= 1 passes; NaN for a malformed output)."""
    t, s = problem.tensor, problem.settings
    parts = unpack(np.asarray(output, dtype=np.float64), t.dims, problem.rank)
    ref = unpack(np.asarray(reference, dtype=np.float64), t.dims, problem.rank)
    if parts is None or ref is None:
        return float("nan")
    weights, factors, steps = parts
    if not all(np.all(np.isfinite(a)) and np.all(a >= 0) for a in (weights, *factors)):
        return float("nan")
    if np.all(steps == -1):  # a library that reports no steps (pyttb): the objective checks it
        steps = np.asarray(ref[2])
        kkt_rows = np.zeros(steps.size, dtype=bool)
    elif np.any(steps < 0):
        return float("nan")
    else:
        kkt_rows = steps < s.max_inner
    converged = steps < s.max_inner
    kkt = mode_kkt(t.coords, t.values, weights, factors, t.order - 1, s.eps_div)
    kkt_ratio = float(kkt[kkt_rows].max(initial=0.0)) / (s.row_tol * KKT_SLACK)
    allowance = CAPPED_SHARE * steps.size + 1
    capped_ratio = max(0.0, float(np.sum(~converged) - np.sum(ref[2] >= s.max_inner))) / allowance
    f = floored_objective(t.coords, t.values, weights, factors)
    f_ref = floored_objective(t.coords, t.values, ref[0], ref[1])
    f_start = problem.start_objective()
    rises = f > f_start + OBJECTIVE_RISE * abs(f_start)
    rise_ratio = float("inf") if rises and f_ref <= f_start else 0.0  # where the oracle rose too, the gap decides
    gap_ratio = abs(f - f_ref) / (OBJECTIVE_RTOL * abs(f_ref))
    return max(kkt_ratio, capped_ratio, rise_ratio, gap_ratio)
