"""cocotb testbench of ``cp_core`` against :mod:`trainforge.golden.caterpillar.core`.

Every test queues a program (commands on ``i_cmd``, their operands on
``i_data``) and checks each ``o_data`` word against the golden model; the
unstalled test also checks every word's cycle against the golden schedule.
"""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.caterpillar import core as golden

from streams import StreamSink, StreamSource, pack, unpack
from tbutil import start


class Program:
    """Commands with their ``i_data`` words, expected ``o_data`` words and schedules."""

    def __init__(self, bench):
        self.bench = bench
        self.params = bench.params
        self.n_r = bench.params["n_r"]
        self.commands, self.inputs, self.outputs, self.schedules, self.labels = [], [], [], [], []

    def _add(self, label, op, mb, nb, qb, base, overlap, inputs, outputs):
        self.commands.append({"op": op, "overlap": int(overlap), "mb": mb, "nb": nb, "qb": qb, "base": base})
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


def operand_range(bench):
    half = 1 << (bench.params["width"] - 1)
    return -half, half - 1


def random_matrix(bench, generator, rows, cols):
    low, high = operand_range(bench)
    return generator.integers(low, high, size=(rows, cols), endpoint=True)


def random_shape(bench, generator, max_blocks_product):
    """Rows and columns up to ``max_blocks * n_r`` whose block grid fits ``max_blocks_product`` words."""
    n_r, max_blocks = bench.params["n_r"], bench.params["max_blocks"]
    while True:
        rows, cols = generator.integers(1, max_blocks * n_r, size=2, endpoint=True)
        if golden.blocks(rows, n_r) * golden.blocks(cols, n_r) <= max_blocks_product:
            return int(rows), int(cols)


def random_program(bench, generator, matrices, gemm_columns=None):
    """LOAD of each matrix, then forward, backward (both overlap settings) and GEMM on each."""
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
    return program


def attach(bench, valid_probability, ready_probability):
    return (StreamSource(bench.dut, "i_cmd", bench.cycle, bench.rng, valid_probability),
            StreamSource(bench.dut, "i_data", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_data", bench.cycle, bench.rng, ready_probability))


async def run_and_check(bench, program, ports, check_cycles=False):
    """Queue ``program``, wait for every result, compare values (and, optionally, cycles)."""
    commands, data, sink = ports
    component = bench.component
    before_commands, before_results = len(commands.sent), len(sink.received)
    commands.send([pack(component.cmd_layout, command) for command in program.commands])
    data.send([pack(component.data_layout, [int(value) for value in word])
               for words in program.inputs for word in words])
    expected = np.concatenate(program.outputs)
    budget = sum(schedule.issue_cycles + 2 for schedule in program.schedules)
    await bench.wait_until(lambda: commands.idle and data.idle and len(sink.received) >= before_results + len(expected),
                           timeout=20 * budget + 200, what=f"{len(expected)} result words")
    for _ in range(10):  # nothing extra may follow
        await RisingEdge(bench.dut.clk)
    received = sink.received[before_results:]
    assert len(received) == len(expected), \
        f"expected {len(expected)} result words, got {len(received)} {bench.where()}"
    layout = component.result_layout
    actual = np.array([[unpack(layout, bits)[lane] for lane in range(program.n_r)] for _, bits in received],
                      dtype=np.int64).reshape(-1, program.n_r)
    first = 0
    for label, outputs in zip(program.labels, program.outputs):
        rows = slice(first, first + len(outputs))
        wrong = np.argwhere(actual[rows] != outputs)
        assert wrong.size == 0, (
            f"{label}: word {wrong[0][0]} lane {wrong[0][1]} expected {outputs[tuple(wrong[0])]} "
            f"got {actual[rows][tuple(wrong[0])]} ({len(wrong)} mismatches) {bench.where()}")
        first += len(outputs)
    if check_cycles:
        accepted = [cycle for cycle, _ in commands.sent[before_commands:]]
        cycles = np.array([cycle for cycle, _ in received], dtype=np.int64)
        first = 0
        for label, schedule, accept in zip(program.labels, program.schedules, accepted):
            count = len(schedule.output_offsets)
            actual_offsets = cycles[first:first + count] - accept
            assert np.array_equal(actual_offsets, schedule.output_offsets), (
                f"{label}: output cycles after acceptance expected {schedule.output_offsets.tolist()} "
                f"got {actual_offsets.tolist()} {bench.where()}")
            first += count
        for (label, schedule), this, following in zip(zip(program.labels, program.schedules), accepted, accepted[1:]):
            assert following - this == schedule.issue_cycles + golden.COMMAND_LATENCY, (
                f"{label}: next command accepted {following - this} cycles later, expected "
                f"{schedule.issue_cycles + golden.COMMAND_LATENCY} {bench.where()}")


@cocotb.test()
async def random_matrices_with_backpressure(dut):
    """Random non-square matrices of random sizes, every microprogram, random valid gaps and ready."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed)
    depth = bench.params["sram_depth"]
    matrices = []
    for count in range(3):
        rows, cols = random_shape(bench, generator, depth // 3)
        matrices.append(random_matrix(bench, generator, rows, cols))
    ports = attach(bench, valid_probability=0.7, ready_probability=0.6)
    await run_and_check(bench, random_program(bench, generator, matrices), ports)


@cocotb.test()
async def cycle_exact_without_stalls(dut):
    """No backpressure: every result word arrives at the cycle of the golden schedule."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 1)
    n_r, max_blocks = bench.params["n_r"], bench.params["max_blocks"]
    shapes = [(n_r * 2 + 1, n_r * 3), (1, n_r + 1), (n_r * max_blocks, 1)]
    matrices = [random_matrix(bench, generator, rows, cols) for rows, cols in shapes
                if golden.blocks(rows, n_r) * golden.blocks(cols, n_r) <= bench.params["sram_depth"] // 3]
    ports = attach(bench, valid_probability=1.0, ready_probability=1.0)
    await run_and_check(bench, random_program(bench, generator, matrices), ports, check_cycles=True)


@cocotb.test()
async def directed_corners(dut):
    """All zeros; most negative operands everywhere; a vector shorter than n_r; one row and one column."""
    bench = await start(dut)
    n_r = bench.params["n_r"]
    low, high = operand_range(bench)
    generator = np.random.default_rng(bench.seed + 2)
    ports = attach(bench, valid_probability=0.8, ready_probability=0.7)
    program = Program(bench)
    zeros = np.zeros((n_r + 1, 2 * n_r), dtype=np.int64)
    program.load(zeros, 0)
    program.forward(zeros, 0, np.zeros(n_r + 1), overlap=True)
    program.backward(zeros, 0, np.zeros(2 * n_r), overlap=False)
    program.gemm(zeros, 0, np.zeros((2 * n_r, 3)))
    extreme = np.full((2 * n_r, n_r), low, dtype=np.int64)
    program.load(extreme, 8)
    program.forward(extreme, 8, np.full(2 * n_r, low), overlap=False)
    program.backward(extreme, 8, np.full(n_r, high), overlap=True)
    program.gemm(extreme, 8, np.full((n_r, n_r), low))
    short = random_matrix(bench, generator, n_r - 1, 1)  # vector shorter than n_r, one output
    program.load(short, 16)
    program.forward(short, 16, random_matrix(bench, generator, 1, n_r - 1), overlap=True)
    program.backward(short, 16, random_matrix(bench, generator, 1, 1), overlap=True)
    program.gemm(short, 16, random_matrix(bench, generator, 1, 1))
    await run_and_check(bench, program, ports)


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset in the middle of a program drops it; the core then runs a fresh program correctly."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 3)
    ports = attach(bench, valid_probability=0.8, ready_probability=0.6)
    commands, data, sink = ports
    weights = random_matrix(bench, generator, 3 * bench.params["n_r"], 2 * bench.params["n_r"])
    program = random_program(bench, generator, [weights])
    component = bench.component
    commands.send([pack(component.cmd_layout, command) for command in program.commands])
    data.send([pack(component.data_layout, [int(value) for value in word])
               for words in program.inputs for word in words])
    for _ in range(bench.rng.randrange(20, 80)):
        await RisingEdge(dut.clk)
    commands.drop()
    data.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_data__valid.value == 0, f"o_data still valid after reset {bench.where()}"
    assert dut.i_cmd__ready.value == 1, f"core not ready for a command after reset {bench.where()}"
    await run_and_check(bench, random_program(bench, generator, [weights]), ports)
