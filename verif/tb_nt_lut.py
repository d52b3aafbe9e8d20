"""cocotb testbench of ``nt_lut`` against :func:`trainforge.golden.neurotrainer.lut.nt_lut`."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.neurotrainer.lut import nt_lut

from streams import StreamSink, StreamSource
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


@cocotb.test()
async def random_inputs_with_backpressure(dut):
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed)
    source, sink = attach(bench, valid_probability=0.7, ready_probability=0.5)
    await stream_and_check(bench, source, sink, generator.integers(-(1 << 15), 1 << 15, size=400), "random")


@cocotb.test()
async def corner_inputs(dut):
    """All zeros, both extremes, and both sides of every segment boundary."""
    bench = await start(dut)
    source, sink = attach(bench, valid_probability=0.8, ready_probability=0.7)
    await stream_and_check(bench, source, sink, np.zeros(20, dtype=np.int64), "all zeros")
    gap = 1 << (16 - bench.params["table_bits"])
    boundaries = np.arange(-(1 << 15), 1 << 15, gap, dtype=np.int64)
    if len(boundaries) > 128:
        boundaries = boundaries[np.linspace(0, len(boundaries) - 1, 128).astype(int)]
    edges = np.concatenate([[-(1 << 15), (1 << 15) - 1], boundaries, boundaries - 1, boundaries + gap - 1])
    edges = ((edges + (1 << 15)) % (1 << 16)) - (1 << 15)
    await stream_and_check(bench, source, sink, edges, "segment boundaries and extremes")


@cocotb.test()
async def one_input_per_cycle(dut):
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 1)
    source, sink = attach(bench, valid_probability=1.0, ready_probability=1.0)
    x = generator.integers(-(1 << 15), 1 << 15, size=120)
    await stream_and_check(bench, source, sink, x, "throughput")
    accepted = np.array([cycle for cycle, _ in source.sent])
    produced = np.array([cycle for cycle, _ in sink.received])
    assert np.all(np.diff(accepted) == 1), f"throughput: input gaps {np.flatnonzero(np.diff(accepted) != 1)} {bench.where()}"
    late = np.flatnonzero(produced != accepted + bench.component.LATENCY)
    assert late.size == 0, (f"latency: output {late[0]} expected in cycle {accepted[late[0]] + bench.component.LATENCY}"
                            f", got {produced[late[0]]} {bench.where()}")


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
