"""cocotb testbench of ``td_tile``: its scenario table, and the PE testbench's reset and occupancy tests on the tile.

The reset test's :class:`tb_td_pe.Harness` sees a
:class:`~trainforge.hw.tensordash.tile.TDTile` and switches to tile stimulus
(``a`` per column, ``b`` per row) and the tile golden model.
"""
import cocotb

import scenarios.td_tile as table
from scenario import table_test
from regression import regression_test
from tb_td_pe import gaps_and_stalls, occupancy_and_ready, reset_mid_stream
from tbutil import start

__all__ = ["scenario_table", "gaps_and_stalls", "reset_mid_stream", "occupancy_and_ready", "random_regression"]


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/td_tile.py``: values as the reference, cycles as the golden tile "
    "cycle model at full rate."
))


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
