"""cocotb testbench of ``nt_mac``: its scenario table, and a reset mid-stream against the golden model."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.neurotrainer.mac import nt_mac
from trainforge.cocotb_streams import StreamSink, StreamSource, check_no_ready_path, pack, unpack

import scenarios.nt_mac as table
from scenario import table_test
from regression import regression_test
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


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/nt_mac.py``: accumulator words in order, full-rate results on "
    "time."
))


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


@cocotb.test()
async def no_combinational_ready_path(dut):
    """The input's ``ready`` never follows the output's ``ready`` within a cycle (the output is a StreamStage)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
