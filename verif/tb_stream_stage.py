"""cocotb testbench of ``stream_stage``: its scenario table, a reset mid-stream, and registered ready."""
import cocotb
from cocotb.triggers import RisingEdge, Timer

from trainforge.cocotb_streams import StreamSink, StreamSource
import scenarios.stream_stage as table
from scenario import rng_for, table_test
from regression import regression_test
from tbutil import start


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/stream_stage.py``: transactions in order, cycles equal to the "
    "golden model."
))


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset drops what the stage holds; afterwards every transaction sent passes exactly once, in order."""
    bench = await start(dut)
    source = StreamSource(dut, "i_stream", bench.cycle, bench.rng, valid_probability=0.8)
    sink = StreamSink(dut, "o_stream", bench.cycle, bench.rng, ready_probability=0.4)
    rng = rng_for(bench.seed, "reset")
    top = (1 << bench.params["width"]) - 1
    source.send([rng.randint(0, top) for _ in range(100)])
    for _ in range(rng.randrange(10, 60)):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_stream__valid.value == 0, f"o_stream still valid after reset {bench.where()}"
    assert dut.i_stream__ready.value == 1, f"i_stream not ready after reset {bench.where()}"
    before = len(sink.received)
    payloads = [rng.randint(0, top) for _ in range(150)]
    source.send(payloads)
    await bench.wait_until(lambda: source.idle and len(sink.received) >= before + len(payloads),
                           timeout=5000, what="the transactions after reset")
    for _ in range(6):
        await RisingEdge(dut.clk)
    got = [bits for _, bits in sink.received[before:]]
    assert got == payloads, f"after reset: expected {payloads[:6]}..., got {got[:6]}... {bench.where()}"


@cocotb.test()
async def ready_is_registered(dut):
    """``i_stream.ready`` does not follow ``o_stream.ready`` (or ``i_stream.valid``) within a cycle."""
    bench = await start(dut)
    for valid, payload in ((1, 1), (1, 0), (0, 0), (1, 1)):
        dut.i_stream__valid.value = valid
        dut.i_stream__payload.value = payload
        dut.o_stream__ready.value = 0
        await RisingEdge(dut.clk)
        await Timer(1, units="ns")
        held = (int(dut.i_stream__ready.value), int(dut.o_stream__valid.value), int(dut.o_stream__payload.value))
        for ready in (1, 0, 1):
            dut.o_stream__ready.value = ready
            await Timer(1, units="ns")
            now = (int(dut.i_stream__ready.value), int(dut.o_stream__valid.value), int(dut.o_stream__payload.value))
            assert now == held, (f"i_stream.ready, o_stream.valid or payload changed within a cycle when "
                                 f"o_stream.ready went to {ready}: {held} -> {now} {bench.where()}")
    dut.i_stream__valid.value = 0


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
