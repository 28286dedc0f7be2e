"""GPU portable: ``cupy-rows`` writing Π in mode-n row order, for Φ's presorted variant (checked in
tensor order)."""

from __future__ import annotations

import numpy as np

from ..gpu import cupy
from .cupy_rows import CupyRows


class CupyRowsSorted(CupyRows):
    name = "cupy-rows-sorted"
    description = "cupy-rows writing Π in mode-n row order (for Φ's presorted variant); checked in tensor order"
    sorted_rows = True
    alternative = True  # cupy-rows is the main comparison's portable Π

    def output(self) -> np.ndarray:
        perm = cupy().asnumpy(self._arranged[2])
        sorted_rows = self.to_host(self._out)
        out = np.empty_like(sorted_rows)
        out[perm] = sorted_rows  # row z of the sorted order is nonzero perm[z]
        return out
