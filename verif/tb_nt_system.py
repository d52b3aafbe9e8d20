"""Integration test of ``nt_system``: compiled FC FF programs on the PMAG, the common vault, the bus and the PEs.

The host writes the common vault image (x), the common PMAG runs the compiled programs
(broadcast x, then each PE's write-back of its part of y), each PE runs its compiled pass
words with its BUF Input 1 blocks (its part of W, as its own vault would stream them), and
the host reads the common vault back. y must equal numpy's ``W @ x`` and the whole common
vault must equal the reference executor's final image.
"""
import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from trainforge.golden.neurotrainer.system import nt_system
from trainforge.sim.neurotrainer import executor
from trainforge.sim.neurotrainer.program import pmag_rtl_payload

from streams import StreamSink, StreamSource, pack
from tbutil import start

COMMON = -1


class Harness:
    def __init__(self, bench):
        dut, cycle, rng = bench.dut, bench.cycle, bench.rng
        self.bench = bench
        pes = bench.component.pes
        self.host = StreamSource(dut, "i_host", cycle, rng)
        self.host_data = StreamSink(dut, "o_host_data", cycle, rng)
        self.pmag_program = StreamSource(dut, "i_pmag_program", cycle, rng)
        self.pe_program = [StreamSource(dut, f"i_pe_program__{pe}", cycle, rng) for pe in range(pes)]
        self.in1 = [StreamSource(dut, f"i_in1__{pe}", cycle, rng) for pe in range(pes)]

    def backpressure(self, valid_probability, ready_probability):
        for source in (self.host, self.pmag_program, *self.pe_program, *self.in1):
            source.valid_probability = valid_probability
        self.host_data.ready_probability = ready_probability

    def sources(self):
        return (self.host, self.pmag_program, *self.pe_program, *self.in1)

    def drop(self):
        for source in self.sources():
            source.drop()


async def host_write(harness, words, label):
    layout = harness.bench.component.host_layout
    harness.host.send([pack(layout, {"address": address, "write": 1, "data": int(word) & 0xFFFFFFFF})
                       for address, word in enumerate(words)])
    await harness.bench.wait_until(lambda: harness.host.idle, 20 * len(words) + 100, f"host writes ({label})")


async def host_read(harness, count, label):
    layout = harness.bench.component.host_layout
    before = len(harness.host_data.received)
    harness.host.send([pack(layout, {"address": address, "write": 0, "data": 0}) for address in range(count)])
    await harness.bench.wait_until(lambda: len(harness.host_data.received) >= before + count, 30 * count + 200,
                                   f"host read-back ({label})")
    return np.array([payload for _, payload in harness.host_data.received[before:before + count]], dtype=np.int64)


def start_layer(harness, expected):
    """Queue the common PMAG programs, the PE pass words and the BUF Input 1 blocks of the compiled layer."""
    component = harness.bench.component
    layer, vaults = expected["layer"], expected["vaults"]
    harness.pmag_program.send([pmag_rtl_payload(program, component.pmag_program_layout)
                               for _, _, stream in layer.streams() if stream.vault == COMMON
                               for program in stream.programs])
    for job in layer.pe_jobs:
        harness.pe_program[job.pe].send([int(word) for word in job.passes])
        blocks1, _ = executor.pe_buffer_images(layer, vaults, job)
        harness.in1[job.pe].send([pack(component.in1_layout, {"data": int(word) & 0xFFFFFFFF,
                                                               "last": int(index == len(block) - 1)})
                                  for block in blocks1 for index, word in enumerate(block)])


async def run_layer(harness, outputs, inputs, label, generator):
    bench = harness.bench
    w = generator.integers(-1000, 1000, size=(outputs, inputs))
    x = generator.integers(-1000, 1000, size=(inputs, 1))
    expected = nt_system(w, x, **bench.params)
    common = expected["vaults"][COMMON]
    assert common.size <= bench.component.params["vault_depth"], f"layer too big for the vault {bench.where()}"
    await host_write(harness, common, label)
    start_layer(harness, expected)
    steps = 50 * (outputs * inputs + outputs + inputs) + 500
    await bench.wait_until(lambda: all(source.idle for source in harness.sources()), steps, f"programs ({label})")
    for _ in range(2):
        await RisingEdge(bench.dut.clk)
    await bench.wait_until(lambda: bench.dut.pmag_idle.value == 1, steps, f"the last write-back ({label})")
    final = await host_read(harness, common.size, label)
    vaults = dict(expected["vaults"])
    vaults[COMMON] = final
    y = executor.unload(expected["layer"], vaults)
    reference = (w @ x).astype(np.int64)
    assert np.array_equal(y, reference), f"{label}: y expected {reference.ravel()}, got {y.ravel()} {bench.where()}"
    want = expected["final"][COMMON] & 0xFFFFFFFF
    bad = np.flatnonzero(final != want)
    assert bad.size == 0, (f"{label}: common vault word {bad[0]} expected {int(want[bad[0]]):#x}, got "
                           f"{int(final[bad[0]]):#x} ({bad.size} mismatches) {bench.where()}")
    bench.dut._log.info("%s: y = W x with W %dx%d on %d PEs equals numpy", label, outputs, inputs,
                        bench.component.pes)


@cocotb.test()
async def fc_ff_with_backpressure(dut):
    """y = W x through the whole system, random valid gaps on every input stream and random host ready."""
    bench = await start(dut)
    harness = Harness(bench)
    harness.backpressure(valid_probability=0.6, ready_probability=0.5)
    generator = np.random.default_rng(bench.seed)
    await run_layer(harness, 4 * bench.component.pes, 6, "backpressure", generator)
    await run_layer(harness, 2 * bench.component.pes, 9, "backpressure, second layer", generator)


@cocotb.test()
async def fc_ff_without_backpressure(dut):
    """y = W x with every stream at full rate."""
    bench = await start(dut)
    harness = Harness(bench)
    harness.backpressure(valid_probability=1.0, ready_probability=1.0)
    await run_layer(harness, 4 * bench.component.pes, 8, "no backpressure", np.random.default_rng(bench.seed + 1))


@cocotb.test()
async def reset_mid_layer(dut):
    """A reset in the middle of a layer; the next layer still computes y = W x."""
    bench = await start(dut)
    harness = Harness(bench)
    harness.backpressure(valid_probability=0.7, ready_probability=0.5)
    generator = np.random.default_rng(bench.seed + 2)
    outputs, inputs = 4 * bench.component.pes, 6
    expected = nt_system(generator.integers(-9, 9, size=(outputs, inputs)), generator.integers(-9, 9, size=(inputs, 1)),
                         **bench.params)
    await host_write(harness, expected["vaults"][COMMON], "before reset")
    start_layer(harness, expected)
    for _ in range(bench.rng.randrange(10, 60)):
        await RisingEdge(dut.clk)
    harness.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    await ReadOnly()
    assert dut.pmag_idle.value == 1, f"PMAG not idle after reset {bench.where()}"
    await RisingEdge(dut.clk)
    await run_layer(harness, outputs, inputs, "after reset", generator)
