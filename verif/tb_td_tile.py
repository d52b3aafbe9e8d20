"""cocotb testbench of ``td_tile``: its scenario table, and the PE testbench's tests run on the tile through :class:`tb_td_pe.Harness`.

The harness sees a :class:`~trainforge.hw.tensordash.tile.TDTile` and switches
to tile stimulus (``a`` per column, ``b`` per row), the tile golden model and
the synchronized tile cycle model.
"""
import cocotb

import scenarios.td_tile as table
from scenario import run_table
from tb_td_pe import adversarial_cycle_exact, random_backpressure, random_sparsity_cycle_exact, reset_mid_stream
from tbutil import start

__all__ = ["scenario_table", "random_sparsity_cycle_exact", "adversarial_cycle_exact", "random_backpressure",
           "reset_mid_stream"]


@cocotb.test()
async def scenario_table(dut):
    """Every scenario of ``verif/scenarios/td_tile.py``: values as the reference, cycles as the golden tile cycle model at full rate."""
    bench = await start(dut)
    await run_table(bench, table)
