"""Learned tasks of the two papers on the GPU (issue 8).

``collision_recall`` and ``random_keys`` (BL §4.1, App. E.5) train the shared
2-layer, width-64, 4-head × 16 backbone with the BL op and the baseline cores;
``swap_tracking`` (AM §3.2) trains DeltaFormers against Transformers.  See
:mod:`.data`, :mod:`.models`, :mod:`.recurrences`, :mod:`.train`,
:mod:`.sweep`, :mod:`.plots`; the command line is :mod:`.cli`
(``assocmem gpu train|sweep`` or ``python -m assocmem.gpu.tasks``).
"""
from .names import TASKS               # noqa: F401  (no torch import here)
