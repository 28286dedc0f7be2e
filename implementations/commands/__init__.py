"""The command layer: ``portabench``'s commands (``cli``), what a run selects (``selection``), the asv
process it drives (``asv_process``), the merging of its results (``results_merge``), the run itself
(``runner``), the inputs built before asv starts (``prefill``), asv's configuration (``asv_config``) and
regression tracking (``tracking``).

It sits above the kernels, the suite and the reports and imports from them; nothing below imports
from it. What lower layers share with it stays below: the run plan (``implementations/plan.py``, read
back by the suite) and the machine record (``implementations/machine/``, read by kernels, the
reference systems and the reports).
"""
