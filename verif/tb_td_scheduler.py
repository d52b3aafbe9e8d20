"""cocotb testbench of ``td_scheduler``: the scenario table ``verif/scenarios/td_scheduler.py`` on the RTL.

The table holds hand-worked, corner and random candidate vectors (0.01% to
100% dense, random visible rows) with random valid and ready; at full rate
every schedule must leave one cycle after its vector (one vector per cycle).
"""
import cocotb

import scenarios.td_scheduler as table
from scenario import table_test
from regression import regression_test
from tbutil import start


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/td_scheduler.py``: schedules as the reference, one cycle later "
    "at full rate."
))


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
