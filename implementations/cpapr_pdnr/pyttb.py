"""CPU vendor (the library a Python user calls): pyttb's ``cp_apr(algorithm="pdnr")`` from the same
start, ``inexact=False`` (one row tolerance, 1e-4, throughout) and the paper's caps. pyttb solves the
rows one at a time in Python and finds each row's nonzeros by a scan of the whole tensor
(``precompinds``, its default, inside the call): a comparison point at small sizes only."""

from __future__ import annotations

import warnings

import numpy as np

from ..backends import HOST
from ..cpapr_inputs import pyttb_unavailable
from .definition import PYTTB_SIZE, PdnrProblem, pack
from .variant import PdnrVariant


class PyttbPdnr(PdnrVariant):
    name = "pyttb"
    family = "vendor"
    backend = HOST
    description = "pyttb cp_apr(algorithm='pdnr', inexact=False): rows one at a time in Python"
    max_size = PYTTB_SIZE

    @classmethod
    def unavailable(cls) -> str | None:
        return pyttb_unavailable()

    def prepare(self, problem: PdnrProblem) -> None:
        import pyttb as ttb

        t = problem.tensor
        self._problem = problem
        self._tensor = ttb.sptensor(np.asarray(t.coords, dtype=np.int64), np.asarray(t.values, dtype=np.float64)[:, None], t.dims)
        self.run()

    def solve_mode(self, mode, b, steps) -> None:  # pyttb solves whole outer iterations
        raise NotImplementedError

    def run(self) -> None:
        import pyttb as ttb

        p, s = self._problem, self._problem.settings
        weights, factors = p.start
        init = ttb.ktensor([np.array(a) for a in factors], np.array(weights), copy=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, _, info = ttb.cp_apr(self._tensor, p.rank, algorithm="pdnr", init=init, maxiters=p.outer,
                                        maxinneriters=s.max_inner, stoptol=s.row_tol, epsDivZero=s.eps_div,
                                        epsActive=s.eps_active, mu0=s.mu0, printitn=0, inexact=False)
        self._model = model

    def output(self) -> np.ndarray:
        # pyttb reports no per-row steps: every last-mode row's are unknown (-1), so its check is the
        # objective's; its final normalisation sorts the components, which the objective ignores.
        m = self._model
        return pack(m.weights, m.factor_matrices, np.full(m.factor_matrices[-1].shape[0], -1))

    def iterations(self) -> None:
        return None
