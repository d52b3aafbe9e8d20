"""Golden model of :class:`trainforge.hw.neurotrainer.mac.NTMAC`: the Fixed 32/16 MAC array with its rounding variants.

Everything here is bit-exact against the hardware. The rules (see
``hw/neurotrainer/docs/mac.md``):

- 32-bit mode, per lane: ``wide = a * x + (y << F)`` (exact, 2F fraction bits),
  ``y' = saturate32((wide + r) >> F)`` where ``>>`` is an arithmetic (floor) shift and
  ``r`` is the rounding offset of the variant: 0 (truncate), ``1 << (F-1)``
  (round to nearest, ties up) or a random number masked to the F dropped bits (SR).
- 16-bit mode, per lane: the 32-bit words hold two 16-bit halves; half ``h`` computes
  ``y_h' = saturate16((a_h * x_h + (y_h << F16)) >> F16)``: always truncated (no noise).
- SR-LO (Fig. 11): one 8-stage Fibonacci LFSR (x^8 + x^6 + x^5 + x^4 + 1) produces one
  bit per step, shifted into a 32-bit left-shift register shared by every lane.
- SR with a full-width RNG per MAC (Table 1's "Fixed 32/16 SR"): each lane owns a
  32-bit xorshift generator (13, 17, 5) that yields a fresh 32-bit word per step.
- The random state steps once per accumulated row (whatever the mode or SR flag), and
  the word used by a row is the state *before* that step.
"""
import numpy as np

from ...spec.neurotrainer.mac import PARAMS, ROUNDINGS, WARMUP_STEPS, lfsr_step, reset_state, xorshift_seeds

__all__ = ["ROUNDINGS", "lfsr_bits", "sr_lo_words", "xorshift_seeds", "xorshift_words",
           "reset_state", "round_shift", "nt_mac"]

_MASK32 = (1 << 32) - 1


def lfsr_bits(state, count):
    """The next ``count`` output bits of the LFSR from ``state`` (uint8 array); the sequence has period 255."""
    period = []
    for _ in range(255):
        state, bit = lfsr_step(state)
        period.append(bit)
    period = np.array(period, dtype=np.uint8)
    return np.resize(period, count)


def sr_lo_words(seed, count):
    """The 32-bit shift-register words that rows ``0 .. count-1`` see under SR-LO (uint64 array)."""
    state, register = reset_state(seed)
    bits = lfsr_bits(state, max(count - 1, 0)).astype(np.uint64)
    # Word t = register shifted left t times with the first t new bits entering at the bottom.
    history = np.concatenate([np.array([(register >> (31 - i)) & 1 for i in range(32)], dtype=np.uint64), bits])
    weights = np.uint64(1) << np.arange(31, -1, -1, dtype=np.uint64)
    windows = np.lib.stride_tricks.sliding_window_view(history, 32)[:count]
    return (windows * weights).sum(axis=1, dtype=np.uint64)


def xorshift_step(state):
    """One xorshift32 (13, 17, 5) step of a uint64 array of 32-bit states."""
    mask = np.uint64(_MASK32)
    state = state ^ ((state << np.uint64(13)) & mask)
    state = state ^ (state >> np.uint64(17))
    return state ^ ((state << np.uint64(5)) & mask)


def xorshift_words(seed, lanes, count):
    """The per-lane random words rows ``0 .. count-1`` see under full-width SR: shape (count, lanes)."""
    words = np.empty((count, lanes), dtype=np.uint64)
    state = xorshift_seeds(seed, lanes)
    for row in range(count):
        words[row] = state
        state = xorshift_step(state)
    return words


def _signed(values, bits):
    values = np.asarray(values, dtype=np.int64) & np.int64((1 << bits) - 1)
    return values - ((values >> np.int64(bits - 1)) << np.int64(bits))


def round_shift(wide, frac, offset, bits):
    """``saturate_bits((wide + offset) >> frac)``: the rounding and cropping of one MAC step.

    Parameters
    ----------
    wide : ndarray of int64
        Exact sums with ``2 * frac`` fraction bits (|wide| < 2**63 - 2**frac).
    frac : int
        Fraction bits of the result.
    offset : ndarray of int64
        Rounding offset, ``0 <= offset < 2**frac``.
    bits : int
        Result width; the result saturates to its signed range.
    """
    shifted = (np.asarray(wide, dtype=np.int64) + np.asarray(offset, dtype=np.int64)) >> np.int64(frac)
    return np.clip(shifted, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def rounding_offsets(rounding, frac, sr, seed, lanes, count):
    """The 32-bit-mode rounding offsets of ``count`` rows: shape (count, lanes), int64."""
    mask = np.uint64((1 << frac) - 1)
    sr = np.asarray(sr, dtype=bool)[:, None]
    if rounding == "truncate" or frac == 0:
        return np.zeros((count, lanes), dtype=np.int64)
    if rounding == "nearest":
        return np.full((count, lanes), 1 << (frac - 1), dtype=np.int64)
    if rounding == "sr_lo":
        words = np.broadcast_to(sr_lo_words(seed, count)[:, None], (count, lanes))
    else:
        words = xorshift_words(seed, lanes, count)
    return np.where(sr, (words & mask).astype(np.int64), 0)


def nt_mac(a, x, wide, sr, clear, read, **params):
    """Results of the MAC array over a stream of rows.

    Parameters
    ----------
    a : array_like of int, shape (rows,)
        The broadcast 32-bit word (one 32-bit operand or two 16-bit halves), as unsigned bits.
    x : array_like of int, shape (rows, lanes)
        The per-lane 32-bit words, as unsigned bits.
    wide, sr, clear, read : array_like of bool, shape (rows,)
        32-bit mode; stochastic rounding on (SR variants only); start from zero; emit the result.
    **params
        Block parameters (:data:`trainforge.spec.neurotrainer.mac.PARAMS`; defaults from there,
        other keys ignored).

    Returns
    -------
    numpy.ndarray of uint64, shape (reads, lanes)
        The accumulator words (32-bit) after each ``read`` row.
    """
    resolved = PARAMS.resolve(**{name: value for name, value in params.items() if name in PARAMS.names})
    lanes, frac_bits, frac_bits16 = resolved["lanes"], resolved["frac_bits"], resolved["frac_bits16"]
    rounding, seed = resolved["rounding"], resolved["seed"]
    a = np.asarray(a, dtype=np.int64)
    x = np.asarray(x, dtype=np.int64).reshape(len(a), lanes)
    wide = np.asarray(wide, dtype=bool)
    clear = np.asarray(clear, dtype=bool)
    read = np.asarray(read, dtype=bool)
    count = len(a)
    offsets = rounding_offsets(rounding, frac_bits, sr, seed, lanes, count)
    a32, x32 = _signed(a, 32), _signed(x, 32)
    a_halves = [_signed(a, 16), _signed(a >> 16, 16)]
    x_halves = [_signed(x, 16), _signed(x >> 16, 16)]
    accumulator = np.zeros(lanes, dtype=np.int64)  # 32-bit words as unsigned bits
    results = []
    for row in range(count):
        if clear[row]:
            accumulator[:] = 0
        if wide[row]:
            total = a32[row] * x32[row] + (_signed(accumulator, 32) << np.int64(frac_bits))
            accumulator = round_shift(total, frac_bits, offsets[row], 32) & _MASK32
        else:
            halves = []
            for half in range(2):
                y = _signed(accumulator >> (16 * half), 16)
                total = a_halves[half][row] * x_halves[half][row] + (y << np.int64(frac_bits16))
                halves.append(round_shift(total, frac_bits16, 0, 16) & 0xFFFF)
            accumulator = halves[0] | (halves[1] << 16)
        if read[row]:
            results.append(accumulator.copy())
    return np.array(results, dtype=np.uint64).reshape(-1, lanes)
