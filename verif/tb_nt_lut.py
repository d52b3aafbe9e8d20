"""cocotb testbench of ``nt_lut``: its scenario table, and a reset mid-stream against :func:`~trainforge.golden.neurotrainer.lut.nt_lut`."""
import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

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


@cocotb.test()
async def empty_table_stage_takes_an_input_while_the_output_stalls(dut):
    """With ``o_y`` stalled the LUT holds three values: two in its output stage (a StreamStage holds two) and one
    in its table stage, which takes an input whenever it is empty (``hw/neurotrainer/lut.py``), also when the
    output stage is full; a fourth waits. Then the three leave in order, with the values of the reference."""
    bench = await start(dut)
    xs = [-3000, 0, 12345, 777]
    dut.o_y__ready.value = 0
    accepted = []

    async def offer(x, cycles):
        """Offer ``x`` for up to ``cycles`` cycles; True if it was taken."""
        dut.i_x__valid.value = 1
        dut.i_x__payload.value = x & 0xFFFF
        for _ in range(cycles):
            await ReadOnly()
            taken = int(dut.i_x__ready.value)
            await RisingEdge(dut.clk)
            if taken:
                dut.i_x__valid.value = 0
                return True
        dut.i_x__valid.value = 0
        return False

    for x in xs[:2]:
        assert await offer(x, 4), f"input {x} not taken with the LUT empty {bench.where()}"
    for _ in range(4):   # the first two move into the output stage: the table stage is empty again
        await RisingEdge(dut.clk)
    assert await offer(xs[2], 2), (f"the empty table stage did not take an input while o_y stalled with two values "
                                   f"held {bench.where()}")
    assert not await offer(xs[3], 6), f"a fourth input was taken while o_y stalled {bench.where()}"
    dut.o_y__ready.value = 1
    for _ in range(8):
        await ReadOnly()
        if int(dut.o_y__valid.value):
            accepted.append(int(dut.o_y__payload.value))
        await RisingEdge(dut.clk)
    expected = [y & 0xFFFF for y in table.reference(bench.params, xs[:3])]
    assert accepted == expected, f"outputs after the stall: expected {expected}, got {accepted} {bench.where()}"


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
