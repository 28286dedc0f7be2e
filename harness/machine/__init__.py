"""The machine as a run records it: the system record written beside the asv results (``record``) and its
measured STREAM peaks (``peaks``). What the machine is (CPU and GPU detection, theoretical peaks) is the
backends' business: ``portabench.implementations.hardware``."""
