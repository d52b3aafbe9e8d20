"""Unit tests of the NeuroTrainer golden models: LFSR, rounding rules, statistics, comparator, parameters."""
import numpy as np
import pytest

from trainforge.golden.neurotrainer.mac import lfsr_bits, nt_mac, reset_state, sr_lo_words, xorshift_words
from trainforge.golden.neurotrainer.rounding_stats import rounding_error_statistics, sr_lo_predicted_bias
from trainforge.hw.neurotrainer.mac import NTMAC
from trainforge.errors import ParameterError


def test_lfsr_is_maximal_length():
    bits = lfsr_bits(1, 3 * 255)
    assert np.array_equal(bits[:255], bits[255:510]), "LFSR sequence does not repeat after 255 bits"
    assert int(bits[:255].sum()) == 128, f"expected 128 ones per period, got {int(bits[:255].sum())}"
    windows = {tuple(bits[i:i + 8]) for i in range(255)}
    assert len(windows) == 255, f"expected all 255 non-zero 8-bit states, got {len(windows)}"


def test_shift_register_words_follow_the_bit_stream():
    """Word t+1 is word t shifted left by one with the next LFSR bit at the bottom."""
    words = sr_lo_words(0x5A, 600).astype(np.int64)
    state, register = reset_state(0x5A)
    assert words[0] == register, f"expected first word {register:#x}, got {int(words[0]):#x}"
    bits = lfsr_bits(state, 599).astype(np.int64)
    expected = ((words[:-1] << 1) | bits) & 0xFFFFFFFF
    assert np.array_equal(words[1:], expected), "shift register words do not follow the LFSR bits"


def test_xorshift_lanes_differ():
    words = xorshift_words(7, 4, 100)
    assert len(np.unique(words)) == words.size, "per-MAC generators repeat words"


def _rows(rng, count, lanes, wide):
    a = rng.integers(0, 1 << 32, size=count)
    x = rng.integers(0, 1 << 32, size=(count, lanes))
    flags = np.ones(count, dtype=bool)
    clear = np.zeros(count, dtype=bool)
    clear[0] = True
    return a, x, flags & wide, flags, clear, flags


@pytest.mark.parametrize("rounding", ["sr_lo", "sr_full", "truncate", "nearest"])
def test_integer_format_is_exact(seed, rounding):
    """With no fraction bits every variant is plain saturating integer MAC."""
    rng = np.random.default_rng(seed)
    small = lambda shape: rng.integers(-1000, 1000, size=shape)
    a, x = small(50), small((50, 3))
    rows = (a & 0xFFFFFFFF, x & 0xFFFFFFFF, np.ones(50, bool), np.ones(50, bool),
            np.eye(1, 50, dtype=bool)[0], np.ones(50, bool))
    actual = nt_mac(*rows, lanes=3, frac_bits=0, rounding=rounding, seed=9).astype(np.int64)
    expected = np.cumsum(a[:, None] * x, axis=0) & 0xFFFFFFFF
    assert np.array_equal(actual, expected), f"seed {seed}: expected {expected[:3]} got {actual[:3]}"


def test_sixteen_bit_halves_are_independent_and_saturate(seed):
    rng = np.random.default_rng(seed)
    a, x, wide, sr, clear, read = _rows(rng, 40, 2, False)
    got = nt_mac(a, x, wide, sr, clear, read, lanes=2, frac_bits16=0)
    signed16 = lambda v: ((v & 0xFFFF) ^ 0x8000) - 0x8000
    for half in range(2):
        y = np.zeros(2, dtype=np.int64)
        for row in range(40):
            y = np.clip(signed16(a[row] >> 16 * half) * signed16(x[row] >> 16 * half) + y, -32768, 32767)
            actual = signed16(got[row].astype(np.int64) >> 16 * half)
            assert np.array_equal(actual, y), f"seed {seed} row {row} half {half}: expected {y} got {actual}"


def test_truncation_is_biased_and_stochastic_rounding_is_not():
    """10^5 samples: truncation's mean error is far outside 3 sigma, full-width SR's within it."""
    truncate = rounding_error_statistics("truncate")
    full = rounding_error_statistics("sr_full")
    nearest = rounding_error_statistics("nearest")
    assert truncate["samples"] >= 100_000
    assert abs(truncate["z"]) > 3, f"truncation mean {truncate['mean']} within 3 sigma {truncate['sigma_of_mean']}"
    assert abs(full["z"]) < 3, f"SR mean {full['mean']} outside 3 sigma {full['sigma_of_mean']}"
    assert abs(nearest["z"]) < 3, f"nearest mean {nearest['mean']} outside 3 sigma {nearest['sigma_of_mean']}"


def test_sr_lo_bias_and_correlation():
    """SR-LO: mean within 3 sigma of its predicted m-sequence bias (which is < 1/500 LSB) and of zero;
    lanes are strongly correlated (shared bits), the full-width SR's lanes are not."""
    lo = rounding_error_statistics("sr_lo")
    full = rounding_error_statistics("sr_full")
    predicted = sr_lo_predicted_bias(16)
    assert abs(lo["mean"] - predicted) < 3 * lo["sigma_of_mean"], \
        f"SR-LO mean {lo['mean']} vs predicted bias {predicted}, sigma {lo['sigma_of_mean']}"
    assert abs(lo["z"]) < 3, f"SR-LO mean {lo['mean']} outside 3 sigma {lo['sigma_of_mean']}"
    assert lo["lane_correlation"] > 0.3, f"SR-LO lane correlation {lo['lane_correlation']} (expected > 0.3)"
    assert abs(full["lane_correlation"]) < 0.02, f"SR lane correlation {full['lane_correlation']} (expected ~0)"
    assert lo["lag1_correlation"] > 0.1, f"SR-LO lag-1 correlation {lo['lag1_correlation']} (expected > 0.1)"


@pytest.mark.parametrize("overrides", [
    {"rounding": "stochastic"}, {"frac_bits": 31}, {"lanes": 0}, {"rounding": "sr_lo", "seed": 256},
])
def test_bad_parameters_are_rejected(overrides):
    with pytest.raises(ParameterError, match=list(overrides)[-1]):
        NTMAC(**overrides)


def test_comparator_golden_matches_a_row_by_row_reference(seed):
    """The vectorised segmented-maximum model against a plain loop, ties and reset window included."""
    from trainforge.golden.neurotrainer.comparator import nt_comparator

    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 3, size=(400, 5), endpoint=True)
    first = rng.random(400) < 0.2
    first[:7] = False  # the reset window first
    last = rng.random(400) < 0.3
    values, indices = nt_comparator(x, first, last, index_bits=3)
    best, best_index, position = np.zeros(5, np.int64), np.zeros(5, np.int64), 0
    expected_values, expected_indices = [], []
    for row in range(400):
        current = 0 if first[row] else position
        take = first[row] | (x[row] > best)
        best = np.where(take, x[row], best)
        best_index = np.where(take, current, best_index)
        position = (current + 1) % 8
        if last[row]:
            expected_values.append(best.copy())
            expected_indices.append(best_index.copy())
    assert np.array_equal(values, expected_values), f"seed {seed}: maxima differ"
    assert np.array_equal(indices, expected_indices), f"seed {seed}: indices differ"
