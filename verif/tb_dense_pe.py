"""cocotb testbench of ``dense_pe``: its scenario table (shared with the golden model's test), a reset mid-stream."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.dense_pe import dense_pe, wrap
from trainforge.cocotb_streams import StreamSink, StreamSource, check_no_ready_path, pack
from trainforge.spec.mac import is_float

import scenarios.dense_pe as table
from scenario import rng_for, table_test
from regression import regression_test
from tbutil import start


def operand_range(component):
    if component.is_signed:
        return -(1 << (component.width - 1)), (1 << (component.width - 1)) - 1
    return 0, (1 << component.width) - 1


def random_rows(bench, count, clear_probability=0.15, read_probability=0.3):
    """Random operands and flags; the first row always clears. FP MACs: random values (a few zeros) as bit patterns."""
    if is_float(bench.params):
        rows = table.random_float_rows(rng_for(bench.seed, "reset", count), bench.params, count,
                                       clear_probability, read_probability)
        return (np.array([row["a"] for row in rows]), np.array([row["b"] for row in rows]),
                np.array([bool(row["clear"]) for row in rows]), np.array([bool(row["read"]) for row in rows]))
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
    if is_float(bench.params):
        return bits.astype(np.uint32)
    return wrap(bits, bench.component.acc_width, bench.component.is_signed)


def attach(bench, valid_probability, ready_probability):
    """One source on ``i_row`` and one sink on ``o_sum`` for the whole test."""
    return (StreamSource(bench.dut, "i_row", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_sum", bench.cycle, bench.rng, ready_probability))


scenario_table = table_test(
    table,
    """Every scenario of ``verif/scenarios/dense_pe.py``: random rows with backpressure, full rate with the
    latency of the spec, zeros, wrapping extremes (integer) or signed zeros, Inf/NaN rows and cancellation (FP);
    the same table the golden model meets in-process.""")


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


@cocotb.test()
async def ready_has_no_path_from_o_sum(dut):
    """``i_row.ready`` does not follow ``o_sum.ready`` within a cycle (the output stage's ready is a register)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
