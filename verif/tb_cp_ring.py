"""cocotb testbench of ``cp_ring``: its scenario table, a reset mid-stream, and the no-ready-path property.

``scenario_table`` runs ``verif/scenarios/cp_ring.py``: every directed and
random program (WRITE, READ, ALL_GATHER, REDUCE_SCATTER, LOAD and the
ring GEMVs; under backpressure and, unstalled, cycle exact against the
golden :func:`~trainforge.golden.caterpillar.ring.ring_schedule`) with results
from a plain-integer reference. ``reset_mid_stream`` queues a program built
with the golden model (:mod:`trainforge.golden.caterpillar.ring`), resets the
ring in the middle of it and checks a fresh program word by word.
"""
import types

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.caterpillar import core as core_golden
from trainforge.golden.caterpillar import ring as golden
from trainforge.cocotb_streams import check_no_ready_path

import cp_programs
import scenarios.cp_ring as table
from cp_programs import attach
from scenario import run_table, table_test
from regression import regression_test
from tbutil import start


class RingProgram:
    """Ring commands with their ``i_data`` words, expected ``o_data`` words and schedules."""

    def __init__(self, bench):
        self.bench = bench
        self.params = bench.params
        self.n_r = bench.params["n_r"]
        self.cores = bench.params["cores"]
        self.acc_width = bench.params["acc_width"]
        depth = bench.component.buffer_depth
        self.buffers = np.zeros((self.cores, depth, self.n_r), dtype=np.int64)
        self.commands, self.inputs, self.outputs, self.schedules, self.labels = [], [], [], [], []

    def _add(self, label, op, inputs=(), outputs=(), core=0, overlap=False, mb=1, nb=1, base=0, words=1):
        # The golden builder: raises (ProgramError) for a command the ring would reject.
        self.commands.append(golden.command(op, words, core, overlap, mb, nb, base, **self.params))
        self.inputs.append(np.asarray(inputs, dtype=np.int64).reshape(-1, self.n_r))
        self.outputs.append(np.asarray(outputs, dtype=np.int64).reshape(-1, self.n_r))
        self.schedules.append(golden.ring_schedule(op, mb=mb, nb=nb, words=words, overlap=overlap,
                                                   **self.params))
        self.labels.append(label)

    def write(self, words):
        """``words[k]`` (shape ``(w, n_r)``) into core ``k``'s buffer at word 0."""
        words = np.asarray(words, dtype=np.int64)
        count = words.shape[1]
        self.buffers[:, :count] = words
        self._add(f"write {count} words/core", golden.RING_WRITE, inputs=words.reshape(-1, self.n_r), words=count)

    def read(self, count):
        self._add(f"read {count} words/core", golden.RING_READ,
                  outputs=self.buffers[:, :count].reshape(-1, self.n_r).copy(), words=count)

    def all_gather(self, chunk_words):
        self.buffers = golden.all_gather_buffers(self.buffers, chunk_words)
        self._add(f"all-gather cw={chunk_words}", golden.RING_ALL_GATHER, words=chunk_words)

    def reduce_scatter(self, chunk_words):
        self.buffers = golden.reduce_scatter_buffers(self.buffers, chunk_words, acc_width=self.acc_width,
                                                     mac=self.params["mac"])
        self._add(f"reduce-scatter cw={chunk_words}", golden.RING_REDUCE_SCATTER, words=chunk_words)

    def load(self, core, weights, base):
        mb, nb = (core_golden.blocks(size, self.n_r) for size in np.shape(weights))
        self._add(f"load core {core} {np.shape(weights)}", golden.RING_LOAD,
                  inputs=core_golden.load_words(weights, self.n_r), core=core, mb=mb, nb=nb, base=base)

    def ring_gemv(self, weights, base, x, e, overlap):
        """LOAD the row panels into every core, put x in the buffers by an all-gather, then GEMV forward and
        backward."""
        mb, panels = golden.ring_panels(weights, self.n_r, self.cores)
        nb = core_golden.blocks(weights.shape[1], self.n_r)
        for core, panel in enumerate(panels):
            self.load(core, panel, base)
        x_words = golden.vector_words(x, self.cores * mb, self.n_r)
        depth = self.buffers.shape[1]
        slices = np.zeros((self.cores, self.cores * mb, self.n_r), dtype=np.int64)
        for core in range(self.cores):  # core k starts with its part of x as its chunk k
            slices[core, core * mb:(core + 1) * mb] = x_words[core * mb:(core + 1) * mb]
        assert self.cores * mb <= depth
        self.write(slices)
        self.all_gather(mb)
        y, _ = golden.ring_gemv_forward(weights, x, overlap=overlap, padded=True, **self.params)
        self._add(f"gemv forward {np.shape(weights)} overlap={overlap}", golden.RING_GEMV_FORWARD,
                  outputs=golden.vector_words(y, nb, self.n_r), overlap=overlap, mb=mb, nb=nb, base=base)
        d, _ = golden.ring_gemv_backward(weights, e, overlap=not overlap, padded=True, **self.params)
        self.buffers = golden.backward_buffers(self.buffers, d, mb)
        self._add(f"gemv backward {np.shape(weights)} overlap={not overlap}", golden.RING_GEMV_BACKWARD,
                  inputs=golden.vector_words(e, nb, self.n_r),
                  outputs=golden.backward_words(d, mb, self.n_r, self.cores),
                  overlap=not overlap, mb=mb, nb=nb, base=base)


def value_range(bits):
    half = 1 << (bits - 1)
    return -half, half - 1


def random_values(generator, bits, shape):
    low, high = value_range(bits)
    return generator.integers(low, high, size=shape, endpoint=True)


def collectives(program, generator, size, zeros=False):
    """Reduce-scatter of random partial vectors of ``size`` elements, then an all-gather of the result."""
    cores, n_r = program.cores, program.n_r
    cw = golden.chunk_words(size, cores, n_r)
    partials = np.zeros((cores, size), dtype=np.int64) if zeros else \
        random_values(generator, program.acc_width, (cores, size))
    program.write(np.stack([golden.vector_words(partial, cores * cw, n_r) for partial in partials]))
    program.reduce_scatter(cw)
    # The golden model of the buffers must agree with the plain reduce-scatter of the vectors.
    expected = golden.reduce_scatter(partials, acc_width=program.acc_width, mac=program.params["mac"],
                                     elements_per_word=n_r)
    for core, chunk in enumerate(expected):
        held = program.buffers[core, core * cw:(core + 1) * cw].reshape(-1)[:len(chunk)]
        assert np.array_equal(held, chunk), f"buffer model of core {core}: {held} vs reduce_scatter {chunk}"
    program.read(cores * cw)
    program.all_gather(cw)
    program.read(cores * cw)


def random_program(bench, generator):
    program = RingProgram(bench)
    n_r, cores, max_blocks = program.n_r, program.cores, bench.params["max_blocks"]
    for _ in range(2):
        collectives(program, generator, int(generator.integers(1, cores * n_r * max_blocks, endpoint=True)))
    width = bench.params["width"]
    panel_rows = cores * max_blocks * n_r
    for _ in range(2):
        rows = int(generator.integers(1, panel_rows, endpoint=True))
        cols = int(generator.integers(1, max_blocks * n_r, endpoint=True))
        while -(-core_golden.blocks(rows, n_r) // cores) * core_golden.blocks(cols, n_r) > bench.params["sram_depth"]:
            rows = max(1, rows // 2)  # each core's panel must fit its PEs' memories
        program.ring_gemv(random_values(generator, width, (rows, cols)), 0,
                              random_values(generator, width, rows), random_values(generator, width, cols),
                              overlap=bool(generator.integers(2)))
    return program


async def run_and_check(bench, program, ports):
    """:func:`cp_programs.run_and_check` with this block's data and result layouts."""
    await cp_programs.run_and_check(bench, program, ports, bench.component.word_layout, bench.component.word_layout)


@cocotb.test()
async def power_on_weights_are_zero(dut):
    """Before any LOAD, forward GEMVs over every word of every PE's local memory give y = 0 (the memories start at
    zero, as the golden model's image; ``scenarios.cp_ring.power_on_scenario``).

    It must be the module's first test: the memories keep what later tests load, even across resets.
    """
    bench = await start(dut)
    scenario = table.power_on_scenario(bench.params, bench.seed)
    await run_table(bench, types.SimpleNamespace(scenarios=lambda params, seed: [scenario], golden=table.golden))


scenario_table = table_test(table, (
    "Every scenario of the table: WRITE, READ, collectives, LOAD, ring GEMVs; cycle exact and "
    "stalled."
))


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset in the middle of a program drops it; the ring then runs a fresh program correctly."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 3)
    ports = attach(bench, valid_probability=0.8, ready_probability=0.6)
    program = random_program(bench, generator)
    cp_programs.queue(bench, program, ports, bench.component.word_layout)
    for _ in range(bench.rng.randrange(20, 120)):
        await RisingEdge(dut.clk)
    await cp_programs.reset_and_check_idle(bench, ports, "ring")
    await run_and_check(bench, random_program(bench, generator), ports)


@cocotb.test()
async def no_ready_path(dut):
    """No input's ``ready`` follows ``o_data.ready`` within a cycle (the output stage's ready is a register)."""
    bench = await start(dut)
    await check_no_ready_path(bench)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
