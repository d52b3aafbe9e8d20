"""The activation LUTs on the vault controllers' read path: the word LUT, the compiler's ``lut`` option, ``config``.

``NTWordLUT`` (``hw/neurotrainer/word_lut.py``) is a sub-component of ``nt_system`` (verified
through the system's scenario table, ``verif/scenarios/nt_system.py``); here it is also run alone
in Amaranth's simulator on every signed 16-bit input against the golden word rule
(``golden/neurotrainer/lut.py`` ``nt_lut_words``), whose element function ``nt_lut`` is checked
against numpy in ``verif/test_neurotrainer_lut.py``.
"""
import numpy as np
import pytest
from amaranth.sim import Simulator

from trainforge.golden.neurotrainer.lut import nt_lut_words
from trainforge.hw.neurotrainer.word_lut import NTWordLUT
from trainforge.hw.neurotrainer.word_lut_pipeline import NTWordLUTPipeline
from trainforge.sim.neurotrainer.integration_layers import compile_for_system
from trainforge.spec.neurotrainer.integration import (LUT_SELECT, LUT_SELECT_SHIFT, PARAMS, WORD_LUT_STAGES, lut_alias,
                                                      lut_functions)


def _run(dut, cases):
    """``o_word`` for every ``(word, wide, select)``."""
    got = []

    async def bench(ctx):
        for word, wide, select in cases:
            ctx.set(dut.i_word, word)
            ctx.set(dut.wide, wide)
            ctx.set(dut.select, select)
            got.append(ctx.get(dut.o_word))

    simulator = Simulator(dut)
    simulator.add_testbench(bench)
    simulator.run()
    return np.array(got, dtype=np.int64)


@pytest.mark.parametrize("activation,table_bits,frac_bits,out_frac_bits", [
    ("sigmoid", 6, 8, 8),                                            # the system's defaults
    pytest.param("tanh", 3, 12, 10, marks=pytest.mark.regress),
    pytest.param("relu", 12, 0, 0, marks=pytest.mark.regress)])
def test_word_lut_equals_the_golden_word_rule_on_every_16_bit_input(activation, table_bits, frac_bits, out_frac_bits):
    params = dict(table_bits=table_bits, frac_bits=frac_bits, out_frac_bits=out_frac_bits)
    dut = NTWordLUT(activation=activation, **params)
    elements = np.arange(1 << 16, dtype=np.int64)
    packed = elements[0::2] | (elements[1::2][::-1] << 16)           # every value in each half once
    wide = np.array([0, 1, 0x7FFF, 0x8000, 0xFFFF7FFF, 0xFFFF8000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 12345678],
                    dtype=np.int64)
    rng = np.random.default_rng(5)
    wide = np.concatenate([wide, rng.integers(0, 1 << 32, 500), rng.integers(0, 1 << 16, 500),
                           (-rng.integers(0, 1 << 16, 500)) & 0xFFFFFFFF])
    for select, function in ((0, None), *((code, name) for name, code in LUT_SELECT.items())):
        lut = {"function": activation if function == "f" else f"{activation}_grad", **params}
        for words, bits in ((packed, 16), (wide, 32)):
            got = _run(dut, [(int(word), int(bits == 32), select) for word in words])
            expected = words if function is None else nt_lut_words(words, bits, **lut)
            bad = np.flatnonzero(got != expected)
            assert bad.size == 0, (f"{activation} select {select} {bits}-bit: word {int(words[bad[0]]):#x} gave "
                                   f"{int(got[bad[0]]):#x}, expected {int(expected[bad[0]]):#x} ({bad.size} wrong)")


def _run_pipeline(dut, cases, seed):
    """``o_word`` for every ``(word, wide, select)`` through the pipelined LUT, with random ``valid`` gaps and
    ``ready`` stalls (its cycles: ``test_pipelined_word_lut_takes_word_lut_stages_cycles_without_stalls``)."""
    rng = np.random.default_rng(seed)
    got = []

    async def producer(ctx):
        for word, wide, select in cases:
            while rng.random() < 0.2:
                ctx.set(dut.i_word.valid, 0)
                await ctx.tick()
            ctx.set(dut.i_word.payload, {"word": word, "select": select, "wide": wide})
            ctx.set(dut.i_word.valid, 1)
            await ctx.tick().until(dut.i_word.ready)
        ctx.set(dut.i_word.valid, 0)

    async def consumer(ctx):
        while len(got) < len(cases):
            ready = int(rng.random() < 0.7)
            ctx.set(dut.o_word.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o_word.valid, dut.o_word.payload)
            if valid and ready:
                got.append(payload)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(producer)
    simulator.add_testbench(consumer)
    simulator.run()
    return np.array(got, dtype=np.int64)


def test_pipelined_word_lut_equals_the_golden_word_rule_with_stalls():
    """``NTWordLUTPipeline`` (the vault controllers' LUTs when the vault latency leaves room for its stages)
    against ``nt_lut_words``: every select, both widths, words mixed in one stream, random handshakes."""
    activation, params = "sigmoid", dict(table_bits=6, frac_bits=8, out_frac_bits=8)
    dut = NTWordLUTPipeline(activation=activation, **params)
    rng = np.random.default_rng(11)
    words = np.concatenate([np.array([0, 1, 0x7FFF, 0x8000, 0xFFFF7FFF, 0xFFFF8000, 0x7FFFFFFF, 0x80000000,
                                      0xFFFFFFFF], dtype=np.int64), rng.integers(0, 1 << 32, 600)])
    selects = rng.integers(0, 4, words.size)
    wides = rng.integers(0, 2, words.size)
    got = _run_pipeline(dut, [(int(w), int(b), int(s)) for w, b, s in zip(words, wides, selects)], seed=3)
    expected = words.copy()
    for name, code in LUT_SELECT.items():
        lut = {"function": activation if name == "f" else f"{activation}_grad", **params}
        for wide in (0, 1):
            chosen = (selects == code) & (wides == wide)
            expected[chosen] = nt_lut_words(words[chosen], 32 if wide else 16, **lut)
    bad = np.flatnonzero(got != expected)
    assert got.size == words.size and bad.size == 0, (
        f"word {int(words[bad[0]]):#x} select {selects[bad[0]]} wide {wides[bad[0]]}: got {int(got[bad[0]]):#x}, "
        f"expected {int(expected[bad[0]]):#x} ({bad.size} wrong)")


def test_pipelined_word_lut_takes_word_lut_stages_cycles_without_stalls():
    """Without stalls each word leaves ``NTWordLUTPipeline`` exactly ``WORD_LUT_STAGES`` cycles after it was accepted
    (the vault controller builds its vault that many cycles shorter; ``nt_system``'s layer cycle check allows a few
    cycles either way, so a stage too many or too few would pass it), one word per cycle."""
    dut = NTWordLUTPipeline(activation="sigmoid", table_bits=6, frac_bits=8, out_frac_bits=8)
    words = 20
    accepted, left = [], []

    async def bench(ctx):
        ctx.set(dut.o_word.ready, 1)
        ctx.set(dut.i_word.valid, 1)
        for cycle in range(words + 3 * WORD_LUT_STAGES + 4):
            ctx.set(dut.i_word.valid, int(len(accepted) < words))
            ctx.set(dut.i_word.payload, {"word": 12345 + cycle, "select": 1, "wide": 0})
            _, _, taken, valid = await ctx.tick().sample(dut.i_word.ready, dut.o_word.valid)
            if taken and len(accepted) < words:
                accepted.append(cycle)
            if valid:
                left.append(cycle)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(bench)
    simulator.run()
    assert len(left) == words, f"{len(left)} words left of {words}"
    delays = [out - into for into, out in zip(accepted, left)]
    assert delays == [WORD_LUT_STAGES] * words, f"cycles from acceptance to the output: {delays}"
    assert accepted == list(range(words)), f"accepted in cycles {accepted}"


def test_the_compiler_selects_the_table_by_the_read_addresses_of_the_named_input_only():
    params = PARAMS.defaults
    for kind, dims, lut in (("fc_ff", dict(h=4, k=10, n=4), {"x": "f"}),
                            ("conv_ff", dict(n=4, d=2, h=4, w=4, o=2, hk=3, wk=3), {"x": "df"}),
                            ("fc_bp", dict(h=6, k=4, n=2), {"dy": "df"})):
        (name, function), = lut.items()
        layer = compile_for_system(kind, dims, lut=lut, **params)
        plain = compile_for_system(kind, dims, **params)
        assert layer.lut == lut_functions(params)
        vaults = {place.vault for place in layer.tensors[name][1]}
        for job, plain_job in zip(layer.pe_jobs, plain.pe_jobs):
            for stream, plain_stream in ((job.in1, plain_job.in1), (job.in2, plain_job.in2)):
                if stream is None:
                    continue
                alias = lut_alias(function) if stream.vault in vaults else 0
                for program, plain_program in zip(stream.programs, plain_stream.programs):
                    assert program["base"] == plain_program["base"] + alias, (kind, stream.vault)
            for program in job.out.programs:
                assert program["base"] >> LUT_SELECT_SHIFT == 0, (kind, "a write address selects a table")


def test_the_compiler_rejects_a_lut_it_cannot_place():
    params = PARAMS.defaults
    with pytest.raises(ValueError, match="not an input"):
        compile_for_system("fc_ff", dict(h=4, k=10, n=4), lut={"y": "f"}, **params)
    with pytest.raises(ValueError, match="allowed"):
        compile_for_system("fc_ff", dict(h=4, k=10, n=4), lut={"x": "g"}, **params)
    with pytest.raises(ValueError, match="direct lowering"):          # stride 2: the host gathers the operand
        compile_for_system("conv_ff", dict(n=2, d=1, h=5, w=5, o=2, hk=3, wk=3, s=2, p=1), lut={"x": "f"}, **params)
