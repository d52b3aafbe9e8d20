"""Scenario table of ``nt_system``: compiled layers of every kind on the vaults, PMAGs, bus and PEs.

The system's ports are many streams driven by a host procedure (write the vault images, set
``config``, queue the PMAG and PE programs, read the vaults back), so its testbench
(``verif/tb_nt_system.py``) drives the table itself. A scenario's ``stimulus`` is
``{"layers": [layer, ...]}``, each layer a dict ``kind``, ``dims``, ``inputs`` (the input
tensors, integer words), ``sr``, ``bits`` and ``lut`` (compiler options: ``{input: "f" | "df"}``,
the inputs read through the vault controllers' activation LUTs) and ``pad_rows`` (max-pooling
only: the window streams read every second image row as pad, Table 3's pad window on the
window row) and, optionally, ``out_rows`` (the ``config`` port's END-MARK cadence instead of the compiler's:
:func:`end_mark_early_scenario`). The layers run one after the other from reset. ``valid``/``ready`` name the
patterns of the host's stream ports (``i_host__<v>``, ``i_read_program__<v>``,
``i_write_program__<v>``, ``i_pe_program__<pe>``; ``o_host_data__<v>``).

Expected, per layer in order:

- ``output``: the output tensor (nested lists, signed): numpy's integer result for integer
  layers (one operand in Q.F, ``v << F``, the other plain integers, so every MAC is exact);
  for max-pooling ``{"max", "argmax"}`` of every window, numpy's max and first argmax; for
  layers with a ``lut``, numpy's result on the operand as :func:`lut_reference` gives it (a
  plain-Python LUT from ``math``'s functions and the interpolation rule of
  ``hw/neurotrainer/docs/lut.md``, not the golden model's code);
- ``vault <v>``: every word of system vault ``v`` (0 = common, ``1 + i`` = PE ``i``'s) after
  the layer, from the reference executor ``sim/neurotrainer/executor.py`` (the compiled
  streams through the PMAG and PE golden models, checked against numpy in
  ``verif/test_neurotrainer_*.py``); for stochastic-rounding layers the output is the
  executor's too. The executor starts every layer from reset, so an SR layer is always the
  first layer of its scenario (the SR-LO state carried from layer to layer is tested against
  the golden model by the testbench's ``stochastic_rounding_state_carried``).

A layer's ``programs`` replaces the compiler's programs: ``"handwritten"`` (:func:`handwritten_programs`),
``"selects"`` (:func:`select_programs`) and ``"common"`` (:func:`common_vault_programs`: the common vault's read and
merged write programs), the scenario :data:`HANDWRITTEN`, whose outputs are the reference
executor's too (the PEs work on the words the hand-written programs read); the two layers of
:data:`POWER_ON` (:func:`power_on_scenario`, not in the table: the testbench's first test), expected from the
golden system model.
"""
import dataclasses
import math

import numpy as np

from trainforge.errors import ProgramError
from trainforge.golden.neurotrainer.pmag import default_program as default_pmag_program, nt_pmag
from trainforge.spec.neurotrainer.pmag import SOURCE_NAMES, WINDOW_MODES
from trainforge.sim.neurotrainer import executor
from trainforge.sim.neurotrainer.compiler import COMMON, Stream
from trainforge.spec.neurotrainer.integration import LUT_ADDRESS_MASK, PARAMS, lut_functions
from trainforge.spec.neurotrainer.pe_program import OP_MAC, RANGE_LIMIT, encode_pe_program
from trainforge.sim.neurotrainer.integration_layers import compile_for_system, layer_config, run_layers

from scenario import Scenario, Transactions, random_pattern, rng_for

KINDS = ("conv_ff", "conv_bp", "conv_up", "fc_ff", "fc_bp", "fc_up", "maxpool", "maxpool_bp")

#: The layer kinds whose results the bus merges into the common vault.
MERGED = ("conv_up", "fc_ff", "fc_bp")


def compile_layer(params, layer):
    """The compiled layer of a stimulus layer (with the pad reads of ``pad_rows`` applied, and its PMAG programs
    replaced by :func:`handwritten_programs`', :func:`select_programs`', :func:`common_vault_programs`' or
    :func:`power_on_programs`' as ``layer["programs"]`` says)."""
    compiled = compile_for_system(layer["kind"], layer["dims"], sr=layer["sr"], bits=layer["bits"],
                                  lut=layer.get("lut"), **params)
    if layer["pad_rows"]:
        for job in compiled.pe_jobs:
            for program in job.in2.programs:
                program.update(window=2, h=3, h_lo=0, h_hi=1, k=0, k_lo=0, k_hi=1)   # outside hk < 1: pad
    if layer.get("programs") == "handwritten":
        compiled = handwritten_programs(params, compiled)
    elif layer.get("programs") == "selects":
        compiled = select_programs(compiled, params)
    elif layer.get("programs") == "common":
        compiled = common_vault_programs(compiled, params)
    elif layer.get("programs") in POWER_ON:
        compiled = power_on_programs(params, compiled, layer["programs"])
    return compiled


@dataclasses.dataclass
class VaultStream(Stream):
    """A :class:`~trainforge.sim.neurotrainer.compiler.Stream` whose data requests reach the vault as the vault takes
    them: word ``address mod depth`` (``golden/neurotrainer/vault.py``), a read's table select (address bits
    31 .. 30, ``spec/neurotrainer/integration.py``) kept. The address bits between the vault's and bit 29 are read by
    nothing; a program may set them (the executor's images are indexed by the word address)."""
    depth: int = 0

    def golden(self):
        streams = super().golden()
        for stream in streams:
            data = ~stream["end"]
            address = stream["address"][data].astype(np.int64)
            word = address % self.depth
            if not stream["write"].any():
                word |= address & ~LUT_ADDRESS_MASK & 0xFFFFFFFF
            stream["address"][data] = word.astype(np.uint64)
        return streams


def _program(**fields):
    program = default_pmag_program()
    program.update(fields)
    return program


#: The address bit (above every vault's decoded bits with the schema's depths up to 2**12) whose carry each
#: hand-written read program sends into the table select, by system vault: the common vault's and PE 1's through
#: level 4's register (its start value, then its steps), PE 0's through a stride read by ``d`` (level 6).
_CARRY_BIT = {0: 13, 1: 24, 2: 19}


def _walk(count, words):
    """``(inner, outer)``: ``count = inner * outer`` requests as ``r7 + r5`` (each from 0), whose largest address
    ``inner + outer - 2`` is the smallest such one; it must stay below ``words``."""
    inner = min((m for m in range(1, count + 1) if count % m == 0), key=lambda m: m + count // m)
    assert inner + count // inner - 2 < words, (count, words)
    return inner, count // inner


#: The write programs of each PE's vault in :func:`handwritten_programs`: at least 3, so that under the sequencer
#: one waits in the skid register of the write queue's output stage (the PMAG busy with one, the stage's output
#: holding the next).
WRITE_PARTS = 4


#: The reads of PE 0's program in :func:`handwritten_programs` that walks ``r3`` past 255 (``max[2]`` bit 8 set).
LATE_WINDOW_WORDS = 4


def handwritten_programs(params, layer):
    """``layer`` (a compiled conv FF: the common vault broadcast to BUF Input 1, each PE's vault to BUF Input 2, the
    results to the PE vaults) with hand-written PMAG programs of the same request counts, each in a
    :class:`VaultStream`. The PEs then work on other words than the compiler's; the expected values are the golden
    models' on these programs. Reads stay below the words the layer writes (the vault does not order a read after
    a write of another stream).

    - reads, first (the common vault, each PE's): :func:`crossing` programs, every counter of them stepping by the
      vault's depth from ``2**30 - depth + word`` (no table) into bit 30 (f(x)): a level register's bit cleared by
      a fault keeps a step below bit 30 (the levels 4 .. 7 on the common vault, 1 .. 4 and 5 .. 7 on a PE's);
    - reads, then: each program walks ``r7 + r5`` (words ``0 ..``) twice, the second time from word ``off`` by a step
      of level 4 (``b = r4``: the common vault, PE 1's first program) or level 6 (``d = r6``: PE 0's). The
      addresses hold ones in every bit from above the carry bit (:data:`_CARRY_BIT`) to bit 29 and, in the
      second walk, the carry bit too: the vault reads ``address mod depth``, and a wrong carry in the address
      arithmetic reaches bit 30, the table select, and reads the words through f(x). ``r7`` and ``r5`` enter by
      ``a`` and ``c`` (common vault), by ``p = r5`` and ``q = r7`` through ``a`` and ``c`` (PE 0), by ``c`` and
      ``d`` (PE 1);
    - PE 0's third read program (:data:`LATE_WINDOW_WORDS` words): ``r3`` walks 0 .. 259 (``max[2]`` bit 8 set) and
      a skip window lets only its last steps read; a maximum that lost bit 8 (the program queue of the
      sequencer, a PMAG) would end the walk before the window and the stream short;
    - PE 1's last read program: ``window = pad`` with ``k = r7`` (``1 <= k < 3``, so the bound's bit 2 is clear
      and steps with ``r7 >= 3`` read as pads) and ``h = const`` (inside), ``r7`` and ``r6`` by ``a`` and ``b``;
      under the sequencer it waits in its queue's output stage while the PMAG runs the others;
    - writes: each PE's in :data:`WRITE_PARTS` programs (fewer where the words do not split into as many
      programs of whole rows), program ``i`` writing the ``i``-th run of the PE's words: under the sequencer the
      PMAG runs the first while it waits for the PE's results, the second waits in the output register of its
      queue's output stage and the third in that stage's skid register; PE 0's with ``b = const`` (the address
      function's const term), PE 1's with ``p = r7`` and ``q = r6 + const`` through ``a`` and ``c``; bits
      16 .. 28 set in the base.
    """
    jobs = layer.pe_jobs
    depth = {COMMON: params["vault_depth"], **{job.pe: params["pe_vault_depth"] for job in jobs}}
    wide = int(layer.bits == 32)
    writes_from = {job.pe: int(job.out.requests()[0].min()) for job in jobs}
    counts = {len(job.out.requests()[0]) for job in jobs}
    # The most parts up to WRITE_PARTS that split every PE's writes into programs of whole rows (one write program
    # length per layer) of an even number of words.
    parts = max(parts for parts in range(1, WRITE_PARTS + 1)
                if all(count % (2 * parts) == 0 and (count // parts) % params["lanes"] == 0 for count in counts))

    def read_twice(vault, count, words, level, selects):
        """``count`` requests: ``r7 + r5`` twice, the second time ``off`` further by a step of ``r<level>``."""
        inner, outer = _walk(count // 2, words)
        carry = _CARRY_BIT[0 if vault == COMMON else 1 if level == 6 else 2]
        off = min(words - (inner + outer - 1), 31)
        assert count % 2 == 0 and off >= 0 and (1 << carry) > depth[vault], (vault, count, words)
        ones = ((1 << 30) - 1) & ~((1 << (carry + 1)) - 1)        # bits carry + 1 .. 29
        maxima = [0, 0, 0, 0, outer - 1, 0, inner - 1]
        maxima[level - 1] = 1
        program = _program(max=maxima, stride=[0, 0, 0, 0], wide=wide, **selects)
        stride = program["stride"]
        for select, source in (("r7", 7), ("r5", 5)):
            name = selects[select] if isinstance(selects[select], str) else None
            if name is None:       # through p (s = r5) or q (u = r7)
                name = selects[select][0]
                program.update({"s": 5} if source == 5 else {"u": 7})
                program[name] = 9 if source == 5 else 10
            else:
                program[name] = source
            stride["abcd".index(name)] = 1
        index = "abcd".index(selects["level"])
        program[selects["level"]] = level
        if level == 4:        # the carry bit comes with the step: clear in the start value, set in the sum
            program["base"], stride[index] = ones, (1 << carry) + off
        else:                 # the carry bit is in the base; the step has it clear (and bit 5)
            program["base"], stride[index] = ones | (1 << carry), off & ~32
        for name in ("r7", "r5", "level"):
            program.pop(name, None)
        return program

    def write_programs(job, form, parts):
        """``parts`` programs, program ``i`` writing the ``i``-th of ``parts`` equal runs of the job's words."""
        count = len(job.out.requests()[0])
        low = writes_from[job.pe]
        assert count % (2 * parts) == 0 and low + count <= layer.vault_words[job.pe], (job.pe, count, parts)
        half, const = count // parts // 2, 3
        programs = []
        for part in range(parts):
            start = low + 2 * half * part
            program = _program(max=[0, 0, 0, 0, 0, 1, half - 1], write=1, wide=wide, const=const)
            if form == "b":
                program.update(a=7, c=6, b=8, stride=[1, 5, half, 0], base=start - const * 5)
            else:
                program.update(s=7, u=6, v=8, a=9, c=10, stride=[1, 0, half, 0], base=start - const * half)
            program["base"] = (program["base"] + 0x1FFF0000) & 0xFFFFFFFF
            programs.append(program)
        return programs

    def late_window(vault, words):
        """``words`` reads issued only at the last steps of a walk of ``r3`` over ``256 + words`` steps
        (``max[2] = 255 + words``: bit 8 set): ``window = skip`` with ``h = r3`` in ``[256, 256 + words)``,
        ``k = const`` inside. They read words ``0 ..`` (``base + 256`` is a multiple of the vault's depth)."""
        return _program(max=[0, 0, 255 + words, 0, 0, 0, 0], a=3, stride=[1, 0, 0, 0],
                        base=-256 % depth[vault], window=WINDOW_MODES["skip"], h=3, h_lo=256, h_hi=256 + words,
                        k=8, const=0, k_lo=0, k_hi=1, wide=wide)

    def stream(old, programs):
        return VaultStream(old.vault, programs, broadcast=old.broadcast, lut=old.lut, depth=depth[old.vault])

    def crossing(vault, levels, word):
        """A program whose counters ``levels`` (each 0, 1) each add ``depth`` (above the vault's bits): word
        ``word`` read first at ``2**30 - depth + word`` (every bit from the vault's up to 29 set, no table), then,
        from the first step of any level on, through f(x) (bit 30). A bit of a level's register cleared by a fault
        keeps that step below bit 30 (read without the table)."""
        program = _program(base=(1 << 30) - depth[vault] + word, wide=wide, stride=[depth[vault]] * 4)
        routes = iter([("a", 9, ("s", "t")), ("b", 10, ("u", "v")), ("c", None, ()), ("d", None, ())])
        chosen = list(levels)
        for level in chosen:
            program["max"][level - 1] = 1
        while chosen:
            select, sum_code, inputs = next(routes)
            if sum_code is not None and len(chosen) > 4 - "abcd".index(select) - 1:
                program[select] = sum_code
                program.update({name: chosen.pop(0) for name in inputs})
            else:
                program[select] = chosen.pop(0)
        return program

    assert layer.kind == "conv_ff" and len(jobs) >= 2 and all(job.in1.broadcast for job in jobs), layer.kind
    layer.lut = lut_functions(PARAMS.resolve(**{key: params[key] for key in PARAMS.names}))
    broadcast = jobs[0].in1
    count = len(broadcast.requests()[0])
    common = stream(broadcast, [crossing(COMMON, (4, 5, 6, 7), 3),
                                read_twice(COMMON, count - 16, layer.vault_words[COMMON], 4, {"r7": "a", "r5": "c",
                                                                                              "level": "b"})])
    for job in jobs:
        count, words = len(job.in2.requests()[0]), writes_from[job.pe]
        crossings = [crossing(job.pe, (1, 2, 3, 4), 5), crossing(job.pe, (5, 6, 7), 9)]
        if job.pe == 1:
            assert count % 4 == 0, count
            first = read_twice(job.pe, count // 2 - 24, words, 4, {"r7": "c", "r5": "d", "level": "b"})
            inner, outer = _walk(count // 2, words)
            assert inner >= 4, inner
            second = _program(max=[0, 0, 0, 0, 0, outer - 1, inner - 1], a=7, b=6, stride=[1, 1, 0, 0],
                              base=0x2AAAAA00 & ~(depth[job.pe] - 1), window=2, h=8, const=5, h_lo=5, h_hi=6,
                              k=7, k_lo=1, k_hi=3, wide=wide)
            programs = [*crossings, first, second]
        else:
            programs = [*crossings, late_window(job.pe, LATE_WINDOW_WORDS),
                        read_twice(job.pe, count - 24 - LATE_WINDOW_WORDS, words, 6,
                                   {"r7": ("c",), "r5": ("a",), "level": "d"})]
        job.in1 = common
        job.in2 = stream(job.in2, programs)
        job.out = stream(job.out, write_programs(job, "b" if job.pe == 0 else "pq", parts))
    return layer


#: The selects a hand-written select program tests, with the codes it tests each with: every code of the
#: address terms ``a .. d`` and the window values ``h``, ``k``; ``s .. v`` (which read 0 for 9 and up) 0 .. 11.
SELECT_CODES = tuple((select, code) for select in "abcd" for code in range(16)) + \
    tuple((select, code) for select in "stuv" for code in range(12)) + \
    tuple((select, code) for select in "hk" for code in range(16))

#: The ``const`` of a select program.
SELECT_CONST = 5


def select_program(select, code, base, *, write, wide):
    """A PMAG program of exactly two data requests, to words ``base`` and ``base + 1``, in which ``select`` reads
    source ``code`` (0 zero, 1 .. 7 ``r1 .. r7``, 8 ``const``, 9 ``p``, 10 ``q``, others zero) and decides them:

    - ``a .. d``: the address term ``src(code) * stride`` (a counter stepping 0, 1 with stride 1; ``const`` or
      ``p = r7 + const`` / ``q = r6 + const`` with the base taking the const part off; a zero source with stride
      64 beside ``r7``, so that reading anything else moves the words);
    - ``s .. v``: the same through ``p`` (``a = p``) or ``q`` (``a = q``);
    - ``h``, ``k``: the window (``window = skip``) of three steps of which the first is outside (a counter or
      ``p``/``q`` stepping 0 .. 2 against ``[1, 3)``, ``[const + 1, const + 3)``), or, for ``const`` and zero
      sources, two steps inside a window of that one value; the other comparator reads zero, inside ``[0, 1)``.
    """
    const, other = SELECT_CONST, "b" if select == "a" else "a"
    program = _program(write=write, wide=wide, const=const, stride=[0, 0, 0, 0])
    maxima, stride = program["max"], program["stride"]

    def source(level, steps):        # a counter stepping 0 .. steps - 1
        maxima[level - 1] = steps - 1

    def term(name, code, factor=1):
        program[name] = code
        stride["abcd".index(name)] = factor

    offset = 0
    if select in "abcd":
        if 1 <= code <= 7:
            source(code, 2)
            term(select, code)
        elif code == 8:
            source(7, 2)
            term(other, 7)
            term(select, 8, 2)
            offset = 2 * const
        elif code in (9, 10):
            level = 7 if code == 9 else 6
            source(level, 2)
            program.update({"s": 7, "t": 8} if code == 9 else {"u": 6, "v": 8})
            term(select, code)
            offset = const
        else:
            source(7, 2)
            term(other, 7)
            term(select, code, 64)
    elif select in "stuv":
        through = 9 if select in "st" else 10
        if 1 <= code <= 7:
            source(code, 2)
            program[select] = code
            term("a", through)
        else:
            source(7, 2)
            term("b", 7)
            program[select] = code
            term("a", through, 1 if code == 8 else 64)
            offset = const if code == 8 else 0
    else:
        program["window"] = WINDOW_MODES["skip"]
        rest = "k" if select == "h" else "h"
        program.update({rest: 0, f"{rest}_lo": 0, f"{rest}_hi": 1, select: code})
        if 1 <= code <= 7 or code in (9, 10):
            level = code if code <= 7 else 7 if code == 9 else 6
            source(level, 3)
            term("a", level)
            if code in (9, 10):
                program.update({"s": 7, "t": 8} if code == 9 else {"u": 6, "v": 8})
            low = 1 + (const if code in (9, 10) else 0)
            program.update({f"{select}_lo": low, f"{select}_hi": low + 2})
            offset = 1
        else:
            source(7, 2)
            term("a", 7)
            value = const if code == 8 else 0
            program.update({f"{select}_lo": value, f"{select}_hi": value + 1})
    program["base"] = (base - offset) & 0xFFFFFFFF
    return program


def select_programs(layer, params):
    """``layer`` (a compiled conv FF) with its PE vaults' reads and writes and the common vault's read made of
    :func:`select_program` programs, :data:`SELECT_CODES` in turn (from the start again when a stream needs more):
    the reads from words below the PE's results (two words each, at ``2 i`` modulo the region), the writes to
    the words the compiler's program wrote (two each, in order)."""
    jobs, wide = layer.pe_jobs, int(layer.bits == 32)

    def programs(count, region, write):
        assert count % 2 == 0 and region[1] - region[0] >= 2, (count, region)
        span = region[1] - region[0] - 1
        return [select_program(*SELECT_CODES[number % len(SELECT_CODES)],
                               region[0] + (2 * number if write else (2 * number) % span), write=write, wide=wide)
                for number in range(count // 2)]

    assert layer.kind == "conv_ff" and all(job.in1.broadcast for job in jobs), layer.kind
    broadcast = jobs[0].in1
    common = Stream(COMMON, programs(len(broadcast.requests()[0]), (0, layer.vault_words[COMMON]), 0), broadcast=True)
    for job in jobs:
        address = job.out.requests()[0]
        low = int(address.min())
        assert np.array_equal(np.sort(address), np.arange(low, low + address.size)), "the results are not one region"
        job.in1 = common
        job.in2 = Stream(job.pe, programs(len(job.in2.requests()[0]), (0, low), 0))
        job.out = Stream(job.pe, programs(address.size, (low, low + address.size), 1))
    return layer


#: The selects of a program, the address terms and the window values.
_SELECTS = "abcdhk"


def through_program(via, first, second, base, *, wide):
    """A read program in which every select (``a .. d``, ``h``, ``k``) reads ``via`` (``"p"``: ``p = src(s) +
    src(t)`` with ``s = first``, ``t = second``; ``"q"``: ``q = src(u) + src(v)``), counter ``first`` and counter
    ``second`` each stepping 0, 1 (one counter when they are equal: a doubled sum such as ``q = r2 + r2``).

    The address is ``base + 15 via`` (strides 1, 2, 4, 8 of ``a .. d``: a select that counts a source once too
    often or too rarely moves the address by its stride); the window (``window = pad``) lets in ``via == 1``
    (two sources) or ``via == 2`` (doubled) through ``h`` and ``k``, so the other steps are pads (read as 0) and
    a wrong count in ``h`` or ``k`` pads a step that reads a word. Two sources: 4 requests, ``via`` 0, 1, 1, 2;
    doubled: 2 requests, ``via`` 0, 2. The largest address is ``base + 30``.
    """
    program = _program(wide=wide, stride=[1, 2, 4, 8], base=base, window=WINDOW_MODES["pad"])
    inputs = ("s", "t") if via == "p" else ("u", "v")
    program.update({inputs[0]: first, inputs[1]: second})
    program.update({select: SOURCE_NAMES[via] for select in _SELECTS})
    for level in (first, second):
        program["max"][level - 1] = 1
    inside = 2 if first == second else 1
    program.update(h_lo=inside, h_hi=inside + 1, k_lo=inside, k_hi=inside + 1)
    return program


def merged_write_program(index, base, *, wide):
    """A merged write program of 4 requests, to ``base .. base + 3``: counters ``L = 1 + index mod 7`` and ``M = L
    mod 7 + 1`` each step 0, 1; select ``X`` reads a doubled sum ``2 rL`` (``p = rL + rL`` for an even ``index``,
    else ``q``) and ``Y`` the other sum, ``rM + const``, both with stride 1; ``Z`` and ``W`` read zero (code 0 and
    one of 11 .. 15) with strides 64 and 128, so that a select that counts a walking counter where it should not
    moves a write far away. ``X, Y, Z, W`` are ``a, b, c, d`` rotated by ``index``."""
    const = SELECT_CONST
    level = 1 + index % 7
    other = level % 7 + 1
    x, y, z, w = ("abcd" * 2)[index % 4:index % 4 + 4]
    doubled, single = ("p", "q") if index % 2 == 0 else ("q", "p")
    program = _program(write=1, wide=wide, const=const, stride=[0, 0, 0, 0], base=(base - const) & 0xFFFFFFFF)
    for via, pair in ((doubled, (level, level)), (single, (other, SOURCE_NAMES["const"]))):
        program.update(dict(zip(("s", "t") if via == "p" else ("u", "v"), pair)))
    for select, code, stride in ((x, SOURCE_NAMES[doubled], 1), (y, SOURCE_NAMES[single], 1), (z, 0, 64),
                                 (w, 11 + index % 5, 128)):
        program[select] = code
        program["stride"]["abcd".index(select)] = stride
    program["max"][level - 1] = program["max"][other - 1] = 1
    return program


def common_vault_programs(layer, params):
    """``layer`` (a compiled merged 32-bit FC FF: the common vault broadcasts the samples to BUF Input 2 and takes
    the merged results, in blocks of 4 words) with the common vault's PMAG programs written by hand:

    - its read: first :func:`through_program` for ``p`` and ``q``, every counter ``L``, once doubled (``L + L``) and
      once beside the next counter (``L + L mod 7 + 1``), then :func:`select_program` of every select code
      (:data:`SELECT_CODES`, from the start again to fill the stream), all within the samples' words;
    - its merged writes: :func:`merged_write_program`, one per result block in the bus's merge order, program
      ``j`` to the ``j``-th four words of the result region (the compiler's region).

    The PE vaults' reads are the compiler's.
    """
    jobs, wide = layer.pe_jobs, int(layer.bits == 32)
    assert layer.kind == "fc_ff" and wide and all(job.in2.broadcast and job.out.vault == COMMON for job in jobs), \
        layer.kind
    broadcast = jobs[0].in2
    count = len(broadcast.requests()[0])
    results = np.concatenate([job.out.requests()[0] for job in jobs])
    low = int(results.min())
    assert np.array_equal(np.sort(results), np.arange(low, low + results.size)), "the results are not one region"
    span = low - 31
    reads = [through_program(via, level, second, 0, wide=wide) for via in "pq" for level in range(1, 8)
             for second in (level, level % 7 + 1)]
    for number, program in enumerate(reads):
        program["base"] = (7 * number) % span
    used = sum(len(nt_pmag(program)["address"]) - 1 for program in reads)
    assert used < count and (count - used) % 2 == 0, (used, count)
    reads += [select_program(*SELECT_CODES[number % len(SELECT_CODES)], (2 * number) % (low - 1), write=0,
                             wide=wide) for number in range((count - used) // 2)]
    common = VaultStream(COMMON, reads, broadcast=True, depth=params["vault_depth"])
    blocks = {job.pe: len(job.out.programs) for job in jobs}
    assert len(set(blocks.values())) == 1, blocks
    assert all(len(run["address"]) == 5 and not run["pad"].any() for job in jobs for run in job.out.golden()), \
        "merged result blocks of 4 words"
    order = [(block, job.pe) for block in range(blocks[jobs[0].pe]) for job in jobs]     # the bus's merge order
    for job in jobs:
        job.in2 = common
        job.out = VaultStream(COMMON, [merged_write_program(order.index((block, job.pe)),
                                                            low + 4 * order.index((block, job.pe)), wide=wide)
                                       for block in range(blocks[job.pe])], depth=params["vault_depth"])
    return layer


#: The two layers of :func:`power_on_scenario`: which buffer the pass reads (mostly) before any write.
POWER_ON = ("power-on BUF Input 1", "power-on BUF Input 2")


def power_on_programs(params, layer, which):
    """``layer`` (a compiled 32-bit conv FF) as one MAC pass per PE of ``2 * half1`` ... of ``half1`` steps (every
    word of a BUF Input 1 half), ``half2`` steps per output row (every row of a BUF Input 2 half: rows are read
    ``step mod half2``), 2 output rows.

    - ``"power-on BUF Input 1"``: its BUF Input 1 block is one word (word 0 of half 0 written, words 1 .. are read
      as the power-on contents), its BUF Input 2 block every row of the half;
    - ``"power-on BUF Input 2"``: a whole BUF Input 1 block (half 1), a BUF Input 2 block of one row (half 1; rows
      1 .. read as the power-on contents).

    The words come from the compiled layer's images (nonzero integers); the results go to the first words of each
    PE's result region. The golden PE model reads an unwritten word as 0, as ``nt_pe``'s power-on test checks.
    """
    jobs, lanes = layer.pe_jobs, params["lanes"]
    half1, half2 = params["in1_depth"] // 2, params["in2_depth"] // 2
    per_output = min(half2, RANGE_LIMIT)
    assert layer.kind == "conv_ff" and layer.bits == 32 and half1 <= RANGE_LIMIT and half1 % per_output == 0
    words1, rows2 = (1, half2) if which == POWER_ON[0] else (half1, 1)
    outputs = half1 // per_output
    broadcast = jobs[0].in1
    assert broadcast.broadcast and layer.vault_words[COMMON] >= words1, layer.vault_words
    one = lambda count, base=0, write=0: _program(max=[0] * 6 + [count - 1], a=7, stride=[1, 0, 0, 0],  # noqa: E731
                                                  base=base, write=write, wide=1)
    common = Stream(COMMON, [one(words1)], broadcast=True)
    for job in jobs:
        low = int(job.out.requests()[0].min())
        assert low >= rows2 * lanes, (low, rows2, lanes)
        job.passes = [encode_pe_program(op=OP_MAC, wide=1, cnt2_outer=0, cnt2_inner=half1 - 1, cnt1=per_output - 1)]
        job.in1, job.in1_blocks = common, [words1]
        job.in2, job.in2_blocks = Stream(job.pe, [one(rows2 * lanes)]), [rows2]
        job.out = Stream(job.pe, [one(outputs * lanes, base=low, write=1)])
    return layer


def power_on_scenario(params, seed):
    """The two layers of :data:`POWER_ON` from power-on (``tb_nt_system.power_on_pe_buffers_read_zero``, the module's
    first test: the PE buffers keep their words across resets), with the golden system model's results (its PEs
    carried from the first layer to the second), or None when the layers do not fit these parameters."""
    generator = np.random.default_rng(rng_for(seed, "nt_system", "power-on").randrange(1 << 32))
    dims = dict(n=params["lanes"] * params["pes"], d=4, h=4, w=4, o=4, hk=2, wk=2)
    layers = []
    for which in POWER_ON:
        layer = _layer("conv_ff", dims, None, bits=32, programs=which)
        try:
            compiled = compile_layer(params, layer)
            layer_config(compiled)
        except (AssertionError, ProgramError, ValueError):
            return None
        # The PE reads every word as the images place it; Q.F x and integer w keep each product exact and large.
        shapes = {name: shape for name, (shape, _) in compiled.tensors.items() if name in compiled.inputs}
        layer["inputs"] = {"x": generator.integers(-1000, 1000, size=shapes["x"]) << params["frac_bits"],
                           "w": generator.integers(-1000, 1000, size=shapes["w"])}
        layers.append(layer)
    name = "PE buffers read before any write (power-on contents)"
    return Scenario(name, {"layers": layers}, golden(params, Scenario(name, {"layers": layers}, {})).items)


#: The scenario of :func:`end_mark_early_scenario` (not in the table: ``tb_nt_system.end_mark_early`` plays it).
END_MARK_EARLY = "a 32-bit conv FF whose config sends the END-MARK a row before its write programs end"

#: The END-MARK's data in a 32-bit layer (the paper's PMAG END-MARK, all ones).
END_MARK_32 = 0xFFFFFFFF


def end_mark_early_scenario(params, seed):
    """A 32-bit conv FF layer run with ``config.out_rows`` one row fewer than its write programs hold (R rows each),
    so that each PE's row unpacker sends an END-MARK after every ``(R - 1) * lanes`` result words, against the
    compiler's programs; or None when the layer does not fit these parameters or the programs would not take
    exactly the words and END-MARKs sent (that needs fewer programs per PE than ``R - 1``).

    The vault controller joins a data request with the next word, whatever it is, and an END request with the
    next word, writing nothing: so the vaults get END-MARK words (0xFFFFFFFF) where data requests meet them, and
    the result words the END requests meet are dropped. Expected, per vault: the reference executor's image of
    the layer run as compiled, with each write request's word replaced by the token it meets: data request ``j``
    of program ``i`` (``D = R * lanes`` data requests, then the END request) meets token ``t = i * (D + 1) + j``
    of the sent stream, an END-MARK when ``(t + 1) % (B + 1) == 0`` (``B = (R - 1) * lanes``), else result word
    ``t - t // (B + 1)``. Only the vault images are expected (the output tensor is read from them)."""
    generator = np.random.default_rng(rng_for(seed, "nt_system", "end-mark early").randrange(1 << 32))
    lanes = params["lanes"]
    dims = dict(n=2 * lanes * params["pes"], d=2, h=4, w=4, o=2, hk=3, wk=3)
    layer = _layer("conv_ff", dims, None, bits=32)
    shapes = _input_shapes_if_it_fits(params, layer)
    if shapes is None:
        return None
    compiled = compile_layer(params, layer)
    rows = layer_config(compiled)["out_rows"]
    programs = {len(job.out.programs) for job in compiled.pe_jobs}
    if rows < 2 or max(programs) >= rows - 1 or any(job.out.vault == COMMON for job in compiled.pe_jobs):
        return None
    layer["out_rows"] = rows - 1
    layer["inputs"] = {"x": generator.integers(-100, 100, size=shapes["x"]) << params["frac_bits"],
                       "w": generator.integers(-100, 100, size=shapes["w"])}
    final = {vault + 1: np.asarray(words, dtype=np.int64) & 0xFFFFFFFF
             for vault, words in executor.execute(compiled, layer["inputs"])["vaults"].items()}
    data, block = rows * lanes, (rows - 1) * lanes
    for job in compiled.pe_jobs:
        address, pad = job.out.requests()
        assert not pad.any() and len(set(address.tolist())) == len(address) == data * len(job.out.programs), job.pe
        image = final[job.out.vault + 1]
        words = image[address].copy()            # the results, in request order (each address written once)
        for index, where in enumerate(address):
            program, j = divmod(index, data)
            t = program * (data + 1) + j
            image[where] = END_MARK_32 if (t + 1) % (block + 1) == 0 else words[t - t // (block + 1)]
    expected = {f"vault {vault}": [words.tolist()] for vault, words in final.items()}
    return Scenario(END_MARK_EARLY, {"layers": [layer]}, expected)


def system_config(layer, compiled):
    """The ``config`` port value a stimulus layer runs with: :func:`layer_config`'s, with the layer's ``out_rows``
    when it sets one (:func:`end_mark_early_scenario`)."""
    config = layer_config(compiled)
    if layer.get("out_rows") is not None:
        config["out_rows"] = layer["out_rows"]
    return config


def select_layer(params, generator):
    """The conv FF layer of :func:`select_programs` (integer inputs), or None when its programs do not fit these
    parameters (a write program of two words must be whole result rows)."""
    dims = dict(n=2 * params["lanes"] * params["pes"], d=1, h=6, w=6, o=4, hk=3, wk=3)
    layer = _layer("conv_ff", dims, None, programs="selects")
    try:
        compiled = compile_layer(params, layer)
        layer_config(compiled)
    except (AssertionError, ProgramError, ValueError):
        return None
    if compiled.copy_jobs or compiled.vault_words[-1] > params["vault_depth"] or \
            max(compiled.vault_words[pe] for pe in range(params["pes"])) > params["pe_vault_depth"]:
        return None
    layer["inputs"], _ = make_inputs("conv_ff", dims, generator, params["frac_bits"])
    return layer


def _input_shapes_if_it_fits(params, layer):
    """The shapes of the compiled ``layer``'s inputs, or None when it does not compile for these parameters or its
    tensors do not fit the vaults."""
    try:
        compiled = compile_layer(params, layer)
        layer_config(compiled)
    except (AssertionError, ProgramError, ValueError):
        return None
    if compiled.vault_words[-1] > params["vault_depth"] or \
            max(compiled.vault_words[pe] for pe in range(params["pes"])) > params["pe_vault_depth"]:
        return None
    return {name: shape for name, (shape, _) in compiled.tensors.items() if name in compiled.inputs}


def handwritten_layer(params, generator):
    """The 32-bit conv FF layer of :func:`handwritten_programs` (Q.F ``x`` and integer ``w`` below 100: the sums
    of raw words and of f(x) stay far from saturation, so one word read through f(x) or not shows), or None when
    its programs do not fit these parameters."""
    dims = dict(n=2 * params["lanes"] * params["pes"], d=2, h=4, w=4, o=2, hk=3, wk=3)
    layer = _layer("conv_ff", dims, None, bits=32, programs="handwritten")
    shapes = _input_shapes_if_it_fits(params, layer)
    if shapes is None:
        return None
    layer["inputs"] = {"x": generator.integers(-100, 100, size=shapes["x"]) << params["frac_bits"],
                       "w": generator.integers(-100, 100, size=shapes["w"])}
    return layer


def common_vault_layer(params, generator):
    """The merged 32-bit FC FF layer of :func:`common_vault_programs` (Q.F samples and integer weights, both nonzero
    and below 100 in magnitude: no saturation, and a word read where another should be changes a sum), or None when
    its programs do not fit these parameters (merged result blocks of 4 words: ``lanes = 2``, two rows per PE)."""
    dims = dict(h=2 * params["pes"], k=24, n=8 * params["lanes"])
    layer = _layer("fc_ff", dims, None, bits=32, programs="common")
    shapes = _input_shapes_if_it_fits(params, layer)
    if shapes is None:
        return None

    def nonzero(shape):
        return generator.integers(1, 100, size=shape) * generator.choice([-1, 1], size=shape)

    layer["inputs"] = {"x": nonzero(shapes["x"]) << params["frac_bits"], "w": nonzero(shapes["w"])}
    return layer


def result_blocks(layer):
    """Result blocks (merged write programs) per PE of a compiled merged layer, else 0."""
    job = layer.pe_jobs[0]
    return len(job.out.programs) if job.out.vault == -1 else 0


def _conv(x, w):
    """Valid correlation: y[n, o] = sum_d sum_ij x[n, d, i.., j..] w[o, d, i, j]."""
    _, _, hk, wk = w.shape
    out_h, out_w = x.shape[2] - hk + 1, x.shape[3] - wk + 1
    y = np.zeros((x.shape[0], w.shape[0], out_h, out_w), dtype=np.int64)
    for i in range(hk):
        for j in range(wk):
            y += np.einsum("ndhw,od->nohw", x[:, :, i:i + out_h, j:j + out_w], w[:, :, i, j])
    return y


def _strided_windows(x, hk, wk, stride, pad):
    """``(n, d, out_h, out_w, hk, wk)`` windows of ``x`` zero padded by ``pad``, ``stride`` apart."""
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out_h, out_w = (padded.shape[2] - hk) // stride + 1, (padded.shape[3] - wk) // stride + 1
    rows = (np.arange(out_h) * stride)[:, None] + np.arange(hk)
    cols = (np.arange(out_w) * stride)[:, None] + np.arange(wk)
    return padded[:, :, rows[:, None, :, None], cols[None, :, None, :]]


def make_strided_inputs(kind, dims, draw, frac_bits):
    """Inputs and numpy output of a convolution with stride ``s`` and padding ``p`` (the tiled lowering);
    ``draw(shape, low, high)`` makes an input tensor."""
    n, d, h, w, o, hk, wk, stride, pad = (dims[k] for k in ("n", "d", "h", "w", "o", "hk", "wk", "s", "p"))
    out_h, out_w = (h + 2 * pad - hk) // stride + 1, (w + 2 * pad - wk) // stride + 1
    if kind == "conv_ff":
        x, kernel = draw((n, d, h, w), -30, 30), draw((o, d, hk, wk), -30, 30)
        return {"x": x, "w": kernel}, np.einsum("ndyxab,odab->noyx", _strided_windows(x, hk, wk, stride, pad), kernel)
    dy = draw((n, o, out_h, out_w), -1000, 1000)
    if kind == "conv_up":
        x = draw((n, d, h, w), -1000, 1000)
        return ({"x": x << frac_bits, "dy": dy},
                np.einsum("ndyxab,noyx->odab", _strided_windows(x, hk, wk, stride, pad), dy))
    kernel = draw((o, d, hk, wk), -1000, 1000)
    dx = np.zeros((n, d, h + 2 * pad, w + 2 * pad), dtype=np.int64)
    for y in range(out_h):
        for x in range(out_w):
            dx[:, :, y * stride:y * stride + hk, x * stride:x * stride + wk] += np.einsum("no,odab->ndab",
                                                                                          dy[:, :, y, x], kernel)
    return {"dy": dy << frac_bits, "w": kernel}, dx[:, :, pad:pad + h, pad:pad + w]


def make_inputs(kind, dims, generator, frac_bits, values=None, tiled=False):
    """Integer inputs of a layer and the numpy reference of its output (for max-pooling: its input).

    ``tiled``: the compiler lowered the convolution as im2col plus the tiled matmul (always with a
    stride or padding; with neither, when the layer does not fit the direct lowering). Its input
    tensors are not the direct lowering's (``conv_bp`` takes ``dy``, not ``dy_padded``).
    """
    def draw(shape, low, high):
        return generator.integers(low, high, size=shape) if values is None else np.full(shape, values, dtype=np.int64)

    if tiled or "s" in dims or "p" in dims:
        return make_strided_inputs(kind, {"s": 1, "p": 0, **dims}, draw, frac_bits)

    if kind in ("conv_ff", "conv_bp", "conv_up"):
        n, d, h, w, o, hk, wk = (dims[k] for k in ("n", "d", "h", "w", "o", "hk", "wk"))
    if kind == "conv_ff":
        x, kernel = draw((n, d, h, w), -30, 30), draw((o, d, hk, wk), -30, 30)
        return {"x": x, "w": kernel}, _conv(x, kernel)
    if kind == "conv_bp":
        dy, kernel = draw((n, o, h - hk + 1, w - wk + 1), -1000, 1000), draw((o, d, hk, wk), -1000, 1000)
        dx = np.zeros((n, d, h, w), dtype=np.int64)
        for i in range(hk):
            for j in range(wk):
                dx[:, :, i:i + dy.shape[2], j:j + dy.shape[3]] += np.einsum("nohw,od->ndhw", dy, kernel[:, :, i, j])
        padded = np.pad(dy, ((0, 0), (0, 0), (hk - 1, hk - 1), (wk - 1, wk - 1)))
        return {"dy_padded": padded << frac_bits, "w": kernel}, dx
    if kind == "conv_up":
        x, dy = draw((n, d, h, w), -1000, 1000), draw((n, o, h - hk + 1, w - wk + 1), -1000, 1000)
        return ({"x": x << frac_bits, "dy": dy},
                _conv(x.transpose(1, 0, 2, 3), dy.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3))
    if kind == "fc_ff":
        # 16-bit: |sum| <= 48 * 25 * 25 = 30000 does not saturate.
        weights, x = draw((dims["h"], dims["k"]), -25, 26), draw((dims["k"], dims["n"]), -25, 26)
        return {"w": weights, "x": x}, weights @ x
    if kind == "fc_bp":
        weights, dy = draw((dims["h"], dims["k"]), -1000, 1000), draw((dims["h"], dims["n"]), -1000, 1000)
        return {"w": weights, "dy": dy << frac_bits}, weights.T @ dy
    if kind == "fc_up":
        dy, x = draw((dims["h"], dims["n"]), -1000, 1000), draw((dims["k"], dims["n"]), -1000, 1000)
        return {"dy": dy, "x": x << frac_bits}, dy @ x.T
    if kind == "act_bp":
        # The reference needs the system's LUT (``lut_reference``); the callers that time the layer only
        # take the inputs.
        z, dx = draw((dims["h"], dims["n"]), -3000, 3000), draw((dims["h"], dims["n"]), -60, 60)
        return {"z": z, "dx": dx << frac_bits}, None
    n, c, h, w = (dims[k] for k in ("n", "c", "h", "w"))
    x = draw((n, c, h, w), -4, 4)
    if kind == "maxpool_bp":
        dy = draw((n, c, h // dims["r"], w // dims["r"]), -(1 << 20), 1 << 20)
        return unpool_inputs(x, dy, dims["r"])
    return {"x": x}, x


def unpool_inputs(x, dy, r):
    """Inputs of a max-pooling backward layer over the forward input ``x`` (numpy's max and first argmax, as the
    forward pass's words ``max | argmax << 16``) and numpy's dX: ``dy`` at each window's argmax, 0 elsewhere."""
    x, dy = np.asarray(x, dtype=np.int64), np.asarray(dy, dtype=np.int64)
    n, c, h, w = x.shape
    windows = x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // r, w // r, r * r)
    argmax = windows.argmax(-1)
    words = (windows.max(-1) & 0xFFFF) | (argmax << 16)
    scattered = np.where(np.arange(r * r) == argmax[..., None], dy[..., None], 0)
    dx = scattered.reshape(n, c, h // r, w // r, r, r).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h, w)
    return {"pooled": words, "dy": dy}, dx


def pooled(x, r, pad_rows=False):
    """numpy's max and first argmax of every ``r x r`` window (odd rows read as 0 with ``pad_rows``)."""
    x = np.array(x, dtype=np.int64)
    if pad_rows:
        x[:, :, 1::2, :] = 0
    n, c, h, w = x.shape
    windows = x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // r, w // r, r * r)
    return {"max": windows.max(-1).tolist(), "argmax": windows.argmax(-1).tolist()}


def output_item(layer, output):
    """A layer's output tensor in the table's terms (max-pooling: decoded into max and argmax)."""
    if layer["kind"] == "maxpool":
        value, index = executor.maxpool_decode(output)
        return {"max": value.tolist(), "argmax": index.tolist()}
    return np.asarray(output, dtype=np.int64).tolist()


def random_dims(kind, generator, params, several=False):
    """Random dimensions that compile for the system and fit its vaults; with ``several``, a merged
    kind gets at least two result blocks per PE."""
    pes, lanes = params["pes"], params["lanes"]
    for _ in range(500):
        pick = lambda low, high: int(generator.integers(low, high + 1))  # noqa: E731
        if kind in ("conv_ff", "conv_bp", "conv_up"):
            hk, wk = pick(1, 3), pick(1, 3)
            up = kind == "conv_up"
            dims = dict(n=pick(1, 2 if up else 2 * lanes * pes), d=pick(1, 2 * pes if up else 3),
                        h=hk + pick(0, 2), w=wk + pick(0, 2), o=pick(1, 2 * lanes if up else 3), hk=hk, wk=wk)
        elif kind in ("fc_ff", "fc_bp"):
            elements = lanes * (2 if kind == "fc_ff" else 1)
            dims = dict(h=pick(1, 4 * pes), k=pick(1, 4 * pes), n=pick(1, 2 * elements))
            dims["k" if kind == "fc_ff" else "h"] = pick(1, 48)
        elif kind == "fc_up":
            dims = dict(h=pick(1, 8), k=pick(1, 6), n=pick(1, 4))
        else:
            r = pick(1, 2)
            dims = dict(n=pick(1, 2 * lanes * pes), c=pick(1, 2), h=r * pick(1, 3), w=r * pick(1, 3), r=r)
        try:
            layer = compile_for_system(kind, dims, **params)
            layer_config(layer)
        except (ProgramError, ValueError):
            continue
        if several and kind in MERGED and result_blocks(layer) < 2:
            continue
        if layer.vault_words[-1] <= params["vault_depth"] and \
                max(layer.vault_words[pe] for pe in range(pes)) <= params["pe_vault_depth"]:
            return dims
    raise AssertionError(f"no {kind} dimensions fit {params}")


def _layer(kind, dims, inputs, sr=False, bits=None, pad_rows=False, lut=None, programs=None):
    return {"kind": kind, "dims": dict(dims), "inputs": inputs, "sr": sr, "bits": bits, "pad_rows": pad_rows,
            "lut": lut, "programs": programs}


_FUNCTIONS = {
    "relu": lambda x: max(x, 0.0),
    "relu_grad": lambda x: float(x > 0),
    "tanh": math.tanh,
    "tanh_grad": lambda x: 1.0 - math.tanh(x) ** 2,
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
    "sigmoid_grad": lambda x: math.exp(-x) / (1.0 + math.exp(-x)) ** 2,
}


def lut_reference(params, function, values, bits):
    """Plain-Python f(x) (``function = "f"``) or f'(x) (``"df"``) of the system's LUTs on integer elements.

    The rule as ``hw/neurotrainer/docs/lut.md`` states it, written again from ``math``: breakpoints
    ``T[n] = sat16(round(f(x_n) 2**out_frac))`` at ``x_n = (n 2**G - 2**15) / 2**frac``, segment and
    position of ``x + 2**15``, ``T[i] + floor((T[i+1] - T[i]) j / 2**G)``; a 32-bit element is saturated
    to 16 bits first.
    """
    name = params["activation"] + ("_grad" if function == "df" else "")
    frac, out_frac, gap = params["lut_frac_bits"], params["lut_out_frac_bits"], 16 - params["lut_table_bits"]

    def breakpoint(n):
        x = (n * (1 << gap) - (1 << 15)) / (1 << frac)
        try:
            value = round(_FUNCTIONS[name](x) * (1 << out_frac))
        except OverflowError:
            value = 0
        return min(max(value, -(1 << 15)), (1 << 15) - 1)

    def one(x):
        if bits == 32:
            x = min(max(x, -(1 << 15)), (1 << 15) - 1)
        u = x + (1 << 15)
        i, j = u >> gap, u & ((1 << gap) - 1)
        low, high = breakpoint(i), breakpoint(i + 1)
        return low + ((high - low) * j >> gap)

    values = np.asarray(values, dtype=np.int64)
    return np.array([one(int(v)) for v in values.reshape(-1)], dtype=np.int64).reshape(values.shape)


def _lut_layers(params, generator):
    """Layers with an operand read through f(x) or f'(x): each LUT path (common and PE vaults, 16- and
    32-bit words, f and f') once, with numpy's result on :func:`lut_reference`'s operand."""
    pes, lanes, frac = params["pes"], params["lanes"], params["frac_bits"]
    draw = generator.integers
    layers = []
    # FC FF (16-bit), x broadcast from the common vault through f: y = W f(x).
    h, k, n = 2 * pes + 1, 9, 2 * lanes + 1
    w, x = draw(-3, 4, (h, k)), draw(-2000, 2000, (k, n))
    layers.append((_layer("fc_ff", dict(h=h, k=k, n=n), {"w": w, "x": x}, lut={"x": "f"}),
                   (w @ lut_reference(params, "f", x, 16)).tolist()))
    # Conv FF (16-bit), x from the PE vaults through f.
    dims = dict(n=2 * lanes * pes - 1, d=2, h=4, w=4, o=2, hk=3, wk=3)
    x, kernel = draw(-2000, 2000, (dims["n"], 2, 4, 4)), draw(-3, 4, (2, 2, 3, 3))
    layers.append((_layer("conv_ff", dims, {"x": x, "w": kernel}, lut={"x": "f"}),
                   _conv(lut_reference(params, "f", x, 16), kernel).tolist()))
    # FC UP (32-bit), x broadcast through f, beyond 16 bits too (saturated before the table): dW = dY f(x)^T.
    h, k, n = 2 * pes, lanes + 1, 5
    dy, x = draw(-20, 20, (h, n)), draw(-60000, 60000, (k, n))
    layers.append((_layer("fc_up", dict(h=h, k=k, n=n), {"dy": dy << frac, "x": x}, lut={"x": "f"}),
                   (dy @ lut_reference(params, "f", x, 32).T).tolist()))
    # FC BP (32-bit), dy broadcast through f': dX = W^T f'(dy).
    h, k, n = 6, 2 * pes, lanes
    w, dy = draw(-20, 20, (h, k)), draw(-60000, 60000, (h, n))
    layers.append((_layer("fc_bp", dict(h=h, k=k, n=n), {"w": w << frac, "dy": dy}, lut={"dy": "df"}),
                   (w.T @ lut_reference(params, "df", dy, 32)).tolist()))
    # Conv UP (32-bit), x from the PE vaults through f'.
    dims = dict(n=1, d=2 * pes, h=4, w=4, o=lanes, hk=2, wk=2)
    x, dy = draw(-3000, 3000, (1, 2 * pes, 4, 4)), draw(-20, 20, (1, lanes, 3, 3))
    fx = lut_reference(params, "df", x, 32)
    reference = np.einsum("ndyxab,noyx->odab", _strided_windows(fx, 2, 2, 1, 0), dy)
    layers.append((_layer("conv_up", dims, {"x": x, "dy": dy << frac}, lut={"x": "df"}), reference.tolist()))
    # Max pooling of f(x) (32-bit words from the PE vaults), every second row a pad read: pads stay 0, not f(0).
    dims = dict(n=2 * lanes, c=2, h=4, w=4, r=2)
    x = draw(-3000, 3000, (2 * lanes, 2, 4, 4))
    layers.append((_layer("maxpool", dims, {"x": x}, pad_rows=True, lut={"x": "f"}),
                   pooled(lut_reference(params, "f", x, 32), 2, pad_rows=True)))
    # The activation's backward step on the system: dz = f'(z) * dx, z read through f' and dx as it is, in
    # pairs of rows from one stream, multiplied lane by lane by product passes (several passes per PE).
    h, n = 4 * pes + 1, 2 * lanes + 1
    z, dx = draw(-3000, 3000, (h, n)), draw(-60, 60, (h, n))
    layers.append((_layer("act_bp", dict(h=h, n=n), {"z": z, "dx": dx << frac}),
                   (lut_reference(params, "df", z, 32) * dx).tolist()))
    return layers


def _integer_layer(params, generator, kind, dims=None, values=None, several=False, pad_rows=False):
    """A layer of integer inputs with its numpy output."""
    dims = dims or random_dims(kind, generator, params, several)
    tiled = bool(compile_for_system(kind, dims, **params).copy_jobs)
    inputs, reference = make_inputs(kind, dims, generator, params["frac_bits"], values, tiled)
    output = pooled(reference, dims["r"], pad_rows) if kind == "maxpool" else reference.tolist()
    return _layer(kind, dims, inputs, pad_rows=pad_rows), output


def _scenario(params, name, layers_and_outputs, handshake=None):
    layers = [layer for layer, _ in layers_and_outputs]
    expected = {"output": [output for _, output in layers_and_outputs]}
    for layer in layers:
        vaults = executor.execute(compile_layer(params, layer), layer["inputs"])["vaults"]
        for vault, words in vaults.items():
            expected.setdefault(f"vault {vault + 1}", []).append((np.asarray(words, dtype=np.int64)
                                                                  & 0xFFFFFFFF).tolist())
    return Scenario(name, {"layers": layers}, expected, **(handshake or {}))


def _handshake(rng, params, valid, ready):
    vaults, pes = params["pes"] + 1, params["pes"]
    sources = [f"{kind}__{v}" for kind in ("i_host", "i_read_program", "i_write_program") for v in range(vaults)]
    sources += [f"i_pe_program__{pe}" for pe in range(pes)]
    return {"valid": {port: random_pattern(rng, valid) for port in sources},
            "ready": {f"o_host_data__{v}": random_pattern(rng, ready) for v in range(vaults)}}


def sr_inputs(params, generator, layer):
    """Fractional inputs of an SR layer: Q.F values up to 16; ``act_bp``'s ``z`` up to 2 in the LUTs' input format
    (where the derivatives are not 0: beyond, f'(z) of the sigmoid and tanh is 0, and so would be every product)."""
    frac = params["frac_bits"]
    limit = {"z": 1 << (params["lut_frac_bits"] + 1)}
    return {name: generator.integers(-limit.get(name, 1 << (frac + 4)), limit.get(name, 1 << (frac + 4)),
                                     size=layer.tensors[name][0]) for name in layer.inputs}


def _sr_layer(params, generator, kind, dims):
    """An SR-LO 32-bit layer with the executor's output (it must differ from truncation, or SR is not seen)."""
    layer = compile_for_system(kind, dims, sr=True, bits=32, **params)
    inputs = sr_inputs(params, generator, layer)
    output = executor.execute(layer, inputs)["output"]
    truncated = executor.execute(compile_for_system(kind, dims, sr=False, bits=32, **params), inputs)["output"]
    assert not np.array_equal(output, truncated), f"SR-LO {kind}: the SR result equals truncation"
    return _layer(kind, dims, inputs, sr=True, bits=32), output.tolist()


def sr_dims(params):
    """The SR-LO layers (kind, dims) of the table and of the carried-state test."""
    pes, lanes = params["pes"], params["lanes"]
    return (("fc_ff", dict(h=pes, k=20, n=lanes)), ("conv_up", dict(n=2, d=2 * pes, h=4, w=4, o=lanes, hk=2, wk=2)),
            ("fc_up", dict(h=4, k=4, n=3)), ("act_bp", dict(h=4 * pes + 1, n=2 * lanes + 1)))


#: Scaled-down layers of every kind that take the tiled lowering (conv: im2col gather run by the host,
#: the FC FF matmul on the system) or several reduction / output blocks (FC).
TILED_LAYERS = (
    ("conv_ff", dict(n=1, d=4, h=5, w=5, o=6, hk=3, wk=3, s=4, p=1)),
    ("conv_bp", dict(n=1, d=2, h=5, w=5, o=3, hk=2, wk=2, s=4, p=1)),
    ("conv_up", dict(n=1, d=2, h=5, w=5, o=3, hk=3, wk=3, s=4, p=1)),
    ("fc_ff", dict(h=3, k=50, n=3)),
    ("fc_bp", dict(h=50, k=3, n=2)),
    ("fc_up", dict(h=9, k=5, n=3)),
)


def tiled_dims(params):
    """The :data:`TILED_LAYERS` that fit the system's vaults (all of them with the default parameters)."""
    fitting = []
    for kind, dims in TILED_LAYERS:
        layer = compile_for_system(kind, dims, **params)
        if layer.vault_words[-1] <= params["vault_depth"] and \
                max(layer.vault_words[pe] for pe in range(params["pes"])) <= params["pe_vault_depth"]:
            fitting.append((kind, dims))
    return fitting


#: The name of the scenario of hand-written PMAG programs (``tb_nt_system.handwritten_programs`` plays it alone).
HANDWRITTEN = "hand-written PMAG programs: address bits above the vaults' up to 29, a pad window behind another " \
              "program, every select code of every PE vault PMAG, then the common vault's p/q sums, select codes " \
              "and merged writes, with backpressure"


def scenarios(params, seed):
    pes, lanes = params["pes"], params["lanes"]
    table = []
    rng = rng_for(seed, "nt_system", "every kind")
    generator = np.random.default_rng(rng.randrange(1 << 32))
    table.append(_scenario(params, "every kind back to back with backpressure, several result blocks per PE",
                           [_integer_layer(params, generator, kind, several=True) for kind in KINDS],
                           _handshake(rng, params, 0.6, 0.5)))
    rng = rng_for(seed, "nt_system", "corners")
    generator = np.random.default_rng(rng.randrange(1 << 32))
    table.append(_scenario(params, "corners at full rate", [
        # FC FF/BP whose reduction spans two BUF2 blocks (accumulate passes), one result block per PE.
        _integer_layer(params, generator, "fc_ff", dict(h=pes, k=40, n=2 * lanes)),
        _integer_layer(params, generator, "fc_bp", dict(h=40, k=pes, n=lanes)),
        _integer_layer(params, generator, "conv_ff", dict(n=3, d=2, h=3, w=4, o=2, hk=2, wk=3), values=0),
        # 16-bit extremes: 18 products of -128 * -128 = 294912 would overflow; 2 products of 127 * 127 do not.
        _integer_layer(params, generator, "conv_ff", dict(n=4, d=1, h=2, w=3, o=1, hk=1, wk=2), values=127),
        # 16-bit packing corners: a kernel block of 27 elements (14 words, the last high half dropped by the
        # BUF1 packer) and an FC FF of odd reduction, outputs and samples (the reduction padded to an even block).
        _integer_layer(params, generator, "conv_ff", dict(n=2 * lanes * pes - 1, d=1, h=4, w=4, o=3, hk=3, wk=3)),
        _integer_layer(params, generator, "fc_ff", dict(h=2 * pes + 1, k=7, n=2 * lanes + 1)),
        _integer_layer(params, generator, "maxpool", dict(n=lanes, c=1, h=4, w=2, r=2), values=5),
        _integer_layer(params, generator, "maxpool", dict(n=2, c=1, h=2, w=2, r=2), values=-32768),
        _integer_layer(params, generator, "conv_bp", dict(n=2, d=2, h=3, w=3, o=3, hk=3, wk=3)),
        # FC UP whose samples span two BUF2 blocks: the second pass starts from its partial sums.
        _integer_layer(params, generator, "fc_up", dict(h=2 * pes, k=lanes, n=40)),
        # Read pad requests: every second image row of the windows arrives as zeros.
        _integer_layer(params, generator, "maxpool", dict(n=2 * lanes, c=2, h=4, w=4, r=2), pad_rows=True),
        # Max-pooling backward: all ties (argmax 0 everywhere), then 3 x 3 windows of an odd number of samples.
        _integer_layer(params, generator, "maxpool_bp", dict(n=lanes, c=1, h=4, w=2, r=2), values=5),
        _integer_layer(params, generator, "maxpool_bp", dict(n=lanes * pes + 1, c=1, h=3, w=6, r=3)),
    ]))
    rng = rng_for(seed, "nt_system", "lut")
    generator = np.random.default_rng(rng.randrange(1 << 32))
    table.append(_scenario(params, "activation LUTs on the read path: f(x) and f'(x), common and PE vaults, "
                                   "16- and 32-bit words, with backpressure", _lut_layers(params, generator),
                           _handshake(rng, params, 0.7, 0.6)))
    rng = rng_for(seed, "nt_system", "several blocks")
    generator = np.random.default_rng(rng.randrange(1 << 32))
    table.append(_scenario(params, "several result blocks per PE merged in turn, with backpressure", [
        _integer_layer(params, generator, "fc_ff", dict(h=4 * pes, k=24, n=2 * lanes + 1)),
        _integer_layer(params, generator, "fc_bp", dict(h=40, k=3 * pes, n=2 * lanes)),
        _integer_layer(params, generator, "conv_up", dict(n=1, d=2 * pes, h=3, w=3, o=2 * lanes, hk=2, wk=2)),
    ], _handshake(rng, params, 0.5, 0.5)))
    rng = rng_for(seed, "nt_system", "tiled")
    generator = np.random.default_rng(rng.randrange(1 << 32))
    tiled = [_integer_layer(params, generator, kind, dims) for kind, dims in tiled_dims(params)]
    if tiled:
        table.append(_scenario(params, "tiled layers: stride 4 with padding, input- and output-channel tiles, "
                                       "with backpressure", tiled, _handshake(rng, params, 0.6, 0.6)))
    rng = rng_for(seed, "nt_system", "hand-written")
    generator = np.random.default_rng(rng.randrange(1 << 32))
    layers = [layer for layer in (handwritten_layer(params, generator), select_layer(params, generator),
                                  common_vault_layer(params, generator)) if layer]
    if layers:
        outputs = [executor.execute(compile_layer(params, layer), layer["inputs"])["output"].tolist()
                   for layer in layers]
        table.append(_scenario(params, HANDWRITTEN, list(zip(layers, outputs)), _handshake(rng, params, 0.7, 0.6)))
    if params["rounding"] == "sr_lo" and params["frac_bits"] > 0:
        for kind, dims in sr_dims(params):
            rng = rng_for(seed, "nt_system", "sr", kind)
            generator = np.random.default_rng(rng.randrange(1 << 32))
            table.append(_scenario(params, f"SR-LO {kind} from reset with backpressure",
                                   [_sr_layer(params, generator, kind, dims)], _handshake(rng, params, 0.7, 0.6)))
    return table


def golden(params, scenario):
    layers = scenario.stimulus["layers"]
    compiled = [compile_layer(params, layer) for layer in layers]
    outcome = run_layers(compiled, [layer["inputs"] for layer in layers],
                         [system_config(layer, one) for layer, one in zip(layers, compiled)], **params)
    items = {"output": [output_item(layer, result["output"]) for layer, result in zip(layers, outcome)]}
    for result in outcome:
        for vault, words in result["final"].items():
            items.setdefault(f"vault {vault}", []).append((np.asarray(words, dtype=np.int64) & 0xFFFFFFFF).tolist())
    return Transactions(items)


def timed_dims(params):
    """Small layers of every kind whose RTL cycle count ``tb_nt_system.model_cycles`` compares with the module model
    (``sim/neurotrainer/program_time.py``): ``(kind, dims)``, those that fit the system's vaults."""
    pes, lanes = params["pes"], params["lanes"]
    candidates = [
        ("conv_ff", dict(n=2 * lanes * pes, d=2, h=4, w=4, o=3, hk=3, wk=3)),
        ("conv_bp", dict(n=lanes * pes, d=2, h=5, w=5, o=2, hk=2, wk=2)),
        ("conv_up", dict(n=1, d=2 * pes, h=4, w=4, o=2 * lanes, hk=3, wk=3)),
        ("fc_ff", dict(h=8 * pes, k=24, n=4 * lanes)),
        ("fc_ff", dict(h=2 * pes, k=48, n=2 * lanes)),
        ("fc_bp", dict(h=24, k=4 * pes, n=2 * lanes)),
        ("fc_bp", dict(h=40, k=pes, n=lanes)),
        ("fc_up", dict(h=4 * pes, k=3 * lanes, n=4)),
        ("fc_up", dict(h=2 * pes, k=lanes, n=16)),
        ("fc_up", dict(h=16 * pes, k=lanes, n=8)),
        ("fc_up", dict(h=2 * pes, k=lanes, n=40)),
        ("maxpool", dict(n=2 * lanes * pes, c=2, h=4, w=4, r=2)),
        ("maxpool_bp", dict(n=2 * lanes * pes, c=2, h=4, w=4, r=2)),
        ("act_bp", dict(h=8 * pes, n=4 * lanes)),
        ("conv_ff", dict(n=2, d=1, h=5, w=5, o=2, hk=3, wk=3, s=2, p=1)),
    ]
    fitting = []
    for kind, dims in candidates:
        try:
            layer = compile_for_system(kind, dims, **params)
            layer_config(layer)
        except (ProgramError, ValueError):
            continue
        if layer.vault_words[-1] <= params["vault_depth"] and \
                max(layer.vault_words[pe] for pe in range(params["pes"])) <= params["pe_vault_depth"]:
            fitting.append((kind, dims))
    return fitting


def sequenced_programs(params, seed):
    """Multi-layer programs the iBuffer / layer sequencer runs without the host (``tb_nt_system.sequenced_program``).

    Each: ``name``, ``layers`` (chained, ``sim/neurotrainer/layer_chain.py``), ``links``, ``tensors`` (what the host
    loads, per layer), ``outputs`` (per layer the expected output tensor: numpy for the integer program, the
    reference executor's first layer and the golden model's carried run for SR-LO; ``None``: the golden model's)
    and ``sr`` (compare the vaults with the golden model's run, with the SR-LO state carried).
    """
    from trainforge.sim.neurotrainer.layer_chain import chain, host_images, run_program

    pes, lanes = params["pes"], params["lanes"]
    programs = []
    rng = rng_for(seed, "nt_system", "sequenced", "fc ff 16")
    generator = np.random.default_rng(rng.randrange(1 << 32))
    n = 2 * lanes - 1                                    # two samples per 16-bit lane word, one padding column
    hidden, inputs, outputs = 4 * pes, 6, 2 * pes + 1
    first = compile_for_system("fc_ff", dict(h=hidden, k=inputs, n=n), **params)
    second = compile_for_system("fc_ff", dict(h=outputs, k=hidden, n=n), **params)
    layers = chain([first, second], ["x"])
    w1 = generator.integers(-5, 6, size=(hidden, inputs))
    x = generator.integers(-5, 6, size=(inputs, n))
    w2 = generator.integers(-5, 6, size=(outputs, hidden))
    tensors = [{"w": w1, "x": x}, {"w": w2}]
    programs.append({"name": "FC FF -> FC FF (16-bit), y = W2 (W1 x)", "layers": layers, "links": ["x"],
                     "tensors": tensors, "outputs": [w1 @ x, w2 @ (w1 @ x)], "sr": False,
                     "images": host_images(layers, ["x"], tensors, **params)})
    rng = rng_for(seed, "nt_system", "sequenced", "hand-written")
    layer = handwritten_layer(params, np.random.default_rng(rng.randrange(1 << 32)))
    if layer is not None:
        layers, tensors = [compile_layer(params, layer)], [layer["inputs"]]
        images = host_images(layers, [], tensors, **params)
        programs.append({"name": "hand-written PMAG programs (32-bit conv FF), PE 1's pad-window read program queued "
                                 "behind its first, each PE's write programs behind a busy write PMAG",
                         "layers": layers, "links": [], "tensors": tensors,
                         "outputs": [run_program(layers, images, **params)[0]["output"]], "sr": False,
                         "images": images})
    if params["rounding"] == "sr_lo" and params["frac_bits"] > 0:
        rng = rng_for(seed, "nt_system", "sequenced", "sr")
        generator = np.random.default_rng(rng.randrange(1 << 32))
        first = compile_for_system("fc_ff", dict(h=2 * pes, k=12, n=lanes), sr=True, bits=32, **params)
        second = compile_for_system("fc_ff", dict(h=pes + 1, k=2 * pes, n=lanes), sr=True, bits=32, **params)
        layers = chain([first, second], ["x"])
        tensors = [sr_inputs(params, generator, first), {"w": sr_inputs(params, generator, second)["w"]}]
        images = host_images(layers, ["x"], tensors, **params)
        carried = run_program(layers, images, **params)
        reset_first = executor.execute(first, tensors[0])["output"]
        fresh = executor.execute(second, {"w": tensors[1]["w"], "x": carried[0]["output"]})["output"]
        assert not np.array_equal(fresh, carried[1]["output"]), \
            "SR-LO program: the carried LFSR state makes no difference, the test would not see it"
        programs.append({"name": "SR-LO FC FF -> FC FF (32-bit), the LFSR carried", "layers": layers, "links": ["x"],
                         "tensors": tensors, "outputs": [reset_first, carried[1]["output"]], "sr": True,
                         "images": images})
    return programs


def sgd_problem(params, seed, samples=None):
    """A small MLP (6 inputs, ``2 pes`` hidden, 3 outputs, ``samples`` samples, default ``lanes + 1``) for one SGD
    step on the system: Q``F`` weights, inputs and targets, and the shifts (``tb_nt_system.sgd_step_mlp`` and
    ``sequenced_sgd_step_mlp``, ``verif/test_nt_sgd_step.py``). The sequenced step takes
    :func:`sequenced_samples`."""
    frac = params["frac_bits"]
    generator = np.random.default_rng(rng_for(seed, "nt_system", "sgd").randrange(1 << 32))
    inputs, hidden, outputs = 6, 2 * params["pes"], 3
    samples = params["lanes"] + 1 if samples is None else samples
    one = 1 << frac
    return {"w1": generator.integers(-one, one, size=(hidden, inputs)),
            "w2": generator.integers(-one, one, size=(outputs, hidden)),
            "x": generator.integers(-one, one, size=(inputs, samples)),
            "target": generator.integers(-one, one, size=(outputs, samples)),
            "grad_shift": 0, "lr_shift": 3}


def sequenced_samples(params):
    """Samples of the sequenced SGD step: whole lane groups (its chained placements need them), at least two and
    at least the 3 outputs (``bp2``'s ``W2^T`` rows must fit beside ``z1``'s in the PE vaults: ``step_program``)."""
    lanes = params["lanes"]
    return lanes * max(2, -(-3 // lanes))


def cnn_problem(params, seed):
    """A small CNN for one SGD step on the system (``tb_nt_system.sequenced_sgd_step_cnn``,
    ``verif/test_nt_cnn_step.py``): ``lanes x pes`` 5 x 5 one-channel images, one 2 x 2 kernel, 2 x 2 max pooling,
    3 classes; Q``F`` values uniform in [-1, 1), and the shifts."""
    generator = np.random.default_rng(rng_for(seed, "nt_system", "cnn").randrange(1 << 32))
    one = 1 << params["frac_bits"]
    samples = params["lanes"] * params["pes"]
    return {"x": generator.integers(-one, one, size=(samples, 1, 5, 5)),
            "wc": generator.integers(-one, one, size=(1, 1, 2, 2)),
            "w": generator.integers(-one, one, size=(3, 4)),
            "target": generator.integers(-one, one, size=(3, samples)),
            "grad_shift": 0, "lr_shift": 3}
