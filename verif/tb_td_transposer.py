"""cocotb testbench of ``td_transposer``: its scenario table (``verif/scenarios/td_transposer.py``) and a reset mid-group.

The reset test compares with :func:`trainforge.golden.tensordash.transposer.transpose_blocks`.
"""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.tensordash.transposer import transpose_blocks
from trainforge.cocotb_streams import StreamSink, StreamSource, pack, unpack

from scenario import table_test
from regression import regression_test
import scenarios.td_transposer as table
from tbutil import start


def random_blocks(bench, groups):
    generator = np.random.default_rng(bench.seed)
    size, width = bench.component.size, bench.component.width
    blocks = generator.integers(0, 1 << min(width, 62), size=(groups * size, size))
    blocks[:size] = 0                      # an all-zero group
    blocks[size:2 * size] = (1 << min(width, 62)) - 1   # an all-ones group
    return blocks


async def check(bench, source, sink, blocks, label):
    layout = bench.component.block_layout
    before = len(sink.received)
    source.send([pack(layout, [int(v) for v in block]) for block in blocks])
    await bench.wait_until(lambda: len(sink.received) >= before + len(blocks), timeout=20 * len(blocks) + 100,
                           what=f"{len(blocks)} blocks ({label})")
    expected = transpose_blocks(blocks)
    for k, (_, bits) in enumerate(sink.received[before:]):
        view = unpack(layout, bits)
        got = [int(view[i]) for i in range(bench.component.size)]
        assert got == expected[k].tolist(), f"{label}: block {k} expected {expected[k].tolist()} got {got} {bench.where()}"


@cocotb.test()
async def reset_mid_group(dut):
    """A reset in the middle of a group restarts the fill phase."""
    bench = await start(dut)
    source = StreamSource(dut, "i_block", bench.cycle, bench.rng, 1.0)
    sink = StreamSink(dut, "o_block", bench.cycle, bench.rng, 1.0)
    blocks = random_blocks(bench, 4)
    source.send([pack(bench.component.block_layout, [int(v) for v in block]) for block in blocks[:3]])
    for _ in range(2):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset()
    sink.received.clear()
    await check(bench, source, sink, blocks, "after reset")


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/td_transposer.py``: groups transposed as numpy transposes them."
))


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
