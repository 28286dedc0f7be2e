"""CP-APR MU through asv: the classes ``MuKernel.studies`` declares (main: chicago, lbnl and nell-2,
one outer iteration at R = 10; study datasets: the other stand-ins)."""

from .classes import define

define(globals(), "cpapr_mu")
