"""Φ (CP-APR MU) through asv: the classes ``PhiKernel.studies`` declares (main: nell-2 and lbnl
modes 0-2 at R = 10; studies datasets, pressure (the paper's perturbations), launch (its policies))."""

from .classes import define

define(globals(), "phi")
