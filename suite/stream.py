"""STREAM through asv: every operation x variant of each device at its default size (beyond the
caches; ``--size stream=N``). GB/s, % of peak and speedups are derived by ``portabench report``."""

from .classes import define

define(globals(), "stream")
