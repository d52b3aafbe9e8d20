"""Scenario table of ``cp_pe``: a hand-worked sequence, random controls, zeros and the most negative operands.

The PE has no streams (the core's sequencer drives its controls every cycle),
so a scenario's stimulus is the local memory image (``"memory"``, written
before the sequence) and the controls of each *enabled* cycle
(``"controls"``: dicts of ``rd_en``, ``rd_addr``, ``mac_op``, ``mac_clear``, ``handoff``,
``red_add``, ``row_bus``, ``col_bus``, ``red_in``); ``valid["en"]`` is the
per-cycle pattern of ``en`` (a low cycle changes nothing). The expected
transactions are the accumulator (``"acc"``) and the reduction register
(``"red"``) after each enabled cycle.

Reference (independent of the vectorised golden model): the PE written out
cycle by cycle on Python ints, its pipeline registers named. In enabled cycle
``t`` with ``rd_en`` the SRAM reads ``rd_addr`` (without it the read port keeps its last word); the
word enters the SRAM output register in ``t + 1`` and is ``mem_data`` in ``t + 2`` (zero before, the register's reset
value; no MAC takes ``mem_data`` in the first two cycles). The operand stage
of cycle ``t`` takes its bus operands (the bus's low ``width`` bits,
sign-extended) and ``mem_data`` into the multiplier's input registers with
``mac_clear`` and ``handoff``; the product is registered in ``t + 1``; in
``t + 2`` the MAC adds it to the accumulator (or to zero with ``mac_clear``),
wrapping to ``acc_width`` bits, and ``handoff`` copies that sum into ``red``;
``red_add`` of cycle ``t`` adds ``red_in`` to ``red`` (wrapping) unless a
handoff lands in ``t``.

With ``mac="fp16"`` the same cycle model runs on numpy's IEEE arithmetic
(``verif/fp_oracle.py``) in the hardware's order: the operands (SRAM words,
the low 16 bits of the buses) are float16, the product is the float32
product of the two widened to float32 (exact), the accumulate stage adds it
to the float32 accumulator (or to +0 with ``mac_clear``), ``red_add`` adds
``red_in`` (float32 bits) to ``red``; subnormals are flushed on input and
output and a NaN is the canonical 0x7FC00000. The expected ``acc`` and
``red`` are the float32 bit patterns as signed 32-bit integers (the ports'
view). The FP rows: the hand-worked sequence on exact small integers (its
expected values written by hand as float32 bits), random normal operands,
random bit patterns (every special), and a row of infinities, NaNs,
subnormals and overflows.

With ``mac="fp16"`` and ``partial_sums`` ``P`` above 1 (the interleaved
accumulator), the accumulate stage of cycle ``t`` takes the product as row
``j`` of the sum (rows counted from 0 at a ``mac_clear`` row, and from the
reset): partial ``j mod P`` becomes ``+0 + p`` (``j < P``) or itself ``+ p``;
the row's result is the pairwise sum of the partials as they are then
(``(q0 + q1) + (q2 + q3)`` for 4; a partial not written since the clear is
``+0``). The result is written into ``acc`` (with the row's ``handoff``, into
``red``, winning over that cycle's ``red_add``) at the end of cycle
``t + pe_accumulate_latency(P)``. Every add is one ``oracle_add`` (numpy
float32). A hand-worked row checks the order: ``2**24 + 1 + 1 + 1`` is
``2**24`` added in turn (each ``+ 1`` is a tie, rounded to even) but
``(2**24 + 1) + (1 + 1) = 2**24 + 2`` by the partials.
"""
import numpy as np

from trainforge.golden.caterpillar.pe import cp_pe
from trainforge.spec.caterpillar import MacOp, pe_accumulate_latency, pe_reduction_latency
from trainforge.spec.fp import FP16

from fp_oracle import QUIET_NAN32, oracle_add, oracle_mul
from scenario import Scenario, Transactions, random_pattern, rng_for

CONTROL_NAMES = ("rd_en", "rd_addr", "mac_op", "mac_clear", "handoff", "red_add", "row_bus", "col_bus", "red_in")


def _signed(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


class FixedArithmetic:
    """Two's complement: exact products, sums wrapping to ``acc_width`` bits."""

    def __init__(self, width, acc_width):
        self.width, self.acc_width = width, acc_width

    def operand(self, value):
        return _signed(value, self.width)

    def multiply(self, first, second):
        return first * second

    def add(self, x, y):
        return _signed(x + y, self.acc_width)


class HalfPrecisionArithmetic:
    """numpy float16 operands, exact float32 products, float32 sums (flushed, canonical NaN); values are bits."""
    width, acc_width = 16, 32

    @staticmethod
    def _bits(result):
        value = int(np.asarray(result, dtype=np.float32).view(np.uint32))
        return QUIET_NAN32 if np.isnan(result) else value

    def operand(self, value):
        return value & 0xFFFF

    def multiply(self, first, second):
        return self._bits(oracle_mul(first, second, FP16))

    def add(self, x, y):
        return self._bits(oracle_add(x & 0xFFFFFFFF, y & 0xFFFFFFFF))


class InterleavedAccumulator:
    """The interleaved FP32 accumulator of ``P`` partial sums, one row at a time (the module docstring)."""

    def __init__(self, arithmetic, partials):
        self.arithmetic, self.partials = arithmetic, partials
        self.values, self.rows = [0] * partials, 0  # FP32 bits; rows since the clear (reset: a clear)

    def row(self, product, clear):
        """Add ``product`` as the next row (the first of a sum with ``clear``); return the row's result."""
        if clear:
            self.rows = 0
        index = self.rows % self.partials
        start = self.values[index] if self.rows >= self.partials else 0
        self.values[index] = self.arithmetic.add(start, product)
        self.rows += 1
        level = [value if k < self.rows else 0 for k, value in enumerate(self.values)]
        while len(level) > 1:
            level = [self.arithmetic.add(level[k], level[k + 1]) for k in range(0, len(level), 2)]
        return level[0]


class OneCycleReduction:
    """The one-cycle reduction register: a landing handoff writes its value, else ``red_add`` adds ``red_in``."""

    def __init__(self, arithmetic):
        self.arithmetic = arithmetic

    def step(self, red, handoff_value, red_add, red_in):
        """``red`` after this cycle; ``handoff_value`` is ``None`` when no handoff lands in it."""
        if handoff_value is not None:
            return handoff_value
        return self.arithmetic.add(red, red_in) if red_add else red


class InterleavedReduction:
    """The interleaved reduction of ``P`` partials (the module docstring), one cycle at a time."""

    def __init__(self, arithmetic, partials):
        self.accumulator = InterleavedAccumulator(arithmetic, partials)
        self.latency = pe_reduction_latency(partials)
        self.results = {}  # cycle -> the result of a red_add row, written at the end of that cycle
        self.cycle = 0

    def step(self, red, handoff_value, red_add, red_in):
        """``red`` after this cycle; ``handoff_value`` is ``None`` when no handoff lands in it."""
        if handoff_value is not None:
            self.accumulator.row(handoff_value, True)  # row 0 of a new reduction
        elif red_add:
            self.results[self.cycle + self.latency] = self.accumulator.row(red_in & 0xFFFFFFFF, False)
        result = self.results.pop(self.cycle, None)
        self.cycle += 1
        if handoff_value is not None:
            return handoff_value
        return red if result is None else result


def reference(memory, controls, *, width, acc_width, mac="fixed", partial_sums=1, reduction_partials=1, **_):
    """``(acc, red)`` after each enabled cycle, computed one cycle at a time."""
    if partial_sums != 1:
        return _interleaved_reference(memory, controls, partial_sums, reduction_partials)
    arithmetic = HalfPrecisionArithmetic() if mac == "fp16" else FixedArithmetic(width, acc_width)
    reduction = (OneCycleReduction(arithmetic) if reduction_partials == 1
                 else InterleavedReduction(arithmetic, reduction_partials))
    acc = red = 0
    read = output_register = 0  # the SRAM read port's word and the SRAM output register
    operands = None  # (MAC?, clear, handoff, multiplicand, multiplier): the multiplier's input registers
    multiplied = None  # (MAC?, clear, handoff, product): its output register
    accs, reds = [], []
    for control in controls:
        # accumulate stage
        handoff_value = None
        new_acc = acc
        if multiplied is not None:
            mac_active, clear, landing, product = multiplied
            total = arithmetic.add(0 if clear else acc, product)
            if mac_active:
                new_acc = total
            if landing:
                handoff_value = total
        new_red = reduction.step(red, handoff_value, control["red_add"], control["red_in"])
        multiplied, operands, output_register, read = _front_stages(
            arithmetic, memory, control, multiplied, operands, output_register, read)
        acc, red = new_acc, new_red
        accs.append(_signed(acc, arithmetic.acc_width))
        reds.append(_signed(red, arithmetic.acc_width))
    return accs, reds


def _front_stages(arithmetic, memory, control, multiplied, operands, output_register, read):
    """One cycle of the stages in front of the accumulate stage, the latest first: the multiply stage
    (``operands`` -> ``multiplied``), the operand stage (``control``'s buses and the SRAM output register ->
    ``operands``), then the SRAM output register and read. Returns their next
    ``(multiplied, operands, output_register, read)``."""
    if operands is not None:
        mac_active, clear, handoff, first, second = operands
        multiplied = (mac_active, clear, handoff, arithmetic.multiply(first, second))
    op = control["mac_op"]
    row, col = arithmetic.operand(control["row_bus"]), arithmetic.operand(control["col_bus"])
    first = row if op in (MacOp.ROW_MEM, MacOp.ROW_COL) else col
    second = col if op == MacOp.ROW_COL else arithmetic.operand(output_register)
    operands = (op != MacOp.NONE, control["mac_clear"], control["handoff"], first, second)
    output_register, read = read, memory[control["rd_addr"]] if control["rd_en"] else read
    return multiplied, operands, output_register, read


def _interleaved_reference(memory, controls, partial_sums, reduction_partials):
    """:func:`reference` for ``mac="fp16"`` with the interleaved accumulator of ``partial_sums`` partials."""
    arithmetic = HalfPrecisionArithmetic()
    accumulator = InterleavedAccumulator(arithmetic, partial_sums)
    reduction = (OneCycleReduction(arithmetic) if reduction_partials == 1
                 else InterleavedReduction(arithmetic, reduction_partials))
    latency = pe_accumulate_latency(partial_sums)
    acc = red = 0
    read = output_register = 0
    operands = multiplied = None
    landing = {}  # cycle -> (result, handoff): a row's result written at the end of that cycle
    accs, reds = [], []
    for cycle, control in enumerate(controls):
        # accumulate stage: the row's result is computed now and written latency cycles later
        if multiplied is not None and multiplied[0]:
            mac_active, clear, handoff, product = multiplied
            landing[cycle + latency] = (accumulator.row(product, clear), handoff)
        result, handoff = landing.pop(cycle, (None, False))
        if result is not None:
            acc = result
        new_red = reduction.step(red, result if handoff else None, control["red_add"], control["red_in"])
        multiplied, operands, output_register, read = _front_stages(
            arithmetic, memory, control, multiplied, operands, output_register, read)
        red = new_red
        accs.append(_signed(acc, 32))
        reds.append(_signed(red, 32))
    return accs, reds


def _control(rd_addr=0, mac_op=MacOp.NONE, mac_clear=0, handoff=0, red_add=0, row_bus=0, col_bus=0, red_in=0,
             rd_en=1):
    return {"rd_en": rd_en, "rd_addr": rd_addr, "mac_op": int(mac_op), "mac_clear": mac_clear, "handoff": handoff,
            "red_add": red_add, "row_bus": row_bus, "col_bus": col_bus, "red_in": red_in}


def _random_controls(rng, params, depth, cycles, bus=None):
    """Random controls as the core issues them: no MAC in the first two cycles (no word read yet), a handoff only
    with a MAC; the read skipped a quarter of the time (the MAC then takes the last word read)."""
    half = 1 << (params["acc_width"] - 1)
    controls = []
    for index in range(cycles):
        op = MacOp.NONE if index < 2 else rng.randrange(4)
        controls.append(_control(
            rd_en=int(index < 2 or rng.random() < 0.75), rd_addr=rng.randrange(depth), mac_op=op,
            mac_clear=int(rng.random() < 0.2),
            handoff=int(op != MacOp.NONE and rng.random() < 0.15), red_add=int(rng.random() < 0.4),
            row_bus=rng.randrange(-half, half) if bus is None else bus,
            col_bus=rng.randrange(-half, half) if bus is None else bus,
            red_in=rng.randrange(-half, half) if bus is None else bus))
    return controls


def _scenario(name, params, memory, controls, en=(1,)):
    accs, reds = reference(memory, controls, **params)
    return Scenario(name, {"memory": list(memory), "controls": controls}, {"acc": accs, "red": reds},
                    valid={"en": tuple(en)})


def scenarios(params, seed):
    if params.get("mac", "fixed") == "fp16":
        return _fp16_scenarios(params, seed)
    width = params["width"]
    depth = min(params["sram_depth"], 64)
    half = 1 << (width - 1)
    table = []
    # Hand-worked: memory [3, -2, 5, 7]; the MAC of cycle t lands in cycle t + 2 and takes the word read in
    # t - 2. acc: 3*4 = 12 (cycle 4), 12 + (-5)(-2) = 22, 22 + 2*5 = 32 (handed off in cycle 6, which beats
    # that cycle's red_add), 6*(-3) = -18 after a clear. red: 100 (red_add, cycle 5), 32 (handoff), 32 + 100,
    # 132 - 32.
    memory = [3, -2, 5, 7]  # needs sram_depth >= 4
    controls = [
        _control(rd_addr=0),
        _control(rd_addr=1),
        _control(rd_addr=2, mac_op=MacOp.ROW_MEM, mac_clear=1, row_bus=4),
        _control(rd_addr=3, mac_op=MacOp.ROW_MEM, row_bus=-5),
        _control(rd_addr=0, mac_op=MacOp.COL_MEM, col_bus=2, handoff=1),
        _control(mac_op=MacOp.ROW_COL, mac_clear=1, row_bus=6, col_bus=-3, red_add=1, red_in=100),
        _control(red_add=1, red_in=7),
        _control(red_add=1, red_in=100),
        _control(red_add=1, red_in=-32),
    ]
    worked = Scenario("hand-worked sequence", {"memory": memory, "controls": controls},
                      {"acc": [0, 0, 0, 0, 12, 22, 32, -18, -18], "red": [0, 0, 0, 0, 0, 100, 32, 132, 100]},
                      valid={"en": (1, 1, 0)})
    if width >= 4 and params["acc_width"] >= 9 and params["sram_depth"] >= 4:  # its operands and sums fit
        table.append(worked)
    rng = rng_for(seed, "cp_pe", "random")
    memory = [rng.randrange(-half, half) for _ in range(depth)]
    table.append(_scenario("random controls, en low a third of the time", params, memory,
                           _random_controls(rng, params, depth, 300), random_pattern(rng, 0.67)))
    rng = rng_for(seed, "cp_pe", "zeros")
    small = min(16, params["sram_depth"])
    table.append(_scenario("all-zero operands", params, [0] * small,
                           _random_controls(rng, params, small, 80, bus=0)))
    rng = rng_for(seed, "cp_pe", "most negative")
    controls = _random_controls(rng, params, small, 150)
    for control in controls:
        control.update(mac_clear=0, row_bus=-half, col_bus=-half, red_in=-(1 << (params["acc_width"] - 1)))
    table.append(_scenario("most negative operands (products and sums wrap)", params, [-half] * small, controls,
                           random_pattern(rng, 0.9)))
    return table


# FP16 operand corners: signed zeros, subnormals (flushed), smallest and largest normals, infinities, NaNs.
_FP16_SPECIALS = (0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x8400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
                  0x3C00, 0xBC00, 0x3C01)
# FP32 red_in corners: zeros, a subnormal, the largest finite values, infinities, NaNs, one.
_FP32_SPECIALS = (0x00000000, 0x80000000, 0x00000001, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
                  0x7FC00000, 0x7F800001, 0x3F800000, 0xBF800000)


def _fp16_normal(rng, low, high):
    """Bits of a random FP16 normal number of exponent field in ``[low, high]``, random sign."""
    return (rng.randrange(2) << 15) | (rng.randint(low, high) << 10) | rng.randrange(1 << 10)


def _fp32_normal(rng, low, high):
    """Bits of a random FP32 normal number of exponent field in ``[low, high]``, random sign."""
    return (rng.randrange(2) << 31) | (rng.randint(low, high) << 23) | rng.randrange(1 << 23)


def _fp16_scenarios(params, seed):
    """The ``mac="fp16"`` rows: operands are FP16 bits, ``acc``/``red``/``red_in`` FP32 bits (see the docstring)."""
    depth = min(params["sram_depth"], 64)
    small = min(16, params["sram_depth"])
    table = []
    # The hand-worked sequence of the fixed unit on FP16 encodings of the same small integers: every product
    # and sum is exact, so the expected values are the same integers, written here as FP32 bits by hand.
    # FP16: 3 0x4200, -2 0xC000, 5 0x4500, 7 0x4700, 4 0x4400, -5 0xC500, 2 0x4000, 6 0x4600, -3 0xC200.
    # FP32: 12 0x41400000, 22 0x41B00000, 32 0x42000000, -18 0xC1900000, 100 0x42C80000, 132 0x43040000,
    # 7 0x40E00000, -32 0xC2000000.
    controls = [
        _control(rd_addr=0),
        _control(rd_addr=1),
        _control(rd_addr=2, mac_op=MacOp.ROW_MEM, mac_clear=1, row_bus=0x4400),
        _control(rd_addr=3, mac_op=MacOp.ROW_MEM, row_bus=0xC500),
        _control(rd_addr=0, mac_op=MacOp.COL_MEM, col_bus=0x4000, handoff=1),
        _control(mac_op=MacOp.ROW_COL, mac_clear=1, row_bus=0x4600, col_bus=0xC200, red_add=1, red_in=0x42C80000),
        _control(red_add=1, red_in=0x40E00000),
        _control(red_add=1, red_in=0x42C80000),
        _control(red_add=1, red_in=0xC2000000),
    ]
    acc = [0, 0, 0, 0, 0x41400000, 0x41B00000, 0x42000000, 0xC1900000, 0xC1900000]
    red = [0, 0, 0, 0, 0, 0x42C80000, 0x42000000, 0x43040000, 0x42C80000]
    if params.get("reduction_partials", 1) != 1:
        # The interleaved reduction writes a red_add's result pe_reduction_latency cycles later, past this
        # row's end: red holds the handoff's 32 from cycle 6 (the reduction's own row checks the red_adds).
        red = [0] * 6 + [0x42000000] * 3
    if params["sram_depth"] >= 4 and params.get("partial_sums", 1) == 1:
        table.append(Scenario("fp16: hand-worked sequence on exact small integers",
                              {"memory": [0x4200, 0xC000, 0x4500, 0x4700], "controls": controls},
                              {"acc": [_signed(v, 32) for v in acc], "red": [_signed(v, 32) for v in red]},
                              valid={"en": (1, 1, 0)}))
    if params["sram_depth"] >= 4 and params.get("partial_sums", 1) != 1:
        table.append(_hand_worked_interleaved(params["partial_sums"], params.get("reduction_partials", 1)))
    if params["sram_depth"] >= 2 and params.get("reduction_partials", 1) != 1:
        table.append(_hand_worked_reduction(params.get("partial_sums", 1), params["reduction_partials"]))
    table.append(_exact_reductions(params, rng_for(seed, "cp_pe", "fp16 exact reductions")))
    # Random normal operands of moderate size (products 2**-10 .. 2**12): long sums round at every step.
    rng = rng_for(seed, "cp_pe", "fp16 normals")
    memory = [_fp16_normal(rng, 10, 20) for _ in range(depth)]
    controls = _random_controls(rng, params, depth, 300)
    for control in controls:
        control.update(row_bus=_fp16_normal(rng, 10, 20), col_bus=_fp16_normal(rng, 10, 20),
                       red_in=_fp32_normal(rng, 117, 137))
    table.append(_scenario("fp16: random normal operands, en low a third of the time", params, memory, controls,
                           random_pattern(rng, 0.67)))
    # Random bit patterns everywhere: subnormals, infinities and NaNs arrive at random.
    rng = rng_for(seed, "cp_pe", "fp16 bits")
    memory = [rng.randrange(1 << 16) for _ in range(depth)]
    table.append(_scenario("fp16: random bit patterns (every special)", params, memory,
                           _random_controls(rng, params, depth, 300), random_pattern(rng, 0.8)))
    # Corners: operands and red_in drawn from the special values; long sums of the largest normals overflow.
    rng = rng_for(seed, "cp_pe", "fp16 specials")
    memory = [rng.choice(_FP16_SPECIALS) for _ in range(small)]
    controls = _random_controls(rng, params, small, 200)
    for control in controls:
        control.update(row_bus=rng.choice(_FP16_SPECIALS), col_bus=rng.choice(_FP16_SPECIALS),
                       red_in=rng.choice(_FP32_SPECIALS))
    table.append(_scenario("fp16: infinities, NaNs, subnormals, signed zeros, overflow", params, memory, controls,
                           random_pattern(rng, 0.9)))
    rng = rng_for(seed, "cp_pe", "fp16 zeros")
    controls = _random_controls(rng, params, small, 80, bus=0)
    for control in controls:
        control.update(row_bus=rng.choice((0, 0x8000)), col_bus=rng.choice((0, 0x8000)),
                       red_in=rng.choice((0, 0x80000000)))
    table.append(_scenario("fp16: signed zeros", params, [rng.choice((0, 0x8000)) for _ in range(small)],
                           controls))
    return table


def _hand_worked_interleaved(partial_sums, reduction_partials=1):
    """The interleaved accumulator by hand: the order of the additions, a handoff's landing, a sum right after.

    Memory ``[4096, 1]`` (FP16 0x6C00, 0x3C00). Operand stages 2-5: ``4096 * 4096 = 2**24`` (clear), then
    ``1 * 1`` three times (the last with ``handoff``); stage 6: ``6 * -3 = -18`` (clear). They reach the
    accumulate stage in cycles 4-8 and their results land ``L = pe_accumulate_latency(P)`` cycles later. For
    ``P`` 2, 4 and 8 alike: after the second and third rows the result is ``2**24`` (``2**24 + 1`` is a tie
    between ``2**24`` and ``2**24 + 2``, rounded to the even ``2**24``); after the fourth the partials hold
    ``2**24``, and ``1 + 1 = 2`` apart (``P`` 2: partial 0 is ``round(2**24 + 1) = 2**24``, partial 1 ``1 + 1``;
    ``P`` 4, 8: ``(2**24 + 1) + (1 + 1)``, the first sum rounded), so the result is ``2**24 + 2`` = 0x4B800001,
    where adding in turn gives ``2**24`` = 0x4B800000 (``acc`` after cycles ``4 + L`` to ``7 + L``). ``red``:
    ``red_add`` of 100 in cycle ``6 + L``; in ``7 + L`` the handoff lands and wins over ``red_add`` of 7; in
    ``8 + L`` ``2**24 + 2 + 100 = 16777318`` (exact: 0x4B800033), while ``acc`` takes the next sum's -18
    (0xC1900000). With the interleaved reduction (``reduction_partials`` above 1) the ``red_add`` results are
    written ``pe_reduction_latency`` cycles later, past the row's end: ``red`` holds the handoff's
    ``2**24 + 2`` from ``7 + L`` (the reduction has its own hand-worked row).
    """
    latency = pe_accumulate_latency(partial_sums)
    controls = [_control(rd_addr=0), _control(rd_addr=1),
                _control(rd_addr=1, mac_op=MacOp.ROW_MEM, mac_clear=1, row_bus=0x6C00),
                _control(rd_addr=1, mac_op=MacOp.ROW_MEM, row_bus=0x3C00),
                _control(rd_addr=1, mac_op=MacOp.ROW_MEM, row_bus=0x3C00),
                _control(rd_addr=1, mac_op=MacOp.ROW_MEM, row_bus=0x3C00, handoff=1),
                _control(mac_op=MacOp.ROW_COL, mac_clear=1, row_bus=0x4600, col_bus=0xC200)]
    cycles = 10 + latency
    controls += [_control() for _ in range(cycles - len(controls))]
    controls[6 + latency].update(red_add=1, red_in=0x42C80000)
    controls[7 + latency].update(red_add=1, red_in=0x40E00000)
    controls[8 + latency].update(red_add=1, red_in=0x42C80000)
    acc = [0] * (4 + latency) + [0x4B800000] * 3 + [0x4B800001, 0xC1900000, 0xC1900000]
    red = [0] * (6 + latency) + [0x42C80000, 0x4B800001, 0x4B800033, 0x4B800033]
    if reduction_partials != 1:
        red = [0] * (7 + latency) + [0x4B800001] * 3
    return Scenario(f"fp16, {partial_sums} partial sums: hand-worked order and handoff",
                    {"memory": [0x6C00, 0x3C00], "controls": controls},
                    {"acc": [_signed(v, 32) for v in acc], "red": [_signed(v, 32) for v in red]},
                    valid={"en": (1, 1, 0)})


def _hand_worked_reduction(partial_sums, reduction_partials):
    """The interleaved reduction by hand: its order, the handoff's priority, a stale result, a new reduction.

    ``A = pe_accumulate_latency(partial_sums)``, ``L = pe_reduction_latency(reduction_partials)``. Memory
    ``[4096]`` (FP16 0x6C00). Operand stage 2: ``4096 * 4096 = 2**24`` with ``mac_clear`` and ``handoff``; it
    lands in cycle ``4 + A``: ``acc`` = ``red`` = ``2**24`` (0x4B800000), and that cycle's ``red_add`` of 100 is
    ignored (the handoff wins; the handoff is row 0 of the reduction). ``red_add`` of ``1.0`` in cycles
    ``5 + A``, ``6 + A``, ``7 + A``: rows 1, 2, 3. Their results land ``L`` cycles later: row 1 ``2**24 + 1``,
    a tie, rounded to the even ``2**24``; row 2 ``2**24`` again (P 2: partial 0 is ``round(2**24 + 1)``; P 4, 8:
    ``(2**24 + 1) + 1``, a tie again); row 3 ``2**24 + 2`` = 0x4B800001 (P 2: ``2**24 + (1 + 1)``; P 4, 8:
    ``(2**24 + 1) + (1 + 1)``), where adding in turn gives ``2**24``. Operand stage ``4 + L``: ``6 * -3 = -18``
    (clear, handoff), landing in ``6 + A + L``, the cycle row 2's result lands: the handoff wins, ``red`` = -18
    (0xC1900000, also ``acc``). In ``7 + A + L`` row 3's result lands over it (``2**24 + 2``), and ``red_add`` of
    100 is row 1 of the new reduction (the handoff restarted the numbering): ``-18 + 100 = 82`` (0x42A40000) in
    ``7 + A + 2 L``.
    """
    accumulate, reduce = pe_accumulate_latency(partial_sums), pe_reduction_latency(reduction_partials)
    cycles = 9 + accumulate + 2 * reduce
    controls = [_control() for _ in range(cycles)]
    controls[2].update(mac_op=int(MacOp.ROW_MEM), mac_clear=1, handoff=1, row_bus=0x6C00)
    controls[4 + accumulate].update(red_add=1, red_in=0x42C80000)
    for cycle in (5, 6, 7):
        controls[cycle + accumulate].update(red_add=1, red_in=0x3F800000)
    controls[4 + reduce].update(mac_op=int(MacOp.ROW_COL), mac_clear=1, handoff=1, row_bus=0x4600, col_bus=0xC200)
    controls[7 + accumulate + reduce].update(red_add=1, red_in=0x42C80000)
    second = 6 + accumulate + reduce
    acc = [0] * (4 + accumulate) + [0x4B800000] * (second - 4 - accumulate) + [0xC1900000] * (cycles - second)
    red = ([0] * (4 + accumulate) + [0x4B800000] * (second - 4 - accumulate) + [0xC1900000]
           + [0x4B800001] * reduce + [0x42A40000] * (cycles - second - 1 - reduce))
    return Scenario(f"fp16, {reduction_partials} reduction partials: hand-worked order, priority and restart",
                    {"memory": [0x6C00], "controls": controls},
                    {"acc": [_signed(v, 32) for v in acc], "red": [_signed(v, 32) for v in red]},
                    valid={"en": (1, 1, 0)})


def _exact_reductions(params, rng, reductions=24):
    """Back-to-back reductions of small integers, the expected values from exact float64 sums.

    Each reduction: a MAC ``a * b`` (FP16 integers, 1..16 in magnitude; ``mac_clear``, ``handoff``) whose value
    ``v0`` lands ``2 + A`` cycles after its operand stage; then ``red_add`` of 1 to 8 FP32 integers (``|v| <=
    1000``) in consecutive cycles or with gaps; the next MAC in some cycle after. Every sum is exact in FP32, so
    in any order of the additions the result of the ``k``-th ``red_add`` is the float64 sum ``v0 + ... + vk``; it
    is written into ``red`` ``L`` cycles after its ``red_add`` (``L = pe_reduction_latency``), a landing handoff
    in its own cycle, winning over a result landing then. Independent of the order, so of the cycle model: it
    checks what the core relies on, the latencies and the values.
    """
    accumulate = pe_accumulate_latency(params.get("partial_sums", 1))
    reduce = pe_reduction_latency(params.get("reduction_partials", 1))
    fp16 = {value: int(np.float16(value).view(np.uint16)) for value in range(-16, 17)}
    controls = [_control(), _control()]
    events = []  # (cycle, value, is_handoff): red written at the end of that cycle
    acc_events = []  # (cycle, value)
    for _ in range(reductions):
        a, b = (rng.choice([v for v in range(-16, 17) if v]) for _ in range(2))
        start = len(controls)
        controls.append(_control(mac_op=MacOp.ROW_COL, mac_clear=1, handoff=1, row_bus=fp16[a], col_bus=fp16[b]))
        landing = start + 2 + accumulate
        events.append((landing, float(a * b), True))
        acc_events.append((landing, float(a * b)))
        while len(controls) <= landing:
            controls.append(_control())
        total = float(a * b)
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.3:
                controls.append(_control())  # a gap between two rows
            value = rng.randint(-1000, 1000)
            total += value
            events.append((len(controls) + reduce, total, False))
            controls.append(_control(red_add=1, red_in=int(np.float32(value).view(np.uint32))))
        controls += [_control() for _ in range(rng.randint(0, 3))]  # idle cycles before the next MAC
    controls += [_control() for _ in range(reduce + accumulate + 4)]
    red, acc = [0.0] * len(controls), [0.0] * len(controls)
    handoffs = {cycle for cycle, _, is_handoff in events if is_handoff}
    for cycle, value, is_handoff in events:
        if is_handoff or cycle not in handoffs:
            red[cycle] = ("set", value)
    for cycle, value in acc_events:
        acc[cycle] = ("set", value)

    def trace(writes):
        value, out = 0.0, []
        for write in writes:
            if isinstance(write, tuple):
                value = write[1]
            out.append(_signed(int(np.float32(value).view(np.uint32)), 32))
        return out
    return Scenario("fp16: back-to-back reductions of small integers (exact float64 sums)",
                    {"memory": [0], "controls": controls}, {"acc": trace(acc), "red": trace(red)},
                    valid={"en": random_pattern(rng, 0.75)})


def golden(params, scenario):
    controls = scenario.stimulus["controls"]
    columns = {name: [control[name] for control in controls] for name in CONTROL_NAMES}
    acc, red, _ = cp_pe(scenario.stimulus["memory"], **columns, **params)
    return Transactions({"acc": [int(value) for value in acc], "red": [int(value) for value in red]})
