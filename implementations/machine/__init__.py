"""The machine: what it is (``hardware``: CPU and GPU detection, theoretical peaks), what a run
records about it beside the asv results (``runinfo``), and a quick measured peak (``measure``)."""
