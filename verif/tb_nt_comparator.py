"""cocotb testbench of ``nt_comparator``: its scenario table, and a reset mid-stream against the golden model."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.neurotrainer.comparator import nt_comparator
from trainforge.cocotb_streams import StreamSink, StreamSource, check_no_ready_path, pack, unpack

import scenarios.nt_comparator as table
from scenario import table_test
from regression import regression_test
from tbutil import start


def windows(bench, count, value_range=(-32768, 32767), sizes=(1, 4, 9)):
    """Rows of random pooling windows (r*r elements each, r in 1..3); narrow ranges give ties."""
    generator = np.random.default_rng(bench.seed)
    lengths = generator.choice(sizes, size=count)
    rows = int(lengths.sum())
    x = generator.integers(value_range[0], value_range[1], size=(rows, bench.component.lanes), endpoint=True)
    ends = np.cumsum(lengths)
    first = np.zeros(rows, dtype=bool)
    last = np.zeros(rows, dtype=bool)
    first[ends - lengths] = True
    last[ends - 1] = True
    return x, first, last


def encode(bench, x, first, last):
    layout = bench.component.row_layout
    return [pack(layout, {"x": [int(v) for v in x[row]], "first": int(first[row]), "last": int(last[row])})
            for row in range(len(x))]


def decode(bench, received):
    layout = bench.component.result_layout
    views = [unpack(layout, payload) for _, payload in received]
    values = np.array([[int(v) for v in view.value] for view in views], dtype=np.int64)
    indices = np.array([[int(i) for i in view.index] for view in views], dtype=np.int64)
    return values.reshape(-1, bench.component.lanes), indices.reshape(-1, bench.component.lanes)


def attach(bench, valid_probability, ready_probability):
    return (StreamSource(bench.dut, "i_row", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_max", bench.cycle, bench.rng, ready_probability))


async def stream_and_check(bench, source, sink, rows, label):
    expected_values, expected_indices = nt_comparator(*rows, **bench.params)
    before = len(sink.received)
    source.send(encode(bench, *rows))
    await bench.wait_until(lambda: source.idle and len(sink.received) >= before + len(expected_values),
                           timeout=40 * len(rows[0]) + 100, what=f"{len(expected_values)} maxima ({label})")
    for _ in range(5):
        await RisingEdge(bench.dut.clk)
    values, indices = decode(bench, sink.received[before:])
    assert values.shape == expected_values.shape, \
        f"{label}: expected {len(expected_values)} results, got {len(values)} {bench.where()}"
    for name, actual, expected in (("maximum", values, expected_values), ("index", indices, expected_indices)):
        bad = np.argwhere(actual != expected)
        assert bad.size == 0, (f"{label}: window {bad[0][0]} lane {bad[0][1]} {name} expected "
                               f"{expected[tuple(bad[0])]} got {actual[tuple(bad[0])]} {bench.where()}")


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/nt_comparator.py``: maxima and indices in order, full-rate "
    "results on time."
))


@cocotb.test()
async def reset_mid_stream(dut):
    bench = await start(dut)
    source, sink = attach(bench, valid_probability=0.8, ready_probability=0.5)
    source.send(encode(bench, *windows(bench, 40)))
    for _ in range(bench.rng.randrange(10, 60)):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_max__valid.value == 0, f"o_max still valid after reset {bench.where()}"
    x, first, last = windows(bench, 40)
    first[0] = False  # the reset window: maximum 0 at index 0
    await stream_and_check(bench, source, sink, (x, first, last), "after reset")


@cocotb.test()
async def no_combinational_ready_path(dut):
    """The input's ``ready`` never follows the output's ``ready`` within a cycle (the output is a StreamStage)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
