"""The report: asv results of many machines -> % of peak and portable-over-vendor speedup.

    >>> from portabench.reports import build_report
    >>> summary = build_report(Path("results"), Path("report"))  # doctest: +SKIP

``results`` loads the tidy table, ``metrics`` derives the tables, ``figures`` draws them,
``studies`` and ``scaling`` add the per-system studies, ``devices`` the runs split across devices,
``changes`` finds each benchmark's steps across commits and draws the kernels' histories,
``published`` sets the papers' figures beside the suite's, ``panels`` groups figures with their
numbers, ``html`` writes the pages and ``build`` ties them together. ``compare`` pairs two result sets for regression tracking.
"""

import importlib
from typing import Any

# Imported on first use: ``rounds`` and ``compare`` need neither Matplotlib nor seaborn, which the
# report's figures take seconds to import.
_LAZY = {"ReportSummary": "build", "build_report": "build", "percent_of_peak": "metrics", "speedup": "metrics",
         "Loaded": "results", "load_results": "results", "measured_peaks": "results"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Loaded", "ReportSummary", "build_report", "load_results", "measured_peaks", "percent_of_peak", "speedup"]
