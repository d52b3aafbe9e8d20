"""cocotb testbench of ``cp_pe``: its scenario table (``verif/scenarios/cp_pe.py``) and a reset mid-sequence.

The PE has no streams: the core's sequencer drives its controls every cycle.
The testbench writes a scenario's memory image, drives the controls of its
enabled cycles with ``en`` following the scenario's pattern, reads the
accumulator and the reduction register after every enabled cycle and compares
the traces with the table (the reset test compares with the golden model).
"""
import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from trainforge.golden.caterpillar.pe import cp_pe
from trainforge.spec.caterpillar import MacOp

import scenarios.cp_pe as table
from regression import regression_test
from scenario import Scenario, Transactions, check_transactions
from tbutil import start


def to_bits(value, bits):
    return int(value) & ((1 << bits) - 1)


def signed_value(handle):
    return handle.value.signed_integer


async def write_memory(bench, memory):
    dut = bench.dut
    width = bench.params["width"]
    dut.en.value = 0
    for address, word in enumerate(memory):
        await FallingEdge(dut.clk)
        dut.wr_en.value = 1
        dut.wr_addr.value = address
        dut.wr_data.value = to_bits(word, width)
    await FallingEdge(dut.clk)
    dut.wr_en.value = 0


def random_controls(bench, generator, cycles, zeros=False):
    """Random issue and operand-stage controls; a handoff only with a MAC, as the core issues them."""
    params = bench.params
    acc_half = 1 << (params["acc_width"] - 1)
    controls = {
        "rd_en": (generator.random(cycles) < 0.75) | (np.arange(cycles) < 2),
        "rd_addr": generator.integers(0, params["sram_depth"], cycles),
        "mac_op": generator.integers(0, 4, cycles),
        "mac_clear": generator.random(cycles) < 0.2,
        "handoff": generator.random(cycles) < 0.15,
        "red_add": generator.random(cycles) < 0.4,
        "row_bus": generator.integers(-acc_half, acc_half, cycles),
        "col_bus": generator.integers(-acc_half, acc_half, cycles),
        "red_in": generator.integers(-acc_half, acc_half, cycles),
    }
    controls["mac_op"][:2] = MacOp.NONE  # no word read yet
    controls["handoff"] &= controls["mac_op"] != MacOp.NONE
    if zeros:
        for name in ("row_bus", "col_bus", "red_in"):
            controls[name][:] = 0
    return controls


async def drive_and_check(bench, memory, controls, enable_probability, label):
    dut = bench.dut
    acc_width = bench.params["acc_width"]
    cycles = len(controls["mac_op"])
    acc_trace, red_trace = [], []
    index = 0
    while index < cycles:
        await FallingEdge(dut.clk)
        enabled = bench.rng.random() < enable_probability
        dut.en.value = int(enabled)
        for name in ("rd_en", "rd_addr", "mac_op"):
            getattr(dut, name).value = int(controls[name][index])
        for name in ("mac_clear", "handoff", "red_add"):
            getattr(dut, name).value = int(controls[name][index])
        for name in ("row_bus", "col_bus", "red_in"):
            getattr(dut, name).value = to_bits(controls[name][index], acc_width)
        await RisingEdge(dut.clk)
        await ReadOnly()
        if enabled:
            acc_trace.append(signed_value(dut.acc))
            red_trace.append(signed_value(dut.red))
            index += 1
    await FallingEdge(dut.clk)
    dut.en.value = 0
    expected_acc, expected_red, _ = cp_pe(memory, **controls, **bench.params)
    for name, actual, expected in (("acc", acc_trace, expected_acc), ("red", red_trace, expected_red)):
        wrong = np.flatnonzero(np.array(actual, dtype=np.int64) != expected)
        assert wrong.size == 0, (f"{label}: {name} after enabled cycle {wrong[0]} expected {expected[wrong[0]]} "
                                 f"got {actual[wrong[0]]} ({wrong.size} mismatches) {bench.where()}")


def random_memory(bench, generator):
    half = 1 << (bench.params["width"] - 1)
    return generator.integers(-half, half, min(bench.params["sram_depth"], 256))


async def drive_scenario(bench, scenario, enabled_cycle):
    """Write the scenario's memory, then drive its controls with ``en`` following ``valid["en"]`` (the pattern
    repeated from the first control cycle); ``enabled_cycle(acc, red)`` after each enabled cycle."""
    dut = bench.dut
    acc_width = bench.params["acc_width"]
    await write_memory(bench, scenario.stimulus["memory"])
    pattern = scenario.valid.get("en", (1,))
    cycle = 0
    for control in scenario.stimulus["controls"]:
        while True:
            await FallingEdge(dut.clk)
            enabled = bool(pattern[cycle % len(pattern)])
            cycle += 1
            dut.en.value = int(enabled)
            for name in table.CONTROL_NAMES:
                getattr(dut, name).value = to_bits(control[name], acc_width)
            await RisingEdge(dut.clk)
            await ReadOnly()
            if enabled:
                break
        enabled_cycle(signed_value(dut.acc), signed_value(dut.red))
    await FallingEdge(dut.clk)
    dut.en.value = 0


async def run_scenario(bench, scenario, counts=None):
    """:func:`drive_scenario`, then the traces checked against the table; ``counts`` (a
    :class:`RegressionHarness`) counts each enabled cycle's control word and checked outputs."""
    acc_trace, red_trace = [], []

    def record(acc, red):
        acc_trace.append(acc)
        red_trace.append(red)
        if counts is not None:
            counts.count()

    await drive_scenario(bench, scenario, record)
    check_transactions(scenario, Transactions({"acc": acc_trace, "red": red_trace}), bench.where())


class _Beats:
    """A count of beats, with the members ``regression.run_regression`` reads (``sent`` of a source, ``received``
    of a sink)."""

    def __init__(self):
        self.sent, self.received = [], []


class RegressionHarness:
    """The PE's table for ``regression.run_regression``: a transaction is an enabled cycle's control word (an input
    beat, ``inputs``) or the accumulator and reduction register after it, checked (an output beat, ``{acc, red}``),
    as the fast path counts them (``verif/fast_cp_pe.py``).

    Parameters
    ----------
    bench : tbutil.Bench

    Members
    -------
    sources, sinks : dict
        ``"inputs"`` and ``"{acc, red}"``: their ``sent`` and ``received`` lists grow by one per enabled cycle.
    """

    def __init__(self, bench):
        self.bench = bench
        self.inputs, self.outputs = _Beats(), _Beats()
        self.sources, self.sinks = {"inputs": self.inputs}, {"{acc, red}": self.outputs}
        self.traffic = None

    def count(self):
        self.inputs.sent.append(1)
        self.outputs.received.append(1)

    async def play(self, scenario):
        await run_scenario(self.bench, scenario, counts=self)

    async def start(self, scenario):
        """The scenario's traffic, unchecked, until :meth:`drop` (a reset mid-stream follows)."""
        await FallingEdge(self.bench.dut.clk)
        self.traffic = cocotb.start_soon(drive_scenario(self.bench, scenario, lambda acc, red: self.count()))

    def drop(self):
        if self.traffic is not None:
            self.traffic.kill()
            self.traffic = None


@cocotb.test()
async def power_on_memory_reads_zero(dut):
    """Before any write, every word of the local memory reads 0 (the memory's initial values in the Verilog):
    each word read in turn and multiplied by 1 into a cleared accumulator; the table's reference on an all-zero
    memory gives the expected traces.

    It must be the module's first test: the memory keeps what later tests write, even across resets.
    """
    bench = await start(dut)
    depth = bench.params["sram_depth"]
    one = 0x3C00 if bench.params.get("mac", "fixed") == "fp16" else 1  # 1.0 as FP16 bits, or the integer 1
    controls = [{
        "rd_en": int(cycle < depth), "rd_addr": cycle % depth,
        "mac_op": int(MacOp.ROW_MEM if cycle >= 2 else MacOp.NONE),  # the word read in cycle t is used in t + 2
        "mac_clear": 1, "handoff": 0, "red_add": 0, "row_bus": one, "col_bus": 0, "red_in": 0,
    } for cycle in range(depth + 2)]
    accs, reds = table.reference([0] * depth, controls, **bench.params)
    scenario = Scenario("power-on reads", {"memory": [], "controls": controls}, {"acc": accs, "red": reds})
    await run_scenario(bench, scenario)


@cocotb.test()
async def scenario_table(dut):
    """Every scenario of the table: hand-worked, random controls with ``en`` stalls, zeros, most negative operands."""
    bench = await start(dut)
    for index, scenario in enumerate(table.scenarios(bench.params, bench.seed)):
        if index:
            await bench.reset(cycles=2)
        await run_scenario(bench, scenario)


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset clears the accumulator and the reduction register; the PE then runs on from zero."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 2)
    memory = random_memory(bench, generator)
    await write_memory(bench, memory)
    controls = random_controls(bench, generator, 60)
    controls["rd_addr"] %= len(memory)
    await drive_and_check(bench, memory, controls, 0.8, "before reset")
    await bench.reset(cycles=2)
    await ReadOnly()
    assert signed_value(dut.acc) == 0 and signed_value(dut.red) == 0, \
        f"acc {signed_value(dut.acc)} red {signed_value(dut.red)} after reset, expected 0 0 {bench.where()}"
    controls = random_controls(bench, generator, 200)
    controls["rd_addr"] %= len(memory)
    controls["mac_clear"][:] = False  # the accumulator must start from the reset's zero
    await drive_and_check(bench, memory, controls, 0.8, "after reset")


random_regression = regression_test(table, harness=RegressionHarness)
