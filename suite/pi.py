"""Π (CP-APR's Khatri-Rao rows) through asv, on Φ's inputs: the classes ``PiKernel.studies`` declares
(main: nell-2 and lbnl modes 0-2 at R = 10; study datasets)."""

from .classes import define

define(globals(), "pi")
