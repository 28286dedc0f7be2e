"""Batched GMRES through asv: the classes ``GmresKernel.studies`` declares (main: given order at the
device's N; studies order, batch-size, group-size, iterations). Each time is one solve of all N
systems, verified first (every system's recomputed residual below tol)."""

from .classes import define

define(globals(), "gmres")
