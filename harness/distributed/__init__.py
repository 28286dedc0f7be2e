"""Kernels split across devices: one MPI rank per device (``ranks``), each running a registered
single-device variant on its share of the problem (``Kernel.split``), timed and checked together
(``split_run``). ``portabench scale`` drives it."""
