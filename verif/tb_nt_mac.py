"""cocotb testbench of ``nt_mac`` against :func:`trainforge.golden.neurotrainer.mac.nt_mac`."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.neurotrainer.mac import nt_mac

from streams import StreamSink, StreamSource, pack, unpack
from tbutil import start


def random_rows(bench, count, wide_probability=0.7, read_probability=0.3, clear_probability=0.1):
    """Random words, mixed 32/16-bit rows and SR flags; the first row clears, the last reads."""
    generator = np.random.default_rng(bench.seed)
    lanes = bench.component.lanes
    # Small-magnitude words keep most sums in range; every fourth row uses full-range words to saturate.
    scale = np.where(generator.random(count) < 0.25, 1 << 32, 1 << 20)
    a = generator.integers(-scale, scale, endpoint=False) & 0xFFFFFFFF
    x = generator.integers(-scale[:, None], scale[:, None], size=(count, lanes)) & 0xFFFFFFFF
    wide = generator.random(count) < wide_probability
    sr = generator.random(count) < 0.8
    clear = generator.random(count) < clear_probability
    read = generator.random(count) < read_probability
    clear[0] = True
    read[-1] = True
    return a, x, wide, sr, clear, read


def encode(bench, a, x, wide, sr, clear, read):
    layout = bench.component.row_layout
    return [pack(layout, {"a": int(a[row]), "x": [int(v) for v in x[row]], "wide": int(wide[row]),
                          "sr": int(sr[row]), "clear": int(clear[row]), "read": int(read[row])})
            for row in range(len(a))]


def decode(bench, received):
    layout = bench.component.result_layout
    return np.array([[int(word) for word in unpack(layout, payload)] for _, payload in received],
                    dtype=np.uint64).reshape(-1, bench.component.lanes)


def attach(bench, valid_probability, ready_probability):
    return (StreamSource(bench.dut, "i_row", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_y", bench.cycle, bench.rng, ready_probability))


def compare(bench, actual, expected, label):
    assert actual.shape == expected.shape, \
        f"{label}: expected {expected.shape[0]} results, got {actual.shape[0]} {bench.where()}"
    bad = np.argwhere(actual != expected)
    assert bad.size == 0, (
        f"{label}: result {bad[0][0]} lane {bad[0][1]} expected {int(expected[tuple(bad[0])]):#010x} "
        f"got {int(actual[tuple(bad[0])]):#010x} ({len(bad)} mismatches) {bench.where()}")


async def stream_and_check(bench, source, sink, rows, label, history=None):
    """Send ``rows``; the golden model runs over ``history + rows`` (the random state continues)."""
    history = rows if history is None else tuple(np.concatenate([h, r]) for h, r in zip(history, rows))
    expected_all = nt_mac(*history, **bench.params)
    expected = expected_all[len(expected_all) - int(np.count_nonzero(rows[-1])):]
    before = len(sink.received)
    source.send(encode(bench, *rows))
    await bench.wait_until(lambda: source.idle and len(sink.received) >= before + len(expected),
                           timeout=40 * len(rows[0]) + 100, what=f"{len(expected)} results ({label})")
    for _ in range(5):
        await RisingEdge(bench.dut.clk)
    compare(bench, decode(bench, sink.received[before:]), expected, label)
    return history


@cocotb.test()
async def random_rows_with_backpressure(dut):
    """Random operands, modes and SR flags with random valid gaps and random ready on o_y."""
    bench = await start(dut)
    source, sink = attach(bench, valid_probability=0.7, ready_probability=0.5)
    await stream_and_check(bench, source, sink, random_rows(bench, 300), "random rows")


@cocotb.test()
async def one_row_per_cycle(dut):
    """Without stalls the array takes a row every cycle and answers LATENCY cycles after a read row."""
    bench = await start(dut)
    rows = random_rows(bench, 150, read_probability=0.5)
    source, sink = attach(bench, valid_probability=1.0, ready_probability=1.0)
    await stream_and_check(bench, source, sink, rows, "throughput")
    accepted = np.array([cycle for cycle, _ in source.sent])
    gaps = np.flatnonzero(np.diff(accepted) != 1)
    assert gaps.size == 0, \
        f"throughput: row {gaps[0] + 1} accepted at cycle {accepted[gaps[0] + 1]}, expected {accepted[gaps[0]] + 1} {bench.where()}"
    expected_cycles = accepted[rows[-1]] + bench.component.LATENCY
    actual_cycles = np.array([cycle for cycle, _ in sink.received])
    late = np.flatnonzero(actual_cycles != expected_cycles)
    assert late.size == 0, (f"latency: result {late[0]} expected at cycle {expected_cycles[late[0]]}, "
                            f"got {actual_cycles[late[0]]} {bench.where()}")


def constant_rows(bench, count, a_word, x_word, wide, sr=True):
    lanes = bench.component.lanes
    flags = np.ones(count, dtype=bool)
    clear = np.zeros(count, dtype=bool)
    clear[0] = True
    return (np.full(count, a_word, dtype=np.int64), np.full((count, lanes), x_word, dtype=np.int64),
            flags & wide, flags & sr, clear, flags)


@cocotb.test()
async def corner_operands(dut):
    """All zeros, then saturation at both ends in 32- and 16-bit modes (random state carried across)."""
    bench = await start(dut)
    source, sink = attach(bench, valid_probability=0.8, ready_probability=0.6)
    history = await stream_and_check(bench, source, sink, constant_rows(bench, 20, 0, 0, True), "all zeros")
    cases = [
        ("32-bit positive saturation", 0x7FFFFFFF, 0x7FFFFFFF, True),
        ("32-bit negative saturation", 0x80000000, 0x7FFFFFFF, True),
        ("32-bit largest product", 0x80000000, 0x80000000, True),
        ("16-bit positive saturation", 0x7FFF7FFF, 0x7FFF7FFF, False),
        ("16-bit negative saturation", 0x80007FFF, 0x7FFF8000, False),
        ("smallest negative steps (floor vs SR)", 0xFFFFFFFF, 0x00000001, True),
    ]
    for label, a_word, x_word, wide in cases:
        history = await stream_and_check(bench, source, sink, constant_rows(bench, 24, a_word, x_word, wide),
                                         label, history)


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset drops the pipeline, zeroes the accumulators and restarts the random generators."""
    bench = await start(dut)
    source, sink = attach(bench, valid_probability=0.8, ready_probability=0.5)
    source.send(encode(bench, *random_rows(bench, 100)))
    for _ in range(bench.rng.randrange(10, 60)):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_y__valid.value == 0, f"o_y still valid after reset {bench.where()}"
    rows = random_rows(bench, 120)
    rows[4][0] = False  # no clear: the accumulators must be zero after reset
    await stream_and_check(bench, source, sink, rows, "after reset")
