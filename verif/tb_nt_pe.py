"""cocotb testbench of ``nt_pe``: a power-on read of both buffers, its scenario table (``verif/scenarios/nt_pe.py``),
and a reset mid-stream.

The table's scenarios run on the RTL through the PE's three input streams and its result
stream; without backpressure the result cycles and the program acceptance cycles must equal
the golden cycle model's.
"""
import cocotb
from cocotb.triggers import RisingEdge

from trainforge.cocotb_streams import StreamSink, StreamSource, check_no_ready_path

import scenarios.nt_pe as table
from scenario import Scenario, payload_shapes, run_on_rtl, to_bits
from regression import regression_test
from tbutil import start


def attach(bench):
    shapes = payload_shapes(bench.component)
    sources = {port: StreamSource(bench.dut, port, bench.cycle, bench.rng)
               for port, (direction, _) in shapes.items() if direction == "in"}
    sinks = {port: StreamSink(bench.dut, port, bench.cycle, bench.rng)
             for port, (direction, _) in shapes.items() if direction == "out"}
    return shapes, sources, sinks


async def run_scenario(bench, shapes, sources, sinks, scenario):
    """One scenario on the RTL: results (and, at full rate, their cycles) and program acceptance cycles."""
    def encode(port, item):
        return to_bits(shapes[port][1], item)

    predicted = table.golden(bench.params, scenario)
    timing = dict(scenario.timing)
    if "o_result" in predicted.cycles:
        timing.setdefault("o_result", predicted.cycles["o_result"])
    in_bits = Scenario(scenario.name, scenario.stimulus,
                       {port: [encode(port, item) for item in items] for port, items in scenario.expected.items()},
                       valid=scenario.valid, ready=scenario.ready, timing=timing)
    first_sent = {port: len(source.sent) for port, source in sources.items()}
    await run_on_rtl(bench, in_bits, sources, sinks, decode=lambda port, bits: int(bits), encode=encode)
    if "i_program" in predicted.cycles:
        start_cycle = min(cycle for port, source in sources.items() for cycle, _ in source.sent[first_sent[port]:])
        accepted = [cycle - start_cycle for cycle, _ in sources["i_program"].sent[first_sent["i_program"]:]]
        assert accepted == predicted.cycles["i_program"], (
            f"{scenario.name}: program acceptance cycles: golden model {predicted.cycles['i_program']}, "
            f"RTL {accepted} {bench.where()}")


@cocotb.test()
async def power_on_buffers_read_zero(dut):
    """Before any write, every BUF Input 1 word and BUF Input 2 row reads 0: two passes, one per half, read
    every word and row of it after a block of one word and one row (``scenarios.nt_pe.power_on_stimulus``).

    It must be the module's first test: the buffers keep what later tests write, even across resets.
    """
    bench = await start(dut)
    shapes, sources, sinks = attach(bench)
    stimulus = table.power_on_stimulus(bench.params)
    scenario = Scenario("power-on reads", stimulus, {"o_result": table.reference(bench.params, stimulus)})
    await run_scenario(bench, shapes, sources, sinks, scenario)


@cocotb.test()
async def scenario_table(dut):
    """Every scenario of ``verif/scenarios/nt_pe.py``, each from reset."""
    bench = await start(dut)
    shapes, sources, sinks = attach(bench)
    for index, scenario in enumerate(table.scenarios(bench.params, bench.seed)):
        if index:
            await bench.reset()
        await run_scenario(bench, shapes, sources, sinks, scenario)


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset drops the passes in flight, empties both buffers' halves and restarts the MAC's random state."""
    bench = await start(dut)
    shapes, sources, sinks = attach(bench)
    busy = table.scenarios(bench.params, bench.seed + 3)[1]
    for port, source in sources.items():
        source.follow(busy.valid.get(port, (1,)))
        source.send([to_bits(shapes[port][1], item) for item in busy.stimulus[port]])
    sinks["o_result"].follow(busy.ready["o_result"])
    for _ in range(bench.rng.randrange(20, 120)):
        await RisingEdge(dut.clk)
    for source in sources.values():
        source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_result__valid.value == 0, f"o_result still valid after reset {bench.where()}"
    await run_scenario(bench, shapes, sources, sinks, table.scenarios(bench.params, bench.seed + 4)[1])


@cocotb.test()
async def no_combinational_ready_path(dut):
    """No input's ``ready`` follows ``o_result.ready`` within a cycle (fill and program ready are registers)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream,
# each scenario through run_scenario (with its program acceptance check).
random_regression = regression_test(table, run_scenario=run_scenario)
