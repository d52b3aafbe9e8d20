"""cocotb driver of ``td_tile`` or ``td_pe`` for ``trainforge tensordash rtl-check`` and ``speedup --rtl``:
one prepared stream, full rate.

The stream (``a`` (T, cols, lanes), ``b`` (T, rows, lanes), ``clear``,
``read``; a PE is 1 x 1), as built by
:func:`trainforge.golden.tensordash.layer.tile_program` or
:mod:`trainforge.commands.tensordash.rtl_speedup`, is read from the ``.npz`` file
named by ``TD_LAYER_STIMULUS``; every result and the cycle it left the block
are written to the ``.npz`` file named by ``TD_LAYER_RESULTS``. The
comparison with the golden model is made by the caller
(:func:`trainforge.commands.tensordash.rtl.run_stream`), which reports the agreement.
"""
import os

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from tb_td_pe import Harness, attach
from tbutil import start


@cocotb.test()
async def run_stream(dut):
    """Send the stream with always-valid source and always-ready sink; record results and their cycles."""
    bench = await start(dut)
    harness = Harness(bench)
    stimulus = np.load(os.environ["TD_LAYER_STIMULUS"])
    a, b, clear, read = stimulus["a"], stimulus["b"], stimulus["clear"], stimulus["read"]
    source, sink = attach(bench, 1.0, 1.0)
    expected = int(read.sum())
    source.send(harness.encode(a, b, clear, read))
    await bench.wait_until(lambda: source.idle and len(sink.received) >= expected,
                           timeout=2 * len(read) + 200, what=f"{expected} results")
    for _ in range(3):
        await RisingEdge(dut.clk)
    first = source.sent[0][0]
    np.savez(os.environ["TD_LAYER_RESULTS"],
             values=np.array([harness.decode(bits) for _, bits in sink.received]),
             cycles=np.array([cycle - first for cycle, _ in sink.received]))
