"""cocotb testbench of ``dense_pe`` against :func:`trainforge.golden.dense_pe.dense_pe`."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.dense_pe import dense_pe, wrap

from streams import StreamSink, StreamSource, pack
from tbutil import start


def operand_range(component):
    if component.is_signed:
        return -(1 << (component.width - 1)), (1 << (component.width - 1)) - 1
    return 0, (1 << component.width) - 1


def random_rows(bench, count, clear_probability=0.15, read_probability=0.3):
    """Random operands and flags; the first row always clears."""
    generator = np.random.default_rng(bench.seed)
    low, high = operand_range(bench.component)
    lanes = bench.component.lanes
    a = generator.integers(low, high, size=(count, lanes), endpoint=True)
    b = generator.integers(low, high, size=(count, lanes), endpoint=True)
    clear = generator.random(count) < clear_probability
    read = generator.random(count) < read_probability
    clear[0] = True
    read[-1] = True
    return a, b, clear, read


def encode(bench, a, b, clear, read):
    layout = bench.component.row_layout
    return [pack(layout, {"a": [int(v) for v in a[row]], "b": [int(v) for v in b[row]],
                          "clear": int(clear[row]), "read": int(read[row])})
            for row in range(len(a))]


def decode_results(bench, received):
    bits = np.array([payload for _, payload in received], dtype=np.uint64)
    return wrap(bits, bench.component.acc_width, bench.component.is_signed)


def attach(bench, valid_probability, ready_probability):
    """One source on ``i_row`` and one sink on ``o_sum`` for the whole test."""
    return (StreamSource(bench.dut, "i_row", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_sum", bench.cycle, bench.rng, ready_probability))


async def stream_and_check(bench, source, sink, a, b, clear, read, label):
    """Send the rows, wait for every result and compare them with the golden model."""
    expected = dense_pe(a, b, clear, read, **bench.params)
    before = len(sink.received)
    source.send(encode(bench, a, b, clear, read))
    await bench.wait_until(lambda: source.idle and len(sink.received) >= before + len(expected),
                           timeout=40 * len(a) + 100, what=f"{len(expected)} results ({label})")
    for _ in range(5):  # nothing extra may follow
        await RisingEdge(bench.dut.clk)
    actual = decode_results(bench, sink.received[before:])
    assert len(actual) == len(expected), \
        f"{label}: expected {len(expected)} results, got {len(actual)} {bench.where()}"
    mismatches = np.flatnonzero(actual != expected)
    assert mismatches.size == 0, (
        f"{label}: result {mismatches[0]} expected {expected[mismatches[0]]} got {actual[mismatches[0]]}"
        f" ({mismatches.size} mismatches) {bench.where()}")


@cocotb.test()
async def random_rows_with_backpressure(dut):
    """Random operands and commands, random valid gaps and random ready on the output."""
    bench = await start(dut)
    source, sink = attach(bench, valid_probability=0.7, ready_probability=0.5)
    await stream_and_check(bench, source, sink, *random_rows(bench, 400), label="random rows")


@cocotb.test()
async def one_row_per_cycle(dut):
    """Without stalls the PE takes a row every cycle and answers LATENCY cycles after a read row."""
    bench = await start(dut)
    a, b, clear, read = random_rows(bench, 200, read_probability=0.5)
    source, sink = attach(bench, valid_probability=1.0, ready_probability=1.0)
    await stream_and_check(bench, source, sink, a, b, clear, read, "throughput")
    accepted = np.array([cycle for cycle, _ in source.sent])
    gaps = np.flatnonzero(np.diff(accepted) != 1)
    assert gaps.size == 0, \
        f"throughput: row {gaps[0] + 1} accepted at cycle {accepted[gaps[0] + 1]}, expected {accepted[gaps[0]] + 1} {bench.where()}"
    expected_cycles = accepted[read] + bench.component.LATENCY
    actual_cycles = np.array([cycle for cycle, _ in sink.received])
    late = np.flatnonzero(actual_cycles != expected_cycles)
    assert late.size == 0, (f"latency: result {late[0]} expected at cycle {expected_cycles[late[0]]}, "
                            f"got {actual_cycles[late[0]]} {bench.where()}")


@cocotb.test()
async def corner_operands(dut):
    """All-zero rows, then maximum-magnitude operands long enough to wrap the accumulator."""
    bench = await start(dut)
    component = bench.component
    rows, lanes = 64, component.lanes
    low, high = operand_range(component)
    zeros = np.zeros((rows, lanes), dtype=np.int64)
    read_all = np.ones(rows, dtype=bool)
    first = np.zeros(rows, dtype=bool)
    first[0] = True
    source, sink = attach(bench, valid_probability=0.8, ready_probability=0.6)
    await stream_and_check(bench, source, sink, zeros, zeros, first, read_all, "all zeros")
    extreme = np.full((rows, lanes), low if component.is_signed else high, dtype=np.int64)
    await stream_and_check(bench, source, sink, extreme, extreme, first, read_all, "largest products")
    mixed = np.full((rows, lanes), high, dtype=np.int64)
    await stream_and_check(bench, source, sink, mixed, extreme, first, read_all, "largest mixed products")


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset in the middle of a stream drops the pipeline and the accumulator; the PE then runs on."""
    bench = await start(dut)
    source, sink = attach(bench, valid_probability=0.8, ready_probability=0.5)
    a, b, clear, read = random_rows(bench, 100)
    source.send(encode(bench, a, b, clear, read))
    for _ in range(bench.rng.randrange(10, 60)):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_sum__valid.value == 0, f"o_sum still valid after reset {bench.where()}"
    before = len(sink.received)
    # After reset the accumulator is zero: the new stream deliberately starts without clear.
    a, b, clear, read = random_rows(bench, 120)
    clear[0] = False
    expected = dense_pe(a, b, clear, read, **bench.params)
    source.send(encode(bench, a, b, clear, read))
    await bench.wait_until(lambda: source.idle and len(sink.received) >= before + len(expected),
                           timeout=5000, what="results after reset")
    actual = decode_results(bench, sink.received[before:])
    assert len(actual) == len(expected) and np.array_equal(actual, expected), \
        f"after reset: expected {expected.tolist()[:8]}..., got {actual.tolist()[:8]}... {bench.where()}"
