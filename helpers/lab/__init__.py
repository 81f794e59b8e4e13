"""The measurement lab: runs that produce the committed results under ``results/``.

Each module is a ``python -m helpers.lab.<name>`` entry point with ``--help``;
``scripts/gpu/*.sh`` only call those.  Lessons read what they wrote through
:mod:`helpers.results`, or re-measure on the reader's GPU.

* :mod:`.bench`: the size sweep (notebook 05), with :mod:`.sweep_analysis` and :mod:`.sweep_plots`;
* :mod:`.roofline`: the fused-kernel variants toward the memory roofline (notebook 07);
* :mod:`.ncu`: Nsight Compute's DRAM bytes beside the ledger (notebook 04);
* :mod:`.transfers`: host-device copy bandwidth (notebook 08);
* :mod:`.multigpu`: two GPUs, peer copies and a split pipeline.
"""
