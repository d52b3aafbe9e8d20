"""cocotb testbench of ``nt_pe`` against :func:`trainforge.golden.neurotrainer.pe.nt_pe`."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.neurotrainer.pe import nt_pe, pass_shape
from trainforge.spec.neurotrainer.pe_program import OP_MAC, OP_MAX, PE_PROGRAM_LAYOUT, decode_pe_program, \
    encode_pe_program

from trainforge.cocotb_streams import StreamSink, StreamSource, pack, unpack
from tbutil import start


class Session:
    """A sequence of passes: program words and the two fill streams' blocks."""

    def __init__(self, lanes):
        self.lanes = lanes
        self.programs = []
        self.blocks1 = []
        self.blocks2 = []

    def add(self, word, block1=None, block2=None):
        """Append a pass; ``block1``/``block2`` are new blocks it reads (None: it reuses a held block)."""
        self.programs.append(word)
        if block1 is not None:
            self.blocks1.append(np.asarray(block1, dtype=np.int64).ravel() & 0xFFFFFFFF)
        if block2 is not None:
            self.blocks2.append(np.asarray(block2, dtype=np.int64).reshape(-1, self.lanes) & 0xFFFFFFFF)


def random_words(generator, shape, full_range_probability=0.2):
    """Random 32-bit words, small (sums stay in range) or, sometimes, full range (saturation)."""
    if generator.random() < full_range_probability:
        return generator.integers(0, 1 << 32, size=shape)
    scale = int(generator.choice([1 << 4, 1 << 12, 1 << 20]))
    return generator.integers(-scale, scale, size=shape) & 0xFFFFFFFF


def random_session(bench, generator, passes, max_probability=0.25):
    """Random passes: MAC (16/32-bit, SR on/off, transpose, accumulate, holds) and MAX windows.

    BUF Output is a memory that neither reset nor a new test clears, so a pass accumulates only
    onto rows an earlier MAC pass of the same session has written.
    """
    pe = bench.component
    half1, half2 = pe.in1_depth // 2, pe.in2_depth // 2
    session = Session(pe.lanes)
    held1 = None   # (rows, columns) of a BUF1 block kept by hold1
    held2 = None   # rows of a BUF2 block kept by hold2
    written = 0    # BUF Output rows 0 .. written-1 hold results of this session
    for index in range(passes):
        op = OP_MAX if generator.random() < max_probability else OP_MAC
        if op == OP_MAC and held1 is not None:
            rows, columns = held1
        else:
            rows = int(generator.integers(1, min(8, half1) + 1))
            columns = int(generator.integers(1, min(8, half1 // rows) + 1))
        steps = rows * columns
        per_output_limit = min(steps + 2, 255) if held2 is None else held2
        per_output = int(generator.integers(1, per_output_limit + 1))
        if held2 is None:
            per_output = min(per_output, half2)
        outputs = -(-steps // per_output)
        fields = {
            "op": op,
            "wide": int(generator.random() < 0.6),
            "sr": int(generator.random() < 0.7),
            "transpose": int(generator.random() < 0.4),
            "accumulate": int(op == OP_MAC and outputs <= written and generator.random() < 0.4),
            "emit": int(generator.random() < 0.85 or index == passes - 1),
            "hold1": int(generator.random() < 0.25),
            "hold2": int(generator.random() < 0.25),
            "cnt2_outer": rows - 1,
            "cnt2_inner": columns - 1,
            "cnt1": per_output - 1,
        }
        block1 = block2 = None
        if op == OP_MAC and held1 is None:
            length = min(steps + int(generator.integers(0, 3)), half1)
            block1 = random_words(generator, length)
        if held2 is None:
            length = min(min(per_output, steps) + int(generator.integers(0, 3)), half2)
            if op == OP_MAX and generator.random() < 0.5:
                block2 = generator.integers(-3, 3, size=(length, pe.lanes)) & 0xFFFF   # ties
            else:
                block2 = random_words(generator, (length, pe.lanes))
        if op == OP_MAC:
            held1 = (rows, columns) if fields["hold1"] else None
            written = max(written, min(outputs, pe.out_depth))
        if not fields["hold2"]:
            held2 = None
        elif block2 is not None:
            held2 = len(block2)
        session.add(encode_pe_program(**fields), block1, block2)
    return session


def attach(bench, program_probability, fill_probability, ready_probability):
    dut, cycle, rng = bench.dut, bench.cycle, bench.rng
    return (StreamSource(dut, "i_program", cycle, rng, program_probability),
            StreamSource(dut, "i_in1", cycle, rng, fill_probability),
            StreamSource(dut, "i_in2", cycle, rng, fill_probability),
            StreamSink(dut, "o_result", cycle, rng, ready_probability))


def send(bench, sources, session):
    pe = bench.component
    program_source, in1_source, in2_source, _ = sources
    program_source.send([pack(PE_PROGRAM_LAYOUT, decode_pe_program(word)) for word in session.programs])
    in1_source.send([pack(pe.in1_layout, {"data": int(word), "last": int(i == len(block) - 1)})
                     for block in session.blocks1 for i, word in enumerate(block)])
    in2_source.send([pack(pe.in2_layout, {"data": [int(v) for v in row], "last": int(i == len(block) - 1)})
                     for block in session.blocks2 for i, row in enumerate(block)])


def decode(bench, received):
    layout = bench.component.result_layout
    views = [unpack(layout, payload) for _, payload in received]
    results = np.array([[int(word) for word in view.y] for view in views], dtype=np.uint64)
    return results.reshape(-1, bench.component.lanes), np.array([bool(view.last) for view in views], dtype=bool)


def describe(session, result):
    """Which pass a result belongs to, for failure messages."""
    counts = [pass_shape(decode_pe_program(word))[2] if decode_pe_program(word)["emit"] else 0
              for word in session.programs]
    bounds = np.cumsum(counts)
    index = int(np.searchsorted(bounds, result, side="right"))
    return f"pass {index} ({decode_pe_program(session.programs[index])})" if index < len(counts) else "beyond"


async def run_and_check(bench, sources, session, label, expect_cycles=False):
    """Send a session, wait for its results and compare them with the golden model."""
    sink = sources[3]
    expected = nt_pe(session.programs, session.blocks1, session.blocks2, **bench.params)
    before = len(sink.received)
    first_sent = [len(source.sent) for source in sources[:3]]
    count = len(expected["results"])
    send(bench, sources, session)
    work = sum(pass_shape(decode_pe_program(word))[3] + 8 for word in session.programs) \
        + sum(map(len, session.blocks1)) + sum(map(len, session.blocks2))
    await bench.wait_until(lambda: len(sink.received) >= before + count and all(s.idle for s in sources[:3]),
                           timeout=12 * work + 200, what=f"{count} results ({label})")
    for _ in range(8):
        await RisingEdge(bench.dut.clk)
    received = sink.received[before:]
    results, last = decode(bench, received)
    assert len(results) == count, f"{label}: expected {count} results, got {len(results)} {bench.where()}"
    bad = np.argwhere(results != expected["results"])
    if bad.size:
        row, lane = bad[0]
        raise AssertionError(
            f"{label}: result {row} ({describe(session, row)}) lane {lane}: expected "
            f"{int(expected['results'][row, lane]):#010x}, got {int(results[row, lane]):#010x} "
            f"({len(bad)} mismatching words) {bench.where()}")
    wrong_last = np.flatnonzero(last != expected["last"])
    assert wrong_last.size == 0, (f"{label}: result {wrong_last[0]} last flag expected "
                                  f"{expected['last'][wrong_last[0]]}, got {last[wrong_last[0]]} {bench.where()}")
    if expect_cycles:
        start_cycle = sources[2].sent[first_sent[2]][0]
        actual = np.array([cycle for cycle, _ in received], dtype=np.int64) - start_cycle
        late = np.flatnonzero(actual != expected["cycles"])
        assert late.size == 0, (f"{label}: result {late[0]} ({describe(session, late[0])}) expected at cycle "
                                f"{expected['cycles'][late[0]]}, got {actual[late[0]]} {bench.where()}")
        accepted = np.array([cycle for cycle, _ in sources[0].sent[first_sent[0]:]], dtype=np.int64) - start_cycle
        wrong = np.flatnonzero(accepted != expected["accept"])
        assert wrong.size == 0, (f"{label}: program {wrong[0]} expected accepted at cycle "
                                 f"{expected['accept'][wrong[0]]}, got {accepted[wrong[0]]} {bench.where()}")


@cocotb.test()
async def random_passes_with_backpressure(dut):
    """Random MAC/MAX programs with random valid gaps on all three inputs and random ready on o_result."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed)
    sources = attach(bench, program_probability=0.5, fill_probability=0.6, ready_probability=0.5)
    await run_and_check(bench, sources, random_session(bench, generator, 24), "random passes")


@cocotb.test()
async def cycle_exact_without_backpressure(dut):
    """With every stream always valid/ready, every result and program acceptance is on the golden cycle."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 1)
    sources = attach(bench, program_probability=1.0, fill_probability=1.0, ready_probability=1.0)
    await run_and_check(bench, sources, random_session(bench, generator, 16), "no backpressure",
                        expect_cycles=True)


def matrix_pass(session, matrix, vectors, transpose=False, reuse=False, **fields):
    """A MAC pass of BUF1 block ``matrix`` (rows x columns), or its transpose, times BUF2 rows ``vectors``.

    ``reuse``: the block was held by the previous pass and is not sent again.
    """
    rows, columns = matrix.shape
    reduce = rows if transpose else columns
    word = encode_pe_program(op=OP_MAC, transpose=int(transpose), cnt2_outer=rows - 1, cnt2_inner=columns - 1,
                             cnt1=reduce - 1, **fields)
    session.add(word, None if reuse else matrix, vectors)


@cocotb.test()
async def corner_cases(dut):
    """All zeros, saturation in both modes, W^T, accumulate across passes, MAX ties and negative windows."""
    bench = await start(dut)
    pe = bench.component
    lanes = pe.lanes
    generator = np.random.default_rng(bench.seed + 2)
    sources = attach(bench, program_probability=0.8, fill_probability=0.7, ready_probability=0.6)
    # Square blocks of `size`; the W^T passes have size + 1 output rows, all in BUF Output.
    size = max(1, min(4, pe.in1_depth // 8, pe.in2_depth // 2, pe.out_depth - 1))
    session = Session(lanes)
    zeros = np.zeros((size, size), dtype=np.int64)
    matrix_pass(session, zeros, np.zeros((size, lanes)), wide=1, sr=1)
    matrix_pass(session, zeros, np.zeros((size, lanes)), wide=0)
    high = np.full((size, size), 0x7FFFFFFF)
    matrix_pass(session, high, np.full((size, lanes), 0x7FFFFFFF), wide=1, sr=1)
    matrix_pass(session, high, np.full((size, lanes), 0x80000000), wide=1, sr=0)
    matrix_pass(session, np.full((size, size), 0x7FFF8000), np.full((size, lanes), 0x7FFF7FFF), wide=0)
    # W^T: the block read transposed, then again (held) accumulated onto the same partial sums.
    matrix = random_words(generator, (size, size + 1), full_range_probability=0)
    matrix_pass(session, matrix, random_words(generator, (size, lanes), 0), transpose=True, wide=1, sr=1,
                hold1=1, emit=0)
    matrix_pass(session, matrix, random_words(generator, (size, lanes), 0), transpose=True, reuse=True, wide=1,
                sr=1, accumulate=1)
    # MAX: all equal (ties keep index 0), all negative, the extremes.
    for values in (np.full((size, lanes), 0x1234), np.full((size, lanes), 0xFFFF8000),
                   generator.choice([0x7FFF, 0x8000, 0xFFFF, 0], size=(size, lanes))):
        session.add(encode_pe_program(op=OP_MAX, cnt2_outer=size - 1, cnt2_inner=0, cnt1=size - 1), None, values)
    await run_and_check(bench, sources, session, "corner cases")


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset drops the passes in flight, empties both buffers' halves and restarts the MAC's random state."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 3)
    sources = attach(bench, program_probability=0.7, fill_probability=0.7, ready_probability=0.6)
    send(bench, sources, random_session(bench, generator, 12))
    for _ in range(bench.rng.randrange(20, 120)):
        await RisingEdge(dut.clk)
    for source in sources[:3]:
        source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_result__valid.value == 0, f"o_result still valid after reset {bench.where()}"
    await run_and_check(bench, sources, random_session(bench, generator, 10), "after reset")
