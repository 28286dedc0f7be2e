"""The report: asv results of many machines -> % of peak and portable-over-vendor speedup.

    >>> from portabench.reports import build_report
    >>> summary = build_report(Path("results"), Path("report"))  # doctest: +SKIP

``results`` loads the tidy table, ``metrics`` derives the tables, ``figures`` draws them,
``studies`` adds the per-system studies, ``sweeps`` the studies against one parameter that the kernels
declare (``Kernel.sweeps``), ``devices`` the runs split across devices, ``changes`` finds each
benchmark's steps across commits and draws the kernels' histories, ``published`` sets the papers'
figures beside the suite's, ``panels`` groups figures with their numbers, ``html`` writes the pages and
``build`` ties them together. What a kernel's report needs, the report asks the kernel
(``portabench.implementations.get_kernel``); it imports no kernel's modules. The statistics of rounds and
change points are ``portabench.harness.statistics``; ``portabench compare`` is
``portabench.harness.commands.compare``.
"""

import importlib
from typing import Any

# Imported on first use: ``load_results`` and ``measured_peaks`` need neither Matplotlib nor seaborn, which
# the report's figures take seconds to import.
_LAZY = {"ReportSummary": "build", "build_report": "build", "percent_of_peak": "metrics", "speedup": "metrics",
         "Loaded": "results", "load_results": "results", "measured_peaks": "results"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Loaded", "ReportSummary", "build_report", "load_results", "measured_peaks", "percent_of_peak", "speedup"]
