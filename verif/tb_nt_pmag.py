"""cocotb testbench of ``nt_pmag``: its scenario table, random programs under backpressure, a reset mid-program.

Random programs: requests are compared field by field, and their transfer cycles against
:func:`~trainforge.golden.neurotrainer.pmag.transfer_cycles` fed with the ``ready``
trace the sink actually drove, so the cycle model is checked under backpressure too.
"""
import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from trainforge.golden.neurotrainer.pmag import nt_pmag, random_program, transfer_cycles
from trainforge.cocotb_streams import StreamSource, check_no_ready_path, pack, unpack

import scenarios.nt_pmag as table
from scenario import table_test
from regression import regression_test
from tbutil import start


class TracingSink:
    """Drives ``ready`` at random, records every transfer and the ``ready`` of every cycle."""

    def __init__(self, bench, name, ready_probability):
        self.valid = getattr(bench.dut, f"{name}__valid")
        self.ready = getattr(bench.dut, f"{name}__ready")
        self.payload = getattr(bench.dut, f"{name}__payload")
        self.cycle = bench.cycle
        self.rng = bench.rng
        self.ready_probability = ready_probability
        self.received = []
        self.ready_trace = {}
        self.ready.value = 0
        cocotb.start_soon(self._drive())

    def trace(self, length):
        return np.array([self.ready_trace.get(cycle, False) for cycle in range(length)], dtype=bool)

    async def _drive(self):
        while True:
            await RisingEdge(self.cycle.clock)
            ready = self.rng.random() < self.ready_probability
            self.ready.value = int(ready)
            await ReadOnly()
            self.ready_trace[self.cycle.now] = ready
            if ready and self.valid.value == 1:
                self.received.append((self.cycle.now, int(self.payload.value)))


def attach(bench, valid_probability, ready_probability):
    return (StreamSource(bench.dut, "i_program", bench.cycle, bench.rng, valid_probability),
            TracingSink(bench, "o_request", ready_probability))


def decode(bench, received):
    layout = bench.component.request_layout
    views = [unpack(layout, payload) for _, payload in received]
    return {
        "address": np.array([int(view.address) for view in views], dtype=np.uint64),
        "write": np.array([bool(view.write) for view in views]),
        "pad": np.array([bool(view.pad) for view in views]),
        "end": np.array([bool(view.end) for view in views]),
    }


async def run_and_check(bench, source, sink, programs, label, check_cycles=True):
    """Send ``programs``; check every request and, from the ready trace, every transfer cycle."""
    expected = [nt_pmag(program, **bench.params) for program in programs]
    total = sum(len(e["address"]) for e in expected)
    steps = sum(len(e["issued"]) + 2 for e in expected)
    before_sent, before = len(source.sent), len(sink.received)
    source.send([pack(bench.component.program_layout, program) for program in programs])
    await bench.wait_until(lambda: len(sink.received) >= before + total,
                           timeout=30 * steps + 200, what=f"{total} requests ({label})")
    for _ in range(5):
        await RisingEdge(bench.dut.clk)
    received = sink.received[before:]
    actual = decode(bench, received)
    accepted = [cycle for cycle, _ in source.sent[before_sent:]]
    # Split the received stream at its END-MARKs, so a wrong request count names its program.
    ends = np.flatnonzero(actual["end"])
    assert len(ends) == len(programs), \
        f"{label}: expected {len(programs)} END-MARKs, got {len(ends)} {bench.where()}"
    starts = []
    for index, (program, golden, stop) in enumerate(zip(programs, expected, ends)):
        start_index = 0 if index == 0 else ends[index - 1] + 1
        starts.append(start_index)
        count = len(golden["address"])
        assert stop + 1 - start_index == count, (f"{label}: program {index} expected {count} requests, got "
                                                 f"{stop + 1 - start_index} (program {program}) {bench.where()}")
        for field in ("address", "write", "pad", "end"):
            got = actual[field][start_index:stop + 1]
            bad = np.flatnonzero(got != golden[field])
            assert bad.size == 0, (f"{label}: program {index} request {bad[0]} {field} expected "
                                   f"{golden[field][bad[0]]!r} got {got[bad[0]]!r} ({bad.size} mismatches; "
                                   f"program {program}) {bench.where()}")
    if check_cycles:
        cycles = np.array([cycle for cycle, _ in received])
        predicted = transfer_cycles([golden["issued"] for golden in expected], accepted,
                                    sink.trace(int(cycles[-1]) + 2))
        for index, (start_index, stop) in enumerate(zip(starts, ends)):
            late = np.flatnonzero(cycles[start_index:stop + 1] != predicted[index])
            assert late.size == 0, (f"{label}: program {index} request {late[0]} expected in cycle "
                                    f"{predicted[index][late[0]]}, got {cycles[start_index + late[0]]} {bench.where()}")
    assert len(received) == total, f"{label}: expected {total} requests, got {len(received)} {bench.where()}"


@cocotb.test()
async def random_programs_with_backpressure(dut):
    """Random programs (every source code, window mode, width) with valid gaps and random ready."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed)
    source, sink = attach(bench, valid_probability=0.6, ready_probability=0.6)
    programs = [random_program(generator, bench.params["counter_bits"], max_steps=120) for _ in range(12)]
    await run_and_check(bench, source, sink, programs, "random programs")


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/nt_pmag.py``: requests in order, full-rate requests one per "
    "cycle on time."
))


@cocotb.test()
async def reset_mid_program(dut):
    """A reset abandons a program: no request is pending after it, and the next program starts clean."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 2)
    source, sink = attach(bench, valid_probability=0.9, ready_probability=0.5)
    long_program = random_program(generator, bench.params["counter_bits"], max_steps=400)
    long_program["max"] = [1, 1, 1, 1, 1, 1, 2]
    source.send([pack(bench.component.program_layout, long_program)])
    for _ in range(bench.rng.randrange(5, 60)):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_request__valid.value == 0, f"o_request still valid after reset {bench.where()}"
    await run_and_check(bench, source, sink, [random_program(generator, bench.params["counter_bits"])],
                        "after reset")


@cocotb.test()
async def no_combinational_ready_path(dut):
    """The input's ``ready`` never follows the output's ``ready`` within a cycle (the output is a StreamStage)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
