"""CPU vendor comparison point: pyttb's own ``cp_apr(algorithm="mu")``, the library a Python user
would otherwise call (NumPy, one thread), from the problem's starting model.

pyttb's sparse tensor and starting ktensor are built untimed; a run is ``cp_apr`` with
``maxiters`` = the problem's outer iterations and its l_max, τ, ε, κ and κ_tol. pyttb returns
the model sorted by λ with λ folded into the first factor: ``output`` puts it in the kernel's
form (columns summing to 1, untimed). pyttb tests Φ > 0 where the paper tests Φ > 1 in the
offset, which acts from the second outer iteration on: a run of one outer iteration (the
benchmarks') is the same algorithm (``reference.cpapr_mu``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from portabench.reference.cpapr_mu import canonical_model

from ..backends import HOST
from ..cpapr_inputs import pyttb_unavailable
from ..model import Variant
from .definition import PYTTB_MAX_NNZ, MuProblem, flatten


class PyttbMu(Variant):
    kernel = "cpapr_mu"
    name = "pyttb"
    family = "vendor"
    backend = HOST
    description = "pyttb's cp_apr(algorithm='mu') from the same start (a comparison point at small sizes)"
    max_size = PYTTB_MAX_NNZ

    @classmethod
    def unavailable(cls) -> str | None:
        return pyttb_unavailable()

    def prepare(self, problem: MuProblem) -> None:
        import pyttb as ttb

        t = problem.tensor
        weights, factors = problem.start
        self._tensor = ttb.sptensor(t.coords.astype(np.int64), t.values[:, None].copy(), t.dims)
        self._start = ttb.ktensor([np.array(a) for a in factors], np.array(weights))
        self._problem = problem
        self._model: Any = None

    def run(self) -> None:
        import pyttb as ttb

        p = self._problem
        self._model, _, _ = ttb.cp_apr(self._tensor, p.rank, algorithm="mu", init=self._start.copy(),
                                       maxiters=p.outer, maxinneriters=p.inner, stoptol=p.stoptol,
                                       epsDivZero=p.epsilon, kappa=p.kappa, kappatol=p.kappatol, printitn=0)

    def output(self) -> np.ndarray:
        return flatten(*canonical_model(self._model.weights, self._model.factor_matrices))
