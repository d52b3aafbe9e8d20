"""cocotb testbench of ``cp_reciprocal`` against :func:`trainforge.golden.caterpillar.goldschmidt.reciprocal_unit`."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.caterpillar import goldschmidt as golden

from streams import StreamSink, StreamSource
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


async def run_and_check(bench, values, ports, check_cycles=False):
    source, sink = ports
    before_sent, before_received = len(source.sent), len(sink.received)
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
    if check_cycles:
        accepted = np.array([cycle for cycle, _ in source.sent[before_sent:]])
        delivered = np.array([cycle for cycle, _ in received])
        assert np.array_equal(delivered - accepted, np.full(len(values), latency)), (
            f"latency expected {latency} got {(delivered - accepted).tolist()} {bench.where()}")
        assert np.array_equal(np.diff(accepted), np.full(len(values) - 1, latency)), (
            f"interval expected {latency} got {np.diff(accepted).tolist()} {bench.where()}")


@cocotb.test()
async def random_values_with_backpressure(dut):
    """Values of every magnitude, random valid gaps and ready."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed)
    await run_and_check(bench, random_values(bench, generator, 120), attach(bench, 0.6, 0.5))


@cocotb.test()
async def cycle_exact_without_stalls(dut):
    """No backpressure: each result arrives unit_latency cycles after its value, one value per latency."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 1)
    await run_and_check(bench, random_values(bench, generator, 40), attach(bench, 1.0, 1.0), check_cycles=True)


@cocotb.test()
async def directed_corners(dut):
    """Zero (saturates), one LSB, the largest value, powers of two and their neighbours, table boundaries."""
    bench = await start(dut)
    width, frac, table_bits = bench.params["width"], bench.params["frac"], bench.params["table_bits"]
    values = [0, 0, 1, (1 << width) - 1, 1 << frac, (1 << frac) - 1, (1 << frac) + 1]
    values += [1 << bit for bit in range(width)] + [(1 << bit) - 1 for bit in range(2, width + 1)]
    # The first value of each lookup-table interval, at the fraction's own scale.
    values += [(1 << (frac - 1)) + (index << (frac - 1 - table_bits)) for index in range(1 << table_bits)]
    values = [value for value in values if value < 1 << width]  # frac may equal width
    await run_and_check(bench, values, attach(bench, 0.8, 0.7))


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
