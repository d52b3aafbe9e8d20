"""cocotb testbench of ``td_tile``: the PE testbench's tests, run on the tile through :class:`tb_td_pe.Harness`.

The harness sees a :class:`~trainforge.hw.tensordash.tile.TDTile` and switches
to tile stimulus (``a`` per column, ``b`` per row), the tile golden model and
the synchronized tile cycle model.
"""
from tb_td_pe import adversarial_cycle_exact, random_backpressure, random_sparsity_cycle_exact, reset_mid_stream

__all__ = ["random_sparsity_cycle_exact", "adversarial_cycle_exact", "random_backpressure", "reset_mid_stream"]
