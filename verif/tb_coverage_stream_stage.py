"""cocotb testbench of the coverage tool's own tests (``verif/test_coverage.py``): ``stream_stage`` without backpressure.

The consumer is always ready, so the stage's skid register is never loaded:
the coverage summary must report the lines that load it as uncovered. The
transactions are still checked, so that the run is a valid test of the stage.
"""
import cocotb
from cocotb.triggers import RisingEdge

from trainforge.cocotb_streams import StreamSink, StreamSource
from scenario import rng_for
from tbutil import start


@cocotb.test()
async def no_backpressure(dut):
    """Random payloads with valid gaps into an always-ready consumer: every one leaves once, in order."""
    bench = await start(dut)
    source = StreamSource(dut, "i_stream", bench.cycle, bench.rng, valid_probability=0.6)
    sink = StreamSink(dut, "o_stream", bench.cycle, bench.rng, ready_probability=1.0)
    rng = rng_for(bench.seed, "no backpressure")
    top = (1 << bench.params["width"]) - 1
    payloads = [rng.randint(0, top) for _ in range(100)]
    source.send(payloads)
    await bench.wait_until(lambda: source.idle and len(sink.received) >= len(payloads),
                           timeout=2000, what="the transactions")
    for _ in range(4):
        await RisingEdge(dut.clk)
    got = [bits for _, bits in sink.received]
    assert got == payloads, f"expected {payloads[:6]}..., got {got[:6]}... {bench.where()}"
    assert int(dut.i_stream__ready.value) == 1, f"i_stream not ready without backpressure {bench.where()}"
