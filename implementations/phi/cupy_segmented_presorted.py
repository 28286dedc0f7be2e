"""GPU portable: ``cupy-segmented`` reading Π already in row order (as CP-APR's Π kernel can write it)."""

from __future__ import annotations

from .cupy_segmented import PER_THREAD, THREADS, PhiCupySegmented


class CupySegmentedPresorted(PhiCupySegmented):
    """``cupy-segmented`` reading Π in row order: no gather through the permutation."""

    name = "cupy-segmented-presorted"
    description = "cupy-segmented with Π already in row order (as CP-APR's Π kernel can write it): streamed, no gather"

    def __init__(self, perturbation: str = "none", threads: int = THREADS, blocks: int = 0,
                 per_thread: int = PER_THREAD) -> None:
        super().__init__(perturbation, threads, blocks, per_thread, pi_order="sorted")
