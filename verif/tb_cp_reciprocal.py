"""cocotb testbench of ``cp_reciprocal``: its scenario table (``verif/scenarios/cp_reciprocal.py``) and a reset
mid-stream checked against :func:`trainforge.golden.caterpillar.goldschmidt.reciprocal_unit`."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.caterpillar import goldschmidt as golden
from trainforge.cocotb_streams import StreamSink, StreamSource, check_no_ready_path

import scenarios.cp_reciprocal as table
from scenario import table_test
from regression import regression_test
from tbutil import start


def random_values(bench, generator, count):
    """Values spread over every magnitude: a random bit length, then random bits below the leading one."""
    width = bench.params["width"]
    lengths = generator.integers(1, width, size=count, endpoint=True)
    low = generator.integers(0, 1 << 62, size=count) & ((1 << (lengths - 1)) - 1)
    return (1 << (lengths - 1)) | low


def attach(bench, valid_probability, ready_probability):
    return (StreamSource(bench.dut, "i_value", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_result", bench.cycle, bench.rng, ready_probability))


async def run_and_check(bench, values, ports):
    source, sink = ports
    before_received = len(sink.received)
    values = [int(value) for value in values]
    source.send(values)
    expected = golden.reciprocal_unit(values, **bench.params)
    latency = golden.unit_latency(bench.params["iterations"])
    await bench.wait_until(lambda: len(sink.received) >= before_received + len(values),
                           timeout=20 * latency * len(values) + 100, what=f"{len(values)} reciprocals")
    for _ in range(latency + 4):  # nothing extra may follow
        await RisingEdge(bench.dut.clk)
    received = sink.received[before_received:]
    assert len(received) == len(values), f"expected {len(values)} results, got {len(received)} {bench.where()}"
    actual = np.array([bits for _, bits in received], dtype=np.int64)
    wrong = np.flatnonzero(actual != expected)
    assert wrong.size == 0, (f"1/{values[wrong[0]]}: expected {expected[wrong[0]]} got {actual[wrong[0]]} "
                             f"({wrong.size} mismatches) {bench.where()}")


scenario_table = table_test(table, (
    "Every scenario of the table: directed corners, values of every magnitude, stalls, cycles without "
    "stalls."
))


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset during a run drops it; the unit then computes a fresh run correctly."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 3)
    ports = attach(bench, 0.8, 0.5)
    source, sink = ports
    source.send([int(value) for value in random_values(bench, generator, 30)])
    for _ in range(bench.rng.randrange(5, 40)):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_result__valid.value == 0, f"o_result still valid after reset {bench.where()}"
    assert dut.i_value__ready.value == 1, f"not ready for a value after reset {bench.where()}"
    await run_and_check(bench, random_values(bench, generator, 30), ports)


@cocotb.test()
async def no_ready_path(dut):
    """``i_value.ready`` never follows ``o_result.ready`` within a cycle (the output stage's ready is a register)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
