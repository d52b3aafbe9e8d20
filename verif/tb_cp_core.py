"""cocotb testbench of ``cp_core``: its scenario table, resets, and the no-ready-path property.

``scenario_table`` runs ``verif/scenarios/cp_core.py``: every directed and
random program (LOAD, GEMV, GEMM and UPDATE; random matrices under
backpressure, edge shapes cycle exact, directed corners, UPDATE corners) with
results from plain integer arithmetic and, unstalled, cycles from the golden
schedule. The reset tests queue a program built with the golden model
(:mod:`trainforge.golden.caterpillar.core`), reset the core in the middle of
it and check a fresh program word by word. The in-place weight update
(UPDATE) has no output of its own: a program checks it through the commands
that follow it, a GEMV forward on the updated weights and a read-back of
every weight (GEMM by the identity, ``C = W I``). After each program of the
table, the energy events counted on the RTL's enables (:class:`EventMonitor`)
must equal the golden model's counts of its commands
(:func:`trainforge.golden.caterpillar.core.program_counts`).
"""
import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from trainforge.golden.caterpillar import core as golden
from trainforge.cocotb_streams import check_no_ready_path
from trainforge.spec.caterpillar import CoreEvent

import cp_programs
import scenarios.cp_core as table
from cp_programs import attach
from scenario import run_table
from regression import regression_test
from tbutil import start


class Program:
    """Commands with their ``i_data`` words, expected ``o_data`` words and schedules."""

    def __init__(self, bench):
        self.bench = bench
        self.params = bench.params
        self.n_r = bench.params["n_r"]
        self.commands, self.inputs, self.outputs, self.schedules, self.labels = [], [], [], [], []

    def _add(self, label, op, mb, nb, qb, base, overlap, inputs, outputs, shift=0):
        # The golden builder: raises (ProgramError) for a command the core would reject.
        self.commands.append(golden.command(op, mb, nb, qb, base, overlap, shift, **self.params))
        self.inputs.append(np.asarray(inputs, dtype=np.int64).reshape(-1, self.n_r))
        self.outputs.append(np.asarray(outputs, dtype=np.int64).reshape(-1, self.n_r))
        self.schedules.append(golden.schedule(op, mb, nb, qb, overlap=overlap, **self.params))
        self.labels.append(label)

    def load(self, weights, base):
        mb, nb = (golden.blocks(size, self.n_r) for size in np.shape(weights))
        self._add(f"load {np.shape(weights)}", golden.OP_LOAD, mb, nb, 1, base, False,
                  golden.load_words(weights, self.n_r), np.zeros((0, self.n_r)))

    def forward(self, weights, base, x, overlap):
        mb, nb = (golden.blocks(size, self.n_r) for size in np.shape(weights))
        inputs, outputs = golden.gemv_forward(weights, x, **self.params)
        self._add(f"gemv forward {np.shape(weights)} overlap={overlap}", golden.OP_GEMV_FORWARD,
                  mb, nb, 1, base, overlap, inputs, outputs)

    def backward(self, weights, base, e, overlap):
        mb, nb = (golden.blocks(size, self.n_r) for size in np.shape(weights))
        inputs, outputs = golden.gemv_backward(weights, e, **self.params)
        self._add(f"gemv backward {np.shape(weights)} overlap={overlap}", golden.OP_GEMV_BACKWARD,
                  mb, nb, 1, base, overlap, inputs, outputs)

    def gemm(self, weights, base, b):
        mb, kb = (golden.blocks(size, self.n_r) for size in np.shape(weights))
        qb = golden.blocks(np.shape(b)[1], self.n_r)
        inputs, outputs = golden.gemm(weights, b, **self.params)
        self._add(f"gemm {np.shape(weights)} x {np.shape(b)}", golden.OP_GEMM, mb, kb, qb, base, False,
                  inputs, outputs)

    def read_back(self, weights, base):
        """Every weight of the resident ``weights``, by the GEMM ``C = W I`` (exact: ``C = W``)."""
        inputs, outputs = golden.gemm(weights, np.eye(np.shape(weights)[1], dtype=np.int64), **self.params)
        mb, kb = (golden.blocks(size, self.n_r) for size in np.shape(weights))
        self._add(f"read back {np.shape(weights)} after the update", golden.OP_GEMM, mb, kb, kb, base, False,
                  inputs, outputs)

    def update(self, weights, base, x, e, shift, overlap=False):
        """Queue the rank-``b`` UPDATE of the resident ``weights``; returns the updated weights."""
        mb, nb = (golden.blocks(size, self.n_r) for size in np.shape(weights))
        batch = np.atleast_2d(x).shape[0]
        golden.check_update(mb, nb, batch, shift, **self.params)
        inputs, updated = golden.update(weights, x, e, shift, **self.params)
        self._add(f"update {np.shape(weights)} rank {batch} shift={shift} overlap={overlap}", golden.OP_UPDATE,
                  mb, nb, batch, base, overlap, inputs, np.zeros((0, self.n_r)), shift=shift)
        return updated


def operand_range(bench):
    half = 1 << (bench.params["width"] - 1)
    return -half, half - 1


def random_matrix(bench, generator, rows, cols):
    low, high = operand_range(bench)
    return generator.integers(low, high, size=(rows, cols), endpoint=True)


def random_update(bench, generator, program, weights, base):
    """A random rank-``b`` UPDATE of resident ``weights`` (the largest ``b`` the buffers allow at most)."""
    width = bench.params["width"]
    mb, nb = (golden.blocks(size, program.n_r) for size in weights.shape)
    batch = int(generator.integers(1, bench.params["max_blocks"] // max(mb, nb), endpoint=True))
    max_shift = (1 << golden.shift_bits(bench.params["acc_width"])) - 1
    shift = int(generator.integers(min(width - 1, max_shift), min(2 * width - 1, max_shift), endpoint=True))
    x = random_matrix(bench, generator, batch, weights.shape[0])
    e = random_matrix(bench, generator, batch, weights.shape[1])
    return program.update(weights, base, x, e, shift, overlap=bool(generator.integers(2)))


def random_program(bench, generator, matrices, gemm_columns=None):
    """LOAD of each matrix; forward, backward (both overlap settings) and GEMM on each; then a random
    UPDATE of each, a forward on the updated weights and a read-back of them."""
    program = Program(bench)
    base = 0
    placed = []
    for weights in matrices:
        program.load(weights, base)
        placed.append((weights, base))
        base += golden.blocks(weights.shape[0], program.n_r) * golden.blocks(weights.shape[1], program.n_r)
    for weights, base in placed:
        rows, cols = weights.shape
        overlap = bool(generator.integers(2))
        program.forward(weights, base, random_matrix(bench, generator, 1, rows), overlap)
        program.backward(weights, base, random_matrix(bench, generator, 1, cols), not overlap)
        columns = gemm_columns or int(generator.integers(1, 2 * program.n_r, endpoint=True))
        program.gemm(weights, base, random_matrix(bench, generator, cols, columns))
    for weights, base in placed:
        updated = random_update(bench, generator, program, weights, base)
        program.forward(updated, base, random_matrix(bench, generator, 1, weights.shape[0]),
                        bool(generator.integers(2)))
        program.read_back(updated, base)
    return program


async def run_and_check(bench, program, ports):
    """:func:`cp_programs.run_and_check` with this block's data and result layouts."""
    await cp_programs.run_and_check(bench, program, ports, bench.component.data_layout, bench.component.result_layout)


class EventMonitor:
    """Counts the core's energy events (:class:`~trainforge.spec.caterpillar.CoreEvent`) on its enables.

    Every cycle (after the drivers have set the inputs) it adds up the named
    one-bit signals of the generated Verilog: each PE's ``pe_R_C_mac_enable``,
    ``pe_R_C_add_enable``, ``pe_R_C_read_enable`` and ``pe_R_C_write_enable``;
    ``write_back`` (the UPDATE's subtraction, in every PE); the vector and
    error buffers' ``*_read_enable`` and ``*_write_enable`` (``n_r`` operands
    each); the ``i_data`` and ``o_data`` transfers (``n_r`` operands each).
    """

    def __init__(self, bench):
        dut, n_r = bench.dut, bench.params["n_r"]
        pes = [(r, c) for r in range(n_r) for c in range(n_r)]

        def each_pe(name):
            return [(getattr(dut, f"pe_{r}_{c}_{name}"), 1) for r, c in pes]

        self.bench = bench
        self.sources = {
            CoreEvent.MAC: each_pe("mac_enable"),
            CoreEvent.ADD: each_pe("add_enable") + [(dut.write_back, n_r * n_r)],
            CoreEvent.LOCAL_READ: each_pe("read_enable"),
            CoreEvent.LOCAL_WRITE: each_pe("write_enable"),
            CoreEvent.BUFFER_READ: [(dut.vector_read_enable, n_r), (dut.error_read_enable, n_r)],
            CoreEvent.BUFFER_WRITE: [(dut.vector_write_enable, n_r), (dut.error_write_enable, n_r)],
        }
        self.transfers = {CoreEvent.OFFCORE_READ: (dut.i_data__valid, dut.i_data__ready, n_r),
                          CoreEvent.OFFCORE_WRITE: (dut.o_data__valid, dut.o_data__ready, n_r)}
        self.counts = dict.fromkeys(CoreEvent, 0)
        cocotb.start_soon(self._monitor())

    async def _monitor(self):
        clock = self.bench.dut.clk
        while True:
            await RisingEdge(clock)
            await ReadOnly()
            for event, signals in self.sources.items():
                self.counts[event] += sum(weight * handle.value.integer for handle, weight in signals)
            for event, (valid, ready, weight) in self.transfers.items():
                self.counts[event] += weight * (valid.value.integer & ready.value.integer)

    def take(self):
        """The counts since the last call (and start again from zero)."""
        counts, self.counts = self.counts, dict.fromkeys(CoreEvent, 0)
        return counts


@cocotb.test()
async def scenario_table(dut):
    """Every scenario of the table (LOAD, GEMV forward and backward, GEMM, UPDATE), at full rate and stalled;
    after each, the events counted on the RTL's enables equal the golden model's counts of its commands."""
    bench = await start(dut)
    monitor = EventMonitor(bench)

    async def check_counts(scenario):
        await bench.wait_until(lambda: dut.i_cmd__ready.value == 1, timeout=1000, what="the core to go idle")
        for _ in range(4):
            await RisingEdge(dut.clk)
        counted = monitor.take()
        expected = golden.program_counts(scenario.stimulus["i_cmd"], **bench.params)
        wrong = [f"{event.name} {counted[event]} (golden {expected[event]})"
                 for event in CoreEvent if counted[event] != expected[event]]
        assert not wrong, f"scenario '{scenario.name}': RTL event counts differ: {', '.join(wrong)} {bench.where()}"

    await run_table(bench, table, after_scenario=check_counts)


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset in the middle of a program drops it; the core then runs a fresh program correctly."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 3)
    ports = attach(bench, valid_probability=0.8, ready_probability=0.6)
    weights = random_matrix(bench, generator, 3 * bench.params["n_r"], 2 * bench.params["n_r"])
    program = random_program(bench, generator, [weights])
    cp_programs.queue(bench, program, ports, bench.component.data_layout)
    for _ in range(bench.rng.randrange(20, 80)):
        await RisingEdge(dut.clk)
    await cp_programs.reset_and_check_idle(bench, ports, "core")
    await run_and_check(bench, random_program(bench, generator, [weights]), ports)


@cocotb.test()
async def reset_mid_update(dut):
    """A reset while an UPDATE is writing back drops it; a reloaded, fresh program then runs correctly."""
    bench = await start(dut)
    n_r, max_blocks = bench.params["n_r"], bench.params["max_blocks"]
    generator = np.random.default_rng(bench.seed + 5)
    ports = attach(bench, valid_probability=0.9, ready_probability=0.7)
    commands = ports[0]
    rows, cols = 3 * n_r - 1, 2 * n_r
    batch = max_blocks // 3

    def program_with_update():
        program = Program(bench)
        weights = random_matrix(bench, generator, rows, cols)
        program.load(weights, 0)
        updated = program.update(weights, 0, random_matrix(bench, generator, batch, rows),
                                 random_matrix(bench, generator, batch, cols), bench.params["width"])
        program.forward(updated, 0, random_matrix(bench, generator, 1, rows), overlap=False)
        program.read_back(updated, 0)
        return program

    interrupted = program_with_update()
    cp_programs.queue(bench, interrupted, ports, bench.component.data_layout)
    update_cycles = interrupted.schedules[1].issue_cycles
    await bench.wait_until(lambda: len(commands.sent) >= 2, timeout=20 * update_cycles + 1000,
                           what="the UPDATE command")
    for _ in range(bench.rng.randrange(1, update_cycles)):  # at least this long when nothing stalls
        await RisingEdge(dut.clk)
    assert len(commands.sent) == 2, f"the UPDATE finished before the reset {bench.where()}"
    await cp_programs.reset_and_check_idle(bench, ports, "core")
    await run_and_check(bench, program_with_update(), ports)


@cocotb.test()
async def no_ready_path(dut):
    """No input's ``ready`` follows ``o_data.ready`` within a cycle (the output stage's ready is a register)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
