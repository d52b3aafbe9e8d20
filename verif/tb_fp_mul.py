"""cocotb testbench of ``fp_mul``: its scenario table (shared with the golden model's test), and registered ready."""
import cocotb

from trainforge.cocotb_streams import check_no_ready_path

import scenarios.fp_mul as table
from scenario import table_test
from regression import regression_test
from tbutil import start

scenario_table = table_test(
    table,
    """Every scenario of ``verif/scenarios/fp_mul.py``: random and corner operands under valid gaps and
    backpressure, full rate with the latency of the spec; the same table the golden model meets in-process.""")


@cocotb.test()
async def ready_has_no_path_from_the_output(dut):
    """The input's ``ready`` does not follow the output's ``ready`` within a cycle (one registered clock enable)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
