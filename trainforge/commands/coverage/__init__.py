"""``trainforge coverage``: Verilator coverage of the blocks, merged per block (:mod:`trainforge.coverage`)."""
