"""The report: asv results of many machines -> % of peak and portable-over-vendor speedup.

    >>> from portabench.reports import build_report
    >>> summary = build_report(Path("results"), Path("report"))  # doctest: +SKIP

``results`` loads the tidy table, ``metrics`` derives the tables, ``figures`` draws them,
``studies`` and ``scaling`` add the per-system studies, ``changes`` finds each benchmark's steps
across commits and draws the kernels' histories, ``published`` sets the seeds' figures beside the
suite's, ``panels`` groups figures with their numbers, ``html`` writes the pages and ``build`` ties
them together. ``compare`` pairs two result sets for regression tracking.
"""

from .build import ReportSummary, build_report
from .metrics import percent_of_peak, speedup
from .results import Loaded, load_results, measured_peaks

__all__ = ["Loaded", "ReportSummary", "build_report", "load_results", "measured_peaks", "percent_of_peak", "speedup"]
