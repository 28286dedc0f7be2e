"""MTTKRP through asv: the classes ``MttkrpKernel.studies`` declares (main: nell-2 and lbnl modes
0-2 at R = 16; studies datasets, rank, preparation, launch). ``time_preparation`` is one ``arrange``
(sorting, scatter matrices), shown by the report as a multiple of one run."""

from .classes import define

define(globals(), "mttkrp")
