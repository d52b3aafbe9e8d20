"""The PE golden model (``golden/neurotrainer/pe.py``) against numpy and the MAC golden model; the program word."""
import numpy as np
import pytest

from trainforge.golden.neurotrainer.mac import nt_mac
from trainforge.golden.neurotrainer.pe import MAC_LATENCY, nt_pe, pass_shape
from trainforge.hw.neurotrainer.pe import NTPE
from trainforge.spec.neurotrainer.pe_program import (OP_MAC, OP_MAX, PE_PROGRAM_BYTES, PE_PROGRAM_LAYOUT,
                                                   decode_pe_program, encode_pe_program)
from trainforge.errors import ParameterError

INTEGER = dict(in1_depth=1024, in2_depth=512, out_depth=256, frac_bits=0, frac_bits16=0, rounding="truncate")


def signed32(words):
    words = np.asarray(words, dtype=np.int64)
    return np.where(words >= 1 << 31, words - (1 << 32), words)


def program(**fields):
    return encode_pe_program(**fields)


def test_program_word_is_four_bytes_and_round_trips():
    assert PE_PROGRAM_BYTES == 4 and PE_PROGRAM_LAYOUT.size == 32
    rng = np.random.default_rng(0)
    for _ in range(50):
        fields = {name: int(rng.integers(0, 2)) for name in
                  ("op", "wide", "sr", "transpose", "accumulate", "emit", "hold1", "hold2")}
        fields.update({name: int(rng.integers(0, 256)) for name in ("cnt2_outer", "cnt2_inner", "cnt1")})
        word = encode_pe_program(**fields)
        assert 0 <= word < 1 << 32
        assert decode_pe_program(word) == fields


def test_decoding_with_shifts_equals_the_layout_view():
    """``decode_pe_program`` slices the word with shifts; every field must equal the Amaranth view of the layout
    (bits above the 32 of the word ignored)."""
    rng = np.random.default_rng(1)
    for word in [0, (1 << 32) - 1, 1 << 32, *map(int, rng.integers(0, 1 << 40, 200))]:
        view = PE_PROGRAM_LAYOUT.from_bits(word & ((1 << 32) - 1))
        assert decode_pe_program(word) == {name: int(getattr(view, name)) for name, _ in PE_PROGRAM_LAYOUT}, hex(word)


@pytest.mark.parametrize("fields", [{"cnt1": 256}, {"cnt2_outer": -1}, {"wide": 2}])
def test_program_fields_out_of_range_are_rejected(fields):
    with pytest.raises(ValueError, match=next(iter(fields))):
        encode_pe_program(**fields)


def test_depths_must_be_powers_of_two():
    with pytest.raises(ParameterError, match="in2_depth"):
        NTPE(in2_depth=48)


@pytest.mark.parametrize("transpose", [False, True])
def test_matrix_times_inputs_and_transpose_equal_numpy(transpose):
    rng = np.random.default_rng(1)
    lanes, rows, columns = 4, 7, 9
    matrix = rng.integers(-1000, 1000, (rows, columns))
    reduce = rows if transpose else columns
    inputs = rng.integers(-1000, 1000, (reduce, lanes))
    word = program(op=OP_MAC, wide=1, transpose=int(transpose), cnt2_outer=rows - 1, cnt2_inner=columns - 1,
                   cnt1=reduce - 1)
    result = nt_pe([word], [matrix.ravel()], [inputs], lanes=lanes, **INTEGER)
    expected = (matrix.T if transpose else matrix) @ inputs
    np.testing.assert_array_equal(signed32(result["results"]), expected)
    np.testing.assert_array_equal(signed32(result["out_buffer"][:len(expected)]), expected)


def test_tiled_matrix_accumulates_partial_sums_across_passes():
    """A = [A0 A1]: the second block accumulates onto the first block's partial sums (Fig. 7)."""
    rng = np.random.default_rng(2)
    lanes, rows, columns = 3, 5, 12
    matrix = rng.integers(-500, 500, (rows, columns))
    inputs = rng.integers(-500, 500, (columns, lanes))
    half = columns // 2
    words = [program(wide=1, emit=0, cnt2_outer=rows - 1, cnt2_inner=half - 1, cnt1=half - 1),
             program(wide=1, accumulate=1, cnt2_outer=rows - 1, cnt2_inner=half - 1, cnt1=half - 1)]
    blocks1 = [matrix[:, :half].ravel(), matrix[:, half:].ravel()]
    blocks2 = [inputs[:half], inputs[half:]]
    result = nt_pe(words, blocks1, blocks2, lanes=lanes, **INTEGER)
    np.testing.assert_array_equal(signed32(result["results"]), matrix @ inputs)


def test_sixteen_bit_mode_computes_both_halves():
    rng = np.random.default_rng(3)
    lanes, rows, columns = 2, 4, 6
    halves_a = rng.integers(-100, 100, (2, rows, columns))
    halves_x = rng.integers(-100, 100, (2, columns, lanes))
    pack = lambda low, high: (low & 0xFFFF) | ((high & 0xFFFF) << 16)
    word = program(wide=0, cnt2_outer=rows - 1, cnt2_inner=columns - 1, cnt1=columns - 1)
    result = nt_pe([word], [pack(*halves_a).ravel()], [pack(*halves_x)], lanes=lanes, **INTEGER)["results"]
    result = result.astype(np.int64)
    for half in range(2):
        value = (result >> (16 * half)) & 0xFFFF
        np.testing.assert_array_equal(np.where(value >= 1 << 15, value - (1 << 16), value),
                                      halves_a[half] @ halves_x[half])


def test_convolution_and_outer_product_equal_numpy():
    """Conv FF: CNT2 = (NO*HK, WK), CNT1 = HK*WK, BUF2 rows = k input patches; FC UP: CNT2 = (h, 1), CNT1 = 1."""
    rng = np.random.default_rng(4)
    lanes, kernels, height, width = 4, 3, 3, 2
    weights = rng.integers(-50, 50, (kernels, height, width))
    patches = rng.integers(-50, 50, (height * width, lanes))        # lane j: the patch of output j
    conv = program(cnt2_outer=kernels * height - 1, cnt2_inner=width - 1, cnt1=height * width - 1)
    vector_a = rng.integers(-50, 50, 6)
    vector_b = rng.integers(-50, 50, (1, lanes))
    outer = program(cnt2_outer=len(vector_a) - 1, cnt2_inner=0, cnt1=0)
    result = nt_pe([conv, outer], [weights.ravel(), vector_a], [patches, vector_b], lanes=lanes, **INTEGER)
    np.testing.assert_array_equal(signed32(result["results"][:kernels]), weights.reshape(kernels, -1) @ patches)
    np.testing.assert_array_equal(signed32(result["results"][kernels:]), np.outer(vector_a, vector_b[0]))


def test_max_mode_returns_window_maxima_and_first_argmax():
    rng = np.random.default_rng(5)
    lanes, window = 5, 9
    values = rng.integers(-4, 4, (window, lanes))                  # many ties
    word = program(op=OP_MAX, cnt2_outer=2, cnt2_inner=2, cnt1=window - 1)
    words = nt_pe([word], [], [values & 0xFFFF], lanes=lanes, index_bits=8)["results"].astype(np.int64)
    value = words & 0xFFFF
    np.testing.assert_array_equal(np.where(value >= 1 << 15, value - (1 << 16), value)[0], values.max(axis=0))
    np.testing.assert_array_equal(words[0] >> 16, values.argmax(axis=0))


@pytest.mark.parametrize("rounding", ["sr_lo", "sr_full", "nearest"])
def test_rounding_follows_the_mac_golden_model_over_passes(rounding):
    """The PE's MAC rows (preloads included) through nt_mac give the same words: random state carried over."""
    rng = np.random.default_rng(6)
    lanes, rows, columns = 3, 3, 4
    params = dict(lanes=lanes, frac_bits=12, frac_bits16=6, rounding=rounding, seed=99)
    matrix = rng.integers(0, 1 << 32, (rows, columns))
    inputs = [rng.integers(-(1 << 20), 1 << 20, (columns, lanes)) & 0xFFFFFFFF for _ in range(2)]
    words = [program(wide=1, sr=1, hold1=1, cnt2_outer=rows - 1, cnt2_inner=columns - 1, cnt1=columns - 1),
             program(wide=1, sr=1, accumulate=1, cnt2_outer=rows - 1, cnt2_inner=columns - 1, cnt1=columns - 1)]
    result = nt_pe(words, [matrix.ravel()], inputs, in1_depth=64, in2_depth=16, out_depth=8, **params)
    one = 1 << 12
    a, x, clear, read = [], [], [], []
    for output in range(rows):                                     # pass 1: plain
        a += list(matrix[output]); x += list(inputs[0]); clear += [True] + [False] * (columns - 1)
        read += [False] * (columns - 1) + [True]
    first = nt_mac(a, x, [True] * len(a), [True] * len(a), clear, read, **params)
    for output in range(rows):                                     # pass 2: preload, then accumulate
        a += [one] + list(matrix[output]); x += [first[output]] + list(inputs[1])
        clear += [True] + [False] * columns; read += [False] * columns + [True]
    expected = nt_mac(a, x, [True] * len(a), [True] * len(a), clear, read, **params)
    np.testing.assert_array_equal(result["results"], expected)


def test_double_buffering_overlaps_fills_with_compute():
    """Without backpressure: the next blocks fill while a pass computes, so passes run back to back."""
    lanes, rows, columns = 2, 16, 16
    word = program(cnt2_outer=rows - 1, cnt2_inner=columns - 1, cnt1=columns - 1)
    matrix = np.ones(rows * columns, dtype=np.int64)
    inputs = np.ones((columns, lanes), dtype=np.int64)
    result = nt_pe([word] * 3, [matrix] * 3, [inputs] * 3, lanes=lanes, **INTEGER)
    steps, _, _, rows_sent = pass_shape(decode_pe_program(word))
    # Pass 0 waits for its blocks (the longer one, BUF1, ends in cycle steps - 1).
    assert result["accept"][0] == steps
    # Later passes start as soon as the PE is idle: their blocks were filled during the previous pass.
    # A pass occupies its J rows plus the pipeline: step counters, block RAM read, read-data register,
    # the MAC array's latency, and the cycle in which the last result is delivered.
    np.testing.assert_array_equal(np.diff(result["accept"]), rows_sent + 4 + MAC_LATENCY)
    # Each output row leaves one row-time (columns cycles) after the previous one.
    per_pass = result["cycles"].reshape(3, rows)
    assert (np.diff(per_pass, axis=1) == columns).all()


def test_blocks_beyond_the_stream_and_oversized_blocks_are_rejected():
    word = program(cnt2_outer=1, cnt2_inner=1, cnt1=1)
    with pytest.raises(ValueError, match="BUF Input 1 block 1"):
        nt_pe([word, word], [np.zeros(4)], [np.zeros((2, 2))] * 2, lanes=2, **INTEGER)
    with pytest.raises(ValueError, match="half the buffer"):
        nt_pe([word], [np.zeros(600)], [np.zeros((2, 2))], lanes=2, **INTEGER)


def test_full_size_pass_equals_numpy():
    """The largest block a half of a 64 Ki-word BUF1 holds (128 x 256) times 32 lanes, vectorised."""
    rng = np.random.default_rng(7)
    matrix = rng.integers(-1000, 1000, (128, 256))
    inputs = rng.integers(-1000, 1000, (256, 32))
    word = program(wide=1, cnt2_outer=127, cnt2_inner=255, cnt1=255)
    result = nt_pe([word], [matrix.ravel()], [inputs], lanes=32,
                   **{**INTEGER, "in1_depth": 1 << 16, "out_depth": 128})
    np.testing.assert_array_equal(signed32(result["results"]), matrix @ inputs)
