"""BCSR SpMV through asv: the classes ``BcsrKernel.studies`` declares (main: the paper's six matrices
at their block sizes, real ones where downloaded; study block-size: bs 2 to 32 at equal bytes)."""

from .classes import define

define(globals(), "bcsr")
