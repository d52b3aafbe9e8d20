"""The FP MAC pieces outside simulation: the accumulate rule's golden model, stage counts, latencies, interface."""
import numpy as np
import pytest
from amaranth import Signal

from trainforge.golden.fp import fp32_accumulate
from trainforge.hw.dense_pe import DensePE
from trainforge.hw.fp.add import add_cuts
from trainforge.hw.fp.multiply import multiply_cuts
from trainforge.hw.mac import MAC_UNITS
from trainforge.spec import dense_pe as dense_spec

from scenarios.dense_pe import interleaved_float32_sums
from scenarios.fp_mul import float32_bits, flush32


@pytest.mark.parametrize("partials", [1, 2, 4])
def test_accumulate_matches_numpy_float32(seed, partials):
    """``fp32_accumulate`` equals the interleaved accumulator written in numpy float32 (``scenarios.dense_pe``)."""
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(400) * 2.0 ** rng.integers(-30, 30, 400)).astype(np.float32)
    values[5] = np.float32(2.0 ** -130)                     # a subnormal row sum
    values[9] = np.float32("inf")
    values[14] = np.float32("-inf")                         # Inf - Inf in a partial or in the final sum
    values[20:28] = -0.0
    clear = rng.random(400) < 0.1
    clear[0] = True
    read = rng.random(400) < 0.6
    expected = [float32_bits(total) for total in interleaved_float32_sums(
        [flush32(value) for value in values], clear, read, partials)]
    actual = fp32_accumulate(values.view(np.uint32), clear, partials, read)
    assert actual.dtype == np.uint32 and actual.tolist() == expected


def test_accumulate_by_hand():
    one, half, three_halves = 0x3F800000, 0x3F000000, 0x3FC00000
    # One partial: the plain accumulator; a cleared -0 restarts from +0; 1.5 - 1.5 cancels to +0.
    assert fp32_accumulate([0x80000000, 0x80000000], [True, False], 1).tolist() == [0, 0]
    assert fp32_accumulate([three_halves, 0xBFC00000, 0xBFC00000], [True, False, True], 1).tolist() == \
        [three_halves, 0, 0xBFC00000]
    # Four partials, rows 1, 2, 4, 8, 16 after a clear: partials (1+16, 2, 4, 8); read after each row.
    rows = [one, 0x40000000, 0x40800000, 0x41000000, 0x41800000]
    assert fp32_accumulate(rows, [True, False, False, False, False], 4).tolist() == \
        [one, 0x40400000, 0x40E00000, 0x41700000, 0x41F80000]       # 1, 3, 7, 15, 31
    # Rounding order: 2**24 then eight 1.0s. One accumulator rounds each 2**24 + 1 back to 2**24 (a tie, to even).
    big = 0x4B800000                                                  # 2**24
    rows = [big] + [one] * 8
    clear = [True] + [False] * 8
    assert fp32_accumulate(rows, clear, 1, [False] * 8 + [True]).tolist() == [big]
    # Four partials: partial 0 gets rows 0, 4, 8 (2**24, each + 1 a tie back to 2**24), partials 1-3 two 1.0s
    # each; (2**24 + 2) + (2 + 2) = 2**24 + 6, exact.
    assert fp32_accumulate(rows, clear, 4, [False] * 8 + [True]).tolist() == [0x4B800003]
    # A clear restarts every partial: the unwritten ones count as +0.
    assert fp32_accumulate([big, big, half], [True, True, True], 4).tolist() == [big, big, half]


def test_latencies_by_hand():
    """Operand register, multiplier, tree, accumulator, output stage: integer 1+2+1+0+1; FP
    1 + 2 + 7*levels + (P + 1 + 7*ceil(log2 P)) + 1 (tree adders of 7 stages, P partials)."""
    assert dense_spec.latency(DensePE.PARAMS.resolve()) == 5
    assert dense_spec.latency(DensePE.PARAMS.resolve(mac="fp16")) == 1 + 2 + 14 + (4 + 1 + 14) + 1 == 37
    assert dense_spec.latency(DensePE.PARAMS.resolve(mac="bf16", lanes=5)) == 1 + 2 + 21 + 19 + 1 == 44
    assert dense_spec.latency(DensePE.PARAMS.resolve(mac="bf16", lanes=1)) == 1 + 2 + 7 + 19 + 1 == 30
    # One partial sum: the adder (1 stage, the whole adder), the partial's register, no tree.
    assert dense_spec.latency(DensePE.PARAMS.resolve(mac="fp16", partial_sums=1)) == 1 + 2 + 14 + 2 + 1 == 20
    assert dense_spec.latency(DensePE.PARAMS.resolve(mac="fp16", partial_sums=2)) == 1 + 2 + 14 + 10 + 1 == 28
    # Eight partials: the operands' register and one adder step per stage (8), 3 tree levels over them.
    assert dense_spec.latency(DensePE.PARAMS.resolve(mac="fp16", partial_sums=8)) == 1 + 2 + 14 + 30 + 1 == 48


def test_stage_cuts():
    assert [len(add_cuts(stages)) for stages in range(8)] == list(range(8))
    assert [len(multiply_cuts(stages)) for stages in range(3)] == [0, 1, 2]
    for stages in range(1, 8):
        assert add_cuts(stages)[-1] == 6, "the last stage holds the sum"
    with pytest.raises(ValueError):
        add_cuts(8)
    with pytest.raises(ValueError):
        multiply_cuts(3)


def test_float_zero_detector_reads_the_exponent():
    unit = MAC_UNITS["bf16"](DensePE.PARAMS.resolve(mac="bf16"))
    operand = Signal(16)
    assert len(unit.is_zero(operand)) == 1
    assert unit.operand_shape.width == 16 and unit.product_shape.width == 32 and unit.result_shape.width == 32


def _run_unit(mac, lanes, cases, latency):
    """Feed ``cases`` (a, b, active lists per lane) to a FloatMAC's multiply+reduce, one per cycle; the sums and
    zero flags seen ``latency`` cycles later."""
    from amaranth import Module
    from amaranth.sim import Simulator

    unit = MAC_UNITS[mac](DensePE.PARAMS.resolve(mac=mac, lanes=lanes))
    m = Module()
    a = [Signal(16, name=f"a{lane}") for lane in range(lanes)]
    b = [Signal(16, name=f"b{lane}") for lane in range(lanes)]
    active = [Signal(name=f"active{lane}") for lane in range(lanes)]
    zero = [Signal(name=f"zero{lane}") for lane in range(lanes)]
    m.d.comb += [zero[lane].eq(unit.is_zero(a[lane])) for lane in range(lanes)]
    products = [unit.multiply(m, a[lane], b[lane], active[lane], 1, f"lane{lane}") for lane in range(lanes)]
    row_sum = Signal(32)
    m.d.comb += row_sum.eq(unit.reduce(m, products, 1, "tree"))
    sums, zeros = [], []
    simulator = Simulator(m)
    simulator.add_clock(1e-6)

    async def bench(ctx):
        for cycle in range(len(cases) + latency):
            if cycle < len(cases):
                for lane in range(lanes):
                    ctx.set(a[lane], cases[cycle][0][lane])
                    ctx.set(b[lane], cases[cycle][1][lane])
                    ctx.set(active[lane], cases[cycle][2][lane])
                zeros.append([ctx.get(zero[lane]) for lane in range(lanes)])
            if cycle >= latency:
                sums.append(ctx.get(row_sum))
            await ctx.tick()

    simulator.add_testbench(bench)
    simulator.run()
    return sums, zeros


@pytest.mark.parametrize("mac,lanes", [("fp16", 3), ("bf16", 4), ("bf16", 1)])
def test_float_unit_multiply_reduce_and_zero_detector(mac, lanes, seed):
    """``multiply`` (idle lanes give +0), ``reduce`` (the golden tree order) and ``is_zero`` of ``FloatMAC``."""
    from trainforge.golden.fp import fp32_sum_tree, fp_mul_exact
    from trainforge.spec.mac import FLOAT_FORMATS

    fmt = FLOAT_FORMATS[mac]
    rng = np.random.default_rng(seed)
    rows = 40
    a = rng.integers(0, 1 << 16, (rows, lanes))
    b = rng.integers(0, 1 << 16, (rows, lanes))
    a[::5] &= 0x807F if mac == "bf16" else 0x83FF    # zeros and subnormals: exponent field 0
    active = rng.random((rows, lanes)) < 0.7
    # An idle lane holding Inf x 0 would be NaN if it were multiplied.
    a[3], b[3], active[3] = fmt.infinity(), 0, False
    cases = [(a[row].tolist(), b[row].tolist(), active[row].astype(int).tolist()) for row in range(rows)]
    unit = MAC_UNITS[mac](DensePE.PARAMS.resolve(mac=mac, lanes=lanes))
    latency = unit.multiply_stages + unit.tree_stages
    sums, zeros = _run_unit(mac, lanes, cases, latency)
    products = np.where(active, fp_mul_exact(a, b, fmt), 0)
    assert sums == fp32_sum_tree(products, axis=1).tolist()
    exponent = (a >> fmt.fraction_bits) & fmt.exponent_max_field
    assert zeros == (exponent == 0).astype(int).tolist()


def _narrowing_inputs(rng, count):
    """FP32 patterns for the FP32 -> FP16 rounding: every exponent field with the fractions that decide the
    rounding (ties to even and odd, just above and below a tie, all ones: the carry), both signs; then random."""
    fractions = [0, 1, 0x1000, 0x1001, 0xFFF, 0x3000, 0x2FFF, 0x7FE000, 0x7FF000, 0x7FEFFF, 0x7FFFFF, 0x400000]
    corners = [(sign << 31) | (exponent << 23) | fraction
               for sign in (0, 1) for exponent in range(256) for fraction in fractions]
    return np.concatenate([np.array(corners, dtype=np.uint32),
                           rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)])


def _run_narrowing(values, pipelined):
    """``values`` through the one-cycle ``fp32_to_fp16`` (registered once) or ``fp32_to_fp16_pipelined``
    (its two register stages), one a cycle, with the enable low every third cycle; the results in order."""
    from amaranth import Module
    from amaranth.sim import Simulator

    from trainforge.hw.fp.convert import fp32_to_fp16, fp32_to_fp16_pipelined

    m = Module()
    bits, enable, result = Signal(32), Signal(), Signal(16)
    if pipelined:
        m.d.comb += result.eq(fp32_to_fp16_pipelined(m, bits, enable=enable, name="narrow"))
    else:
        with m.If(enable):
            m.d.sync += result.eq(fp32_to_fp16(m, bits, "narrow"))
    latency = 2 if pipelined else 1
    got = []
    simulator = Simulator(m)
    simulator.add_clock(1e-6)

    async def bench(ctx):
        fed, taken = 0, 0
        cycle = 0
        while taken < len(values):
            on = cycle % 3 != 2
            ctx.set(enable, on)
            if fed < len(values):
                ctx.set(bits, int(values[fed]))
            await ctx.tick()
            if on:
                fed += 1
                if fed > latency - 1 + taken and fed >= latency:
                    got.append(ctx.get(result))
                    taken += 1
            cycle += 1

    simulator.add_testbench(bench)
    simulator.run()
    return got


def test_pipelined_narrowing_equals_golden(seed):
    """``fp32_to_fp16_pipelined`` (two register stages, clock-enabled) gives ``golden.fp.fp32_to_fp16``'s bits,
    as the one-cycle ``fp32_to_fp16`` does, on every exponent with the rounding corners and on random values."""
    from trainforge.golden.fp import fp32_to_fp16 as golden_narrow

    values = _narrowing_inputs(np.random.default_rng(seed), 2000)
    expected = [int(v) for v in golden_narrow(values)]
    assert _run_narrowing(values, pipelined=True) == expected
    assert _run_narrowing(values, pipelined=False) == expected
