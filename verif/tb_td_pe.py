"""cocotb testbench of ``td_pe``: its scenario table, random gaps and stalls, a reset mid-stream and the stalled
occupancy (all also run on ``td_tile``).

The transactions (dense to all-zero, adversarial and backpressured streams)
are the table of ``verif/scenarios/td_pe.py``. :class:`Harness` drives a PE
or a tile with free-form streams (the reset test, and the layer runs of
``tb_td_tile_layer``): values are compared with the golden model and, with
a full-rate source and sink, or with the source's ``valid`` and the sink's
``ready`` of every cycle given to it, every result's cycle with the golden
cycle model (:mod:`trainforge.golden.tensordash.core`).
"""
import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from trainforge.golden.dense_pe import wrap
from trainforge.golden.fp import to_bits
from trainforge.spec.mac import FLOAT_FORMATS
from trainforge.spec.tensordash import result_cycle
from trainforge.golden.tensordash.pe import pad_stream, td_pe, td_pe_cycles, td_tile, td_tile_cycles
from trainforge.hw.tensordash.tile import TDTile
from trainforge.cocotb_streams import StreamSink, StreamSource, pack, unpack

from scenario import table_test
from regression import regression_test
import scenarios.td_pe as table
from tbutil import start


class Harness:
    """Stimulus, encoding, golden results and golden timing for a PE (1 x 1) or a tile (rows x cols)."""

    def __init__(self, bench):
        self.bench = bench
        self.component = component = bench.component
        self.is_tile = isinstance(component, TDTile)
        self.rows, self.cols = (component.rows, component.cols) if self.is_tile else (1, 1)
        self.lanes, self.depth = component.lanes, component.depth
        self.generator = np.random.default_rng(bench.seed)
        self.format = FLOAT_FORMATS.get(component.params["mac"])
        if component.is_signed:
            self.low, self.high = -(1 << (component.width - 1)), (1 << (component.width - 1)) - 1
        else:
            self.low, self.high = 0, (1 << component.width) - 1

    def values(self, mask):
        """Random non-zero operands where ``mask``, zeros elsewhere (FP: bit patterns of normal numbers of
        both signs over 2**-8 .. 2**8, so sums round)."""
        if self.format is not None:
            scale = np.exp2(self.generator.integers(-8, 9, size=mask.shape))
            bits = to_bits(self.generator.standard_normal(mask.shape) * scale, self.format).astype(np.int64)
            bits[(bits >> self.format.fraction_bits) & self.format.exponent_max_field == 0] = \
                to_bits(np.float32(1.0), self.format)
            return np.where(mask, bits, 0)
        values = self.generator.integers(self.low, self.high, size=mask.shape, endpoint=True)
        values[values == 0] = 1
        return np.where(mask, values, 0)

    def flags(self, total, longest=24):
        """Dot products of random lengths 1..longest: clear on the first row, read on the last."""
        clear = np.zeros(total, bool)
        read = np.zeros(total, bool)
        start_row = 0
        while start_row < total:
            end = min(total, start_row + int(self.generator.integers(1, longest, endpoint=True)))
            clear[start_row] = True
            read[end - 1] = True
            start_row = end
        return clear, read

    def stream(self, total, density_a, density_b, mask_b=None):
        """Operands ``a`` (T, cols, lanes) and ``b`` (T, rows, lanes) at the given densities."""
        mask_a = self.generator.random((total, self.cols, self.lanes)) < density_a
        if mask_b is None:
            mask_b = self.generator.random((total, self.rows, self.lanes)) < density_b
        return self.values(mask_a), self.values(mask_b)

    def row(self, a, b, clear, read, t):
        if self.is_tile:
            return {"a": [[int(v) for v in a[t, c]] for c in range(self.cols)],
                    "b": [[int(v) for v in b[t, r]] for r in range(self.rows)],
                    "clear": int(clear[t]), "read": int(read[t])}
        return {"a": [int(v) for v in a[t, 0]], "b": [int(v) for v in b[t, 0]],
                "clear": int(clear[t]), "read": int(read[t])}

    def encode(self, a, b, clear, read):
        """Groups of ``depth`` rows, the last padded with zero rows (as the golden model pads)."""
        a, b, clear, read = pad_stream((a, b), clear, read, self.depth)
        layout = self.component.group_layout
        return [pack(layout, [self.row(a, b, clear, read, g + j) for j in range(self.depth)])
                for g in range(0, len(clear), self.depth)]

    def expected(self, a, b, clear, read, offered=None, ready=None):
        """Golden results; ``offered`` and ``ready``: the source's ``valid`` and the sink's ``ready`` per cycle
        from the first transfer (default: always)."""
        params = self.bench.params
        if self.is_tile:
            return td_tile(a, b, clear, read, offered=offered, ready=ready, **params).reshape(-1, self.rows * self.cols)
        return td_pe(a[:, 0], b[:, 0], clear, read, offered=offered, ready=ready, **params)[:, None]

    def cycle_model(self, a, b, clear, read, offered=None, ready=None):
        params = self.bench.params
        if self.is_tile:
            return td_tile_cycles(a, b, clear, read, record=True, offered=offered, ready=ready, **params)
        return td_pe_cycles(a[:, 0], b[:, 0], clear, read, record=True, offered=offered, ready=ready, **params)

    def decode(self, bits):
        component = self.component
        if self.is_tile:
            view = unpack(component.result_shape, bits)
            raw = [int(view[r][c]) for r in range(self.rows) for c in range(self.cols)]
        else:
            raw = [int(bits)]
        if self.format is not None:
            return np.array(raw, dtype=np.uint32)
        mask = (1 << component.acc_width) - 1
        return wrap(np.array([v & mask for v in raw], dtype=np.uint64), component.acc_width, component.is_signed)


def attach(bench, valid_probability, ready_probability):
    return (StreamSource(bench.dut, "i_group", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_sum", bench.cycle, bench.rng, ready_probability))


async def send_and_check(harness, source, sink, a, b, clear, read, label, exact_timing=False):
    """Send one stream, compare every result with the golden model and, if ``exact_timing``, its cycle."""
    bench = harness.bench
    expected = harness.expected(a, b, clear, read)
    before_sent, before = len(source.sent), len(sink.received)
    source.send(harness.encode(a, b, clear, read))
    await bench.wait_until(lambda: source.idle and len(sink.received) >= before + len(expected),
                           timeout=40 * len(a) + 200, what=f"{len(expected)} results ({label})")
    for _ in range(5):
        await RisingEdge(bench.dut.clk)
    received = sink.received[before:]
    assert len(received) == len(expected), \
        f"{label}: expected {len(expected)} results, got {len(received)} {bench.where()}"
    for k, (_, bits) in enumerate(received):
        actual = harness.decode(bits)
        assert np.array_equal(actual, expected[k]), \
            f"{label}: result {k} expected {expected[k].tolist()} got {actual.tolist()} {bench.where()}"
    if exact_timing:
        model = harness.cycle_model(a, b, clear, read)
        first = source.sent[before_sent][0]
        want = [first + result_cycle(bench.component.params, int(cycle)) for cycle in model.read_cycles[0]]
        got = [cycle for cycle, _ in received]
        late = [k for k in range(len(want)) if want[k] != got[k]]
        assert not late, (f"{label}: result {late[0]} expected at cycle {want[late[0]]} got {got[late[0]]}"
                          f" (golden {model.cycles[0]} scheduling cycles) {bench.where()}")
    return received


async def record_handshakes(bench, into):
    """Append ``(cycle, i_group.valid, o_sum.ready)`` as the DUT sees them, every cycle: the stimulus, not
    the DUT's outputs."""
    dut = bench.dut
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        into.append((bench.cycle.now, int(dut.i_group__valid.value), int(dut.o_sum__ready.value)))


@cocotb.test()
async def gaps_and_stalls(dut):
    """A source with random gaps and a sink with random stalls: every result and its cycle equal the golden
    model given the source's ``valid`` and the sink's ``ready`` per cycle (FP: gaps change which pairs share
    a scheduling cycle, and so the rounding; the golden model follows them)."""
    bench = await start(dut)
    harness = Harness(bench)
    # At valid 0.3 the window is often short when a cycle is scheduled: in the golden model about a third of
    # the FP results of such streams differ from the full-rate ones (none alike in 60 random streams).
    source, sink = attach(bench, 0.3, 0.5)
    seen = []
    cocotb.start_soon(record_handshakes(bench, seen))
    a, b = harness.stream(240, 0.8, 0.5)
    clear, read = harness.flags(len(a))
    source.send(harness.encode(a, b, clear, read))
    groups = -(-len(a) // harness.depth)
    await bench.wait_until(lambda: len(source.sent) == groups and len(sink.received) == int(read.sum()),
                           timeout=80 * len(a) + 200, what=f"{int(read.sum())} results with gaps and stalls")
    first = source.sent[0][0]
    offered = [valid for cycle, valid, _ in seen if cycle >= first]
    ready = [ready for cycle, _, ready in seen if cycle >= first]
    expected = harness.expected(a, b, clear, read, offered, ready)
    for k, (_, bits) in enumerate(sink.received):
        actual = harness.decode(bits)
        assert np.array_equal(actual, expected[k]), \
            f"gaps and stalls: result {k} expected {expected[k].tolist()} got {actual.tolist()} {bench.where()}"
    model = harness.cycle_model(a, b, clear, read, offered, ready)
    want = [first + int(cycle) for cycle in model.result_clocks]
    got = [cycle for cycle, _ in sink.received]
    late = [k for k in range(len(want)) if want[k] != got[k]]
    assert not late and len(want) == len(got), \
        f"gaps and stalls: result {late[0] if late else len(got)} expected at cycle {want} got {got} {bench.where()}"


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset in the middle of a stream empties the buffer and the pipeline; the next stream is exact."""
    bench = await start(dut)
    harness = Harness(bench)
    # FP: the stream after the reset is checked against the full-rate golden model, so the source stays
    # valid (a source with gaps and the golden model that follows it: gaps_and_stalls).
    source, sink = attach(bench, 0.8 if harness.format is None else 1.0, 0.5)
    a, b = harness.stream(120, 0.7, 0.5)
    clear, read = harness.flags(len(a))
    source.send(harness.encode(a, b, clear, read))
    for _ in range(bench.rng.randrange(5, 30)):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_sum__valid.value == 0, f"o_sum still valid after reset {bench.where()}"
    sink.received.clear()
    a, b = harness.stream(80, 0.7, 0.5)
    clear, read = harness.flags(len(a))
    clear[0] = False  # the accumulator is zero after reset
    await send_and_check(harness, source, sink, a, b, clear, read, "after reset")


#: Groups the default PE (and a tile of lanes 4, depth 4, integer MAC) takes while ``o_sum`` is stalled and
#: every row is a dense one-row dot product, worked out by hand from the pipeline. One row leaves the
#: window per scheduling cycle c = 0, 1, ...; results 0 and 1 fill the output stream stage and result 2
#: stops everything at c = 6 in the PE (rows 3-5 in the sum, product and operand registers), at c = 7 in
#: a tile (row 6 in the rotated window too). Until then the group registers take a group whenever at most
#: 8 rows wait in them at the start of a cycle; the rows waiting are 0 and 4 in the two cycles before c = 0
#: (groups 0 and 1 taken), then 4, 7, 10, 9, 8, 11 at c = 0..5 and 10 at c = 6 (groups 2, 3 and 4 taken
#: at c = 0, 1 and 4): 5 groups in both.
STALLED_CAPACITY_GROUPS = 5


@cocotb.test()
async def occupancy_and_ready(dut):
    """``o_sum`` stalled: ``i_group.ready`` falls after the buffers fill (exactly 5 groups for the defaults), stays
    low while nothing leaves, and every result is exact once the sink takes them."""
    bench = await start(dut)
    harness = Harness(bench)
    source, sink = attach(bench, 1.0, 0.0)
    sink.follow((0,))
    total = 16 * harness.depth
    a, b = harness.stream(total, 1.0, 1.0)
    clear = np.ones(total, bool)
    read = np.ones(total, bool)
    source.send(harness.encode(a, b, clear, read))
    low_cycles = 0
    for _ in range(200):  # ready may dip while the buffers fill; wait until it stays low
        await RisingEdge(dut.clk)
        low_cycles = low_cycles + 1 if dut.i_group__ready.value == 0 else 0
        if low_cycles == 20:
            break
    assert low_cycles == 20, f"i_group.ready never stayed low with the sink stalled {bench.where()}"
    accepted = len(source.sent)
    for _ in range(40):
        await RisingEdge(dut.clk)
        assert dut.i_group__ready.value == 0, f"i_group.ready rose while nothing left {bench.where()}"
    assert len(source.sent) == accepted, f"{len(source.sent) - accepted} groups taken with ready low {bench.where()}"
    assert not sink.received, f"results left while the sink was stalled {bench.where()}"
    params = bench.component.params
    if (params["lanes"], params["depth"], params["mac"]) == (4, 4, "integer"):
        assert accepted == STALLED_CAPACITY_GROUPS, \
            f"took {accepted} groups while stalled, expected {STALLED_CAPACITY_GROUPS} {bench.where()}"
    sink.follow((1,))
    expected = harness.expected(a, b, clear, read)
    await bench.wait_until(lambda: source.idle and len(sink.received) == len(expected), timeout=40 * total,
                           what=f"{len(expected)} results after the stall")
    for k, (_, bits) in enumerate(sink.received):
        actual = harness.decode(bits)
        assert np.array_equal(actual, expected[k]), \
            f"result {k} expected {expected[k].tolist()} got {actual.tolist()} {bench.where()}"


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/td_pe.py``: values as the reference, cycles as the golden cycle "
    "model at full rate."
))


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
