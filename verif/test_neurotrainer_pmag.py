"""Unit tests of the PMAG golden model: Table 2/3 routings against numpy indexing, timing model, parameters."""
import itertools

import numpy as np
import pytest

from trainforge.golden.neurotrainer.pmag import (LATENCY, SOURCE_NAMES as S, WINDOW_MODES, default_program,
                                                 nt_pmag, random_program, transfer_cycles)
from trainforge.hw.neurotrainer.pmag import NTPMAG
from trainforge.spec.neurotrainer.pmag import SETUP_CYCLES
from trainforge.errors import ParameterError


def _conv_ff(no, ho, wo, ni, dk, hk, wk):
    """Table 2 Conv-FF: X stored as [ni][q][p][d] (q = r3 + r7 column, p = r2 + r6 row)."""
    hi, wi = ho + hk - 1, wo + wk - 1
    program = default_program()
    program.update({"max": [no - 1, ho - 1, wo - 1, ni - 1, dk - 1, hk - 1, wk - 1],
                    "s": S["r2"], "t": S["r6"], "u": S["r3"], "v": S["r7"],
                    "a": S["r4"], "b": S["q"], "c": S["p"], "d": S["r5"],
                    "base": 7, "stride": [wi * hi * dk, hi * dk, dk, 1]})
    return program, (ni, wi, hi, dk)


def test_conv_ff_addresses_gather_the_convolution_windows(seed):
    """Gathering X through the Conv-FF address stream and summing against W equals a direct convolution."""
    rng = np.random.default_rng(seed)
    no, ho, wo, ni, dk, hk, wk = 2, 4, 3, 2, 3, 3, 2
    program, shape = _conv_ff(no, ho, wo, ni, dk, hk, wk)
    x = rng.integers(-50, 50, size=shape)
    w = rng.integers(-5, 5, size=(no, dk, hk, wk))
    requests = nt_pmag(program)
    assert requests["end"][-1] and not requests["end"][:-1].any(), "END-MARK must close the stream, once"
    gathered = x.reshape(-1)[requests["address"][:-1].astype(np.int64) - 7]
    gathered = gathered.reshape(no, ho, wo, ni, dk, hk, wk)
    ours = np.einsum("oyxndhw,odhw->noyx", gathered, w)
    reference = np.zeros((ni, no, ho, wo), dtype=np.int64)
    for n, o, y, xx in itertools.product(range(ni), range(no), range(ho), range(wo)):
        reference[n, o, y, xx] = np.sum(x[n, xx:xx + wk, y:y + hk, :].transpose(2, 1, 0) * w[o])
    assert np.array_equal(ours, reference), f"conv via PMAG addresses differs from direct conv (seed {seed})"


def test_add_and_remove_pad_round_trip(seed):
    """Table 3: add pad writes a zero-bordered image; remove pad reads back exactly the original positions."""
    rng = np.random.default_rng(seed)
    planes, height, width, radius = 2, 3, 4, 1
    image = rng.integers(1, 100, size=(planes, height, width))
    padded_h, padded_w = height + 2 * radius, width + 2 * radius
    program = default_program()
    program.update({"max": [planes - 1, padded_h - 1, padded_w - 1, 0, 0, 0, 0],
                    "a": S["r1"], "b": S["r2"], "c": S["r3"], "stride": [padded_h * padded_w, padded_w, 1, 0],
                    "h": S["r2"], "k": S["r3"], "h_lo": radius, "h_hi": radius + height,
                    "k_lo": radius, "k_hi": radius + width, "window": WINDOW_MODES["pad"], "write": 1})
    written = nt_pmag(program)
    memory = np.full(planes * padded_h * padded_w, -1)
    values = iter(image.reshape(-1))
    for address, pad in zip(written["address"][:-1], written["pad"][:-1]):
        memory[int(address)] = 0 if pad else next(values)
    expected = np.pad(image, ((0, 0), (radius, radius), (radius, radius)))
    assert np.array_equal(memory.reshape(expected.shape), expected), f"add pad differs from np.pad (seed {seed})"
    read = nt_pmag(dict(program, window=WINDOW_MODES["skip"], write=0))
    assert not read["pad"].any(), "remove pad must not issue padding requests"
    got = memory[read["address"][:-1].astype(np.int64)]
    assert np.array_equal(got, image.reshape(-1)), f"remove pad does not read the image back (seed {seed})"


@pytest.mark.parametrize("wide,mark", [(0, 0xFFFF), (1, 0xFFFFFFFF)])
def test_end_mark_word(wide, mark):
    requests = nt_pmag(dict(default_program(), wide=wide))
    assert int(requests["address"][-1]) == mark, f"END-MARK expected {mark:#x}, got {int(requests['address'][-1]):#x}"


def test_address_wraps_modulo_2_32_and_unused_codes_read_zero():
    program = default_program()
    program.update({"max": [0, 0, 0, 0, 0, 0, 3], "a": S["r7"], "b": 15, "s": S["p"], "t": S["r7"],
                    "c": S["p"], "base": 0xFFFFFFF0, "stride": [8, 12345, 1, 0]})
    got = nt_pmag(program)["address"][:-1].astype(np.int64)
    expected = (0xFFFFFFF0 + 9 * np.arange(4)) % (1 << 32)
    assert np.array_equal(got, expected), f"expected {expected}, got {got}"


def test_timing_without_backpressure_is_one_step_per_cycle(seed):
    rng = np.random.default_rng(seed)
    program = random_program(rng, max_steps=300)
    requests = nt_pmag(program)
    steps = np.flatnonzero(np.append(requests["issued"], True))
    cycles = transfer_cycles(requests["issued"], 10, np.ones(1000, dtype=bool))
    assert np.array_equal(cycles, 10 + LATENCY + steps), f"expected {10 + LATENCY + steps[:5]}, got {cycles[:5]}"


def test_timing_waits_for_ready():
    issued = np.array([True, False, True])
    setup = SETUP_CYCLES
    ready = np.array([1] * setup + [1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1], dtype=bool)
    # Cycles 1 .. setup are the setup; then, counted from t = setup, through the two-entry stream
    # stage: step 0 enters the stage in t + 1 (out from t + 2, taken in t + 4); step 1 (skipped) in
    # t + 2; step 2 enters in t + 3 into the skid register (the output is stalled); the END-MARK waits
    # in t + 4 (skid full), enters in t + 5; out: step 0 in t + 4, step 2 in t + 5, the END-MARK in t + 6.
    assert transfer_cycles(issued, 0, ready).tolist() == [setup + 4, setup + 5, setup + 6]


def test_timing_of_programs_back_to_back():
    # Two programs of one issued step each, setup cycles t = SETUP_CYCLES; the second is accepted in
    # cycle t + 3, the cycle after the first END-MARK entered the stage (t + 2). Consumer never ready
    # until cycle t + 6.
    setup = SETUP_CYCLES
    ready = np.array([0] * (setup + 6) + [1] * 10, dtype=bool)
    first, second = transfer_cycles([[True], [True]], [0, setup + 3], ready)
    # Program 0: request enters in t + 1 (output), END-MARK in t + 2 (skid); both leave in t + 6 and t + 7.
    assert first.tolist() == [setup + 6, setup + 7]
    # Program 1: set up from t + 4, steps from 2t + 4 (>= t + 7, the skid register emptied in t + 7):
    # in 2t + 4, 2t + 5; out 2t + 5, 2t + 6.
    assert second.tolist() == [2 * setup + 5, 2 * setup + 6]
    with pytest.raises(ValueError, match="still stepping"):
        transfer_cycles([[True], [True]], [0, setup + 2], ready)


def test_golden_is_vectorised_for_large_programs():
    program = default_program()
    program.update({"max": [15, 15, 15, 15, 15, 0, 0], "a": S["r1"], "b": S["r5"], "stride": [3, 5, 0, 0]})
    requests = nt_pmag(program)
    assert len(requests["address"]) == 16 ** 5 + 1


def test_parameters_are_checked():
    with pytest.raises(ParameterError, match="counter_bits"):
        NTPMAG(counter_bits=17)
    with pytest.raises(ParameterError, match="counter_bits"):
        NTPMAG(counter_bits=1)
