"""The benchmark harness: what runs the kernels and judges the runs.

Its lower floor is shared with the suite and the reports: the run plan (``plan``), the machine record and its
measured peaks (``machine``), the statistics of rounds and change points (``statistics``) and runs split across
devices over MPI and NCCL (``distributed``). Its top floor, ``commands``, is ``portabench``'s commands: the CLI,
the runner and its asv process, the prefill, tracking and ``scale``; it imports the suite's configuration and the
reports, and nothing imports it.
"""
