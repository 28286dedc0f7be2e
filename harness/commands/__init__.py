"""The harness's top floor: ``portabench``'s commands (``cli``), what a run selects (``selection``), the asv
process it drives (``asv_process``), the merging of its results (``results_merge``), the run itself
(``runner``), the inputs built before asv starts (``prefill``), asv's configuration (``asv_config``),
regression tracking (``tracking``, judging pairs of result sets through ``compare``) and ``scale``.

It imports the kernels, the suite's configuration and the reports; nothing imports it. What the floors
below share with it lives one floor down, in the harness's other modules (``portabench.harness``).
"""
