"""Batched SpMV through asv: the classes ``BatchedSpmvKernel.studies`` declares (main: the paper's two
mechanisms at the device's N, both value layouts; study batch-size)."""

from .classes import define

define(globals(), "batched_spmv")
