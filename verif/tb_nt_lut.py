"""cocotb testbench of ``nt_lut``: its scenario table, and a reset mid-stream against :func:`~trainforge.golden.neurotrainer.lut.nt_lut`."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.neurotrainer.lut import nt_lut
from trainforge.cocotb_streams import StreamSink, StreamSource, check_no_ready_path

import scenarios.nt_lut as table
from scenario import table_test
from regression import regression_test
from tbutil import start


def attach(bench, valid_probability, ready_probability):
    return (StreamSource(bench.dut, "i_x", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_y", bench.cycle, bench.rng, ready_probability))


def to_signed(words):
    words = np.asarray(words, dtype=np.int64)
    return words - ((words >> 15) & 1) * (1 << 16)


async def stream_and_check(bench, source, sink, x, label):
    expected = nt_lut(x, **bench.params)
    before = len(sink.received)
    source.send([int(v) & 0xFFFF for v in x])
    await bench.wait_until(lambda: source.idle and len(sink.received) >= before + len(x),
                           timeout=40 * len(x) + 100, what=f"{len(x)} outputs ({label})")
    for _ in range(4):
        await RisingEdge(bench.dut.clk)
    got = to_signed([payload for _, payload in sink.received[before:]])
    assert len(got) == len(expected), f"{label}: expected {len(expected)} outputs, got {len(got)} {bench.where()}"
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, (f"{label}: x = {int(x[bad[0]])} expected {int(expected[bad[0]])} got {int(got[bad[0]])} "
                           f"({bad.size} mismatches) {bench.where()}")


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/nt_lut.py``: outputs in order, full-rate outputs LATENCY cycles "
    "after their input."
))


@cocotb.test()
async def reset_mid_stream(dut):
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 2)
    source, sink = attach(bench, valid_probability=0.8, ready_probability=0.3)
    source.send([int(v) & 0xFFFF for v in generator.integers(-(1 << 15), 1 << 15, size=100)])
    for _ in range(bench.rng.randrange(5, 40)):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_y__valid.value == 0, f"o_y still valid after reset {bench.where()}"
    await stream_and_check(bench, source, sink, generator.integers(-(1 << 15), 1 << 15, size=100), "after reset")


@cocotb.test()
async def no_combinational_ready_path(dut):
    """The input's ``ready`` never follows the output's ``ready`` within a cycle (the output is a StreamStage)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
