"""CP-APR PDNR through asv: the classes ``PdnrKernel.studies`` declares (main: chicago, lbnl and nell-2,
R = 10, one outer iteration; studies: the multi-kernel threshold, ten outer iterations, the other
stand-ins, Newton steps per row)."""

from .classes import define

define(globals(), "cpapr_pdnr")
