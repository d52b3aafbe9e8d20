"""Saturation edges of the NeuroTrainer MAC: saturate, then add and subtract one LSB, at 32 and 16 bits.

The MAC's accumulators have no guard bits: every step saturates (``sat32`` / ``sat16`` of the
step's sum, ``hw/neurotrainer/mac.py``), so a saturated accumulator plus 1 LSB stays at the
bound and minus 1 LSB leaves it one below (one above for the negative bound), not where an
unsaturated sum would be. The expected words below are worked by hand from that rule; the
golden model (``golden/neurotrainer/mac.py``) and the RTL (``NTMAC`` in Amaranth's simulator,
so no HDL build is needed) must both produce them. An off-by-one bound (e.g. ``-2**31 - 1``
wrapping to ``+2**31 - 1``) fails here.
"""
import pytest
from amaranth.sim import Simulator

from trainforge.golden.neurotrainer.mac import nt_mac
from trainforge.hw.neurotrainer.mac import NTMAC

MAX32, MIN32 = 0x7FFFFFFF, 0x80000000
PLUS, MINUS = 1, 0xFFFFFFFF                 # +1 and -1 as 32-bit words


def _half(high, low):
    return ((high & 0xFFFF) << 16) | (low & 0xFFFF)


#: (name, wide, rows, expected words after each read row). A row is (a, x, clear, read); frac_bits = 0,
#: so ``a = 1`` multiplies by one and an ``x`` of one adds one LSB. In 16-bit mode each half is its own MAC.
CASES = [
    ("32-bit positive bound", 1,
     [(MAX32, MAX32, 1, 1), (1, PLUS, 0, 1), (1, PLUS, 0, 1), (1, MINUS, 0, 1), (1, MINUS, 0, 1)],
     [MAX32, MAX32, MAX32, MAX32 - 1, MAX32 - 2]),
    ("32-bit negative bound", 1,
     [(MIN32, MAX32, 1, 1), (1, MINUS, 0, 1), (1, MINUS, 0, 1), (1, PLUS, 0, 1), (1, PLUS, 0, 1)],
     [MIN32, MIN32, MIN32, MIN32 + 1, MIN32 + 2]),
    ("32-bit one below the bound reaches it, not beyond", 1,
     [(1, MAX32 - 1, 1, 1), (1, PLUS, 0, 1), (1, PLUS, 0, 1), (1, (MIN32 + 1), 1, 1), (1, MINUS, 0, 1),
      (1, MINUS, 0, 1)],
     [MAX32 - 1, MAX32, MAX32, MIN32 + 1, MIN32, MIN32]),
    ("16-bit bounds, both halves", 0,
     [(_half(0x7FFF, 0x7FFF), _half(0x7FFF, 0x8000), 1, 1), (_half(1, 1), _half(1, -1), 0, 1),
      (_half(1, 1), _half(-1, 1), 0, 1), (_half(1, 1), _half(-1, 1), 0, 1)],
     [_half(0x7FFF, 0x8000), _half(0x7FFF, 0x8000), _half(0x7FFE, 0x8001), _half(0x7FFD, 0x8002)]),
    ("16-bit one below the bound reaches it, not beyond", 0,
     [(_half(1, 1), _half(0x7FFE, -0x7FFF), 1, 1), (_half(1, 1), _half(1, -1), 0, 1),
      (_half(1, 1), _half(1, -1), 0, 1)],
     [_half(0x7FFE, -0x7FFF), _half(0x7FFF, 0x8000), _half(0x7FFF, 0x8000)]),
]

PARAMS = dict(lanes=1, frac_bits=0, frac_bits16=0, rounding="truncate", seed=0xA5)


def _golden(wide, rows):
    a = [row[0] for row in rows]
    x = [[row[1]] for row in rows]
    flags = [bool(wide)] * len(rows)
    words = nt_mac(a, x, flags, [False] * len(rows), [bool(row[2]) for row in rows], [bool(row[3]) for row in rows],
                   **PARAMS)
    return [int(word) & 0xFFFFFFFF for word in words.reshape(-1)]


def _rtl(wide, rows, rounding):
    dut = NTMAC(**{**PARAMS, "rounding": rounding})
    received = []

    async def bench(ctx):
        ctx.set(dut.o_y.ready, 1)
        for a, x, clear, read in rows:
            ctx.set(dut.i_row.payload, {"a": a, "x": [x], "wide": wide, "sr": 0, "clear": clear, "read": read})
            ctx.set(dut.i_row.valid, 1)
            while True:
                await ctx.tick()
                if ctx.get(dut.o_y.valid):
                    received.append(ctx.get(dut.o_y.payload)[0])
                if ctx.get(dut.i_row.ready):
                    break
            ctx.set(dut.i_row.valid, 0)
        for _ in range(20):
            if len(received) == len([row for row in rows if row[3]]):
                break
            await ctx.tick()
            if ctx.get(dut.o_y.valid):
                received.append(ctx.get(dut.o_y.payload)[0])

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(bench)
    simulator.run()
    return [int(word) & 0xFFFFFFFF for word in received]


@pytest.mark.parametrize("name, wide, rows, expected", CASES, ids=[case[0] for case in CASES])
def test_golden_saturates_then_moves_one_lsb(name, wide, rows, expected):
    assert _golden(wide, rows) == expected, name


@pytest.mark.parametrize("rounding", ["truncate", "sr_lo"])
@pytest.mark.parametrize("name, wide, rows, expected", CASES, ids=[case[0] for case in CASES])
def test_rtl_saturates_then_moves_one_lsb(name, wide, rows, expected, rounding):
    actual = _rtl(wide, rows, rounding)
    assert actual == expected, f"{name} ({rounding}): expected {[hex(v) for v in expected]}, " \
                               f"got {[hex(v) for v in actual]}"
