"""Scenario table of ``nt_pmag``: directed programs (paper routings, windows, END-MARKs, wrap-around) and random ones.

Reference (independent of the golden model): the PMAG rule (Fig. 4, Tables 2-3) as plain
Python loops: seven nested counters ``r1`` (outermost) .. ``r7``, ``r_i`` in ``0 .. max[i]``;
sources 0 = zero, 1..7 = ``r1..r7``, 8 = ``const``, 9 = ``p``, 10 = ``q``, other codes zero
(``s, t, u, v`` read zero for 9 and 10 too); ``p = s + t``, ``q = u + v`` kept to
``counter_bits + 1`` bits; ``address = base + a*stride[0] + b*stride[1] + c*stride[2] +
d*stride[3] (mod 2**32)``; ``h_lo <= h < h_hi`` and ``k_lo <= k < k_hi`` is inside;
``window`` 1 skips the steps outside, 2 issues them with ``pad = 1``, 0 and 3 do not use the
window; last, the END-MARK (``0xFFFF`` or ``0xFFFFFFFF`` by ``wide``, ``end = 1``).
Without backpressure the step ``i`` of a program accepted in cycle 0 leaves in cycle
``LATENCY + i`` (the END-MARK is the step after the last counter value).
"""
import itertools

import numpy as np

from trainforge.golden.neurotrainer.pmag import default_program, nt_pmag, random_program
from trainforge.spec.neurotrainer.pmag import LATENCY, SOURCE_NAMES as S, WINDOW_MODES

from scenario import Scenario, Transactions, random_pattern, rng_for

_MASK32 = (1 << 32) - 1


def _walk(params, program):
    """Every counter step of one program, in order: ``(address, h, k)``."""
    bits = params["counter_bits"]
    wide_mask = (1 << (bits + 1)) - 1
    const = program["const"] & ((1 << bits) - 1)
    for counters in itertools.product(*(range(limit + 1) for limit in program["max"])):
        def first(code):
            return counters[code - 1] if 1 <= code <= 7 else const if code == 8 else 0
        p = (first(program["s"]) + first(program["t"])) & wide_mask
        q = (first(program["u"]) + first(program["v"])) & wide_mask

        def source(code):
            return p if code == 9 else q if code == 10 else first(code)
        address = program["base"]
        for name, stride in zip("abcd", program["stride"]):
            address += source(program[name]) * stride
        yield address & _MASK32, source(program["h"]), source(program["k"])


def _requests(params, program):
    """``(requests, steps)``: the request items of one program and the number of counter steps."""
    requests, steps = [], 0
    for address, h, k in _walk(params, program):
        inside = program["window"] in (0, 3) or (program["h_lo"] <= h < program["h_hi"]
                                                 and program["k_lo"] <= k < program["k_hi"])
        steps += 1
        if inside or program["window"] == 2:
            requests.append({"address": address, "write": program["write"], "pad": int(not inside), "end": 0})
    requests.append({"address": _MASK32 if program["wide"] else 0xFFFF, "write": program["write"], "pad": 0,
                     "end": 1})
    return requests, steps


def _windowed_programs(params, rng, count):
    """Programs whose window bounds sit among the ``h`` and ``k`` values they walk, so that any wrong bit of a
    walked ``h`` or ``k`` (from any source: counters, a full-width ``const``, the sums ``p`` and ``q``) moves
    some step across a bound. Window mode pad (every step shows ``pad``) and skip, alternately."""
    bits = params["counter_bits"]
    limit = (1 << bits) - 1
    programs = []
    while len(programs) < count:
        maxima = [0] * 7
        for level in rng.sample(range(7), 3):
            maxima[level] = rng.randint(1, 2)
        program = _program(max=maxima, **{name: rng.randint(1, 8) for name in "stuv"},
                           h=rng.randint(1, 10), k=rng.randint(1, 10), const=rng.randint(0, limit),
                           base=rng.randrange(1 << 32), stride=[rng.randrange(64) for _ in range(4)],
                           window=WINDOW_MODES["pad"] if len(programs) % 2 == 0 else WINDOW_MODES["skip"],
                           write=rng.randint(0, 1), wide=rng.randint(0, 1))
        walked = list(_walk(params, program))
        hs, ks = sorted({h for _, h, _ in walked}), sorted({k for _, _, k in walked})
        if len(hs) < 2 or len(ks) < 2:
            continue
        program["h_lo"], program["h_hi"] = hs[1], hs[-1]   # the smallest and the largest fall outside
        program["k_lo"], program["k_hi"] = ks[1], ks[-1] + 1
        programs.append(program)
    return programs


def reference(params, programs):
    return [request for program in programs for request in _requests(params, program)[0]]


def _program(**fields):
    program = default_program()
    program.update(fields)
    return program


def directed(params):
    bits = params["counter_bits"]
    no, ho, wo, ni, dk, hk, wk = 2, 2, 3, 2, 2, 2, 2
    conv_ff = _program(max=[no - 1, ho - 1, wo - 1, ni - 1, dk - 1, hk - 1, wk - 1],   # Table 2's Conv-FF routing
                       s=S["r2"], t=S["r6"], u=S["r3"], v=S["r7"], a=S["r4"], b=S["q"], c=S["p"], d=S["r5"],
                       base=0x1000, stride=[(ho + hk - 1) * (wo + wk - 1) * dk, (ho + hk - 1) * dk, dk, 1], wide=0)
    add_pad = _program(max=[1, 3, 3, 0, 0, 0, 0], s=S["r3"], t=S["const"], u=S["r2"], v=S["const"],  # Table 3
                       a=S["p"], b=S["q"], c=S["r1"], const=1, stride=[6, 1, 36, 0], h=S["r2"], k=S["r3"],
                       h_lo=1, h_hi=3, k_lo=1, k_hi=3, window=WINDOW_MODES["pad"], write=1)
    programs = [
        ("all-zero program, 16-bit END-MARK", _program(wide=0)),
        ("every level, wrap-around address", _program(max=[1] * 7, a=S["p"], b=S["q"], c=S["const"], d=S["r7"],
                                                        s=S["r1"], t=S["r2"], u=S["const"], v=S["r6"],
                                                        const=(1 << bits) - 1, base=_MASK32, stride=[_MASK32] * 4,
                                                        write=1)),
        ("every step skipped", _program(max=[0, 0, 0, 0, 0, 2, 2], h=S["r6"], k=S["r7"], h_lo=3, h_hi=2,
                                        window=WINDOW_MODES["skip"])),
        ("add pad", add_pad),
        ("remove pad", dict(add_pad, window=WINDOW_MODES["skip"], write=0)),
        ("convolution FF routing", conv_ff),
        # Each address select reads a sum, each sum reads two counters: a wrong multiplicity of any counter in
        # any select moves the address (strides 1, 3, 9, 27 keep the terms apart).
        ("p and q in every address select, sums of r1..r4", _program(
            max=[1, 1, 1, 1, 0, 0, 0], a=S["p"], b=S["q"], c=S["p"], d=S["q"], s=S["r1"], t=S["r2"], u=S["r3"],
            v=S["r4"], stride=[1, 3, 9, 27])),
        ("q and p in every address select, sums of r5..r7 and r1", _program(
            max=[1, 0, 0, 0, 1, 1, 1], a=S["q"], b=S["p"], c=S["q"], d=S["p"], s=S["r1"], t=S["r5"], u=S["r6"],
            v=S["r7"], stride=[1, 3, 9, 27])),
        # A select's count of a source through p or q is that source's count in s, t or in u, v, not the other
        # pair's: const enters a and d through p (s) and never b and c through q (strides 1, 3, 9, 27 keep the
        # terms apart) ...
        ("const through p in a and d, not through q in b and c", _program(
            max=[0, 0, 0, 0, 1, 1, 1], a=S["p"], b=S["q"], c=S["q"], d=S["p"], s=S["const"], t=S["r7"],
            u=S["r6"], v=S["r5"], const=5, base=0x100, stride=[1, 3, 9, 27])),
        # ... and r5 enters k through q (u), not through p: k = r5 + r6 in [1, 3) marks the steps outside as pads.
        ("a pad window on k = q = r5 + r6, p reading r7 and const", _program(
            max=[0, 0, 0, 0, 2, 1, 1], a=S["r5"], b=S["r6"], c=S["r7"], s=S["r7"], t=S["const"], u=S["r5"],
            v=S["r6"], h=S["p"], k=S["q"], const=3, stride=[1, 3, 6, 0], h_lo=3, h_hi=5, k_lo=1, k_hi=3,
            window=WINDOW_MODES["pad"])),
    ]
    if bits <= 4:
        programs.append(("a counter through its whole range, p wraps",
                         _program(max=[(1 << bits) - 1, 0, 0, 0, 0, 0, 1], s=S["r1"], t=S["r1"], a=S["p"],
                                  stride=[1, 0, 0, 0])))
    return programs


def scenarios(params, seed):
    table = []
    for name, program in directed(params):
        requests, steps = _requests(params, program)
        timing = {"o_request": [LATENCY + step for step in range(steps + 1)]} if program["window"] in (0, 3) else {}
        table.append(Scenario(name, {"i_program": [program]}, {"o_request": requests}, timing=timing))
    # (The RTL runner allows about 40 cycles per program sent plus 600: scenarios of many programs stay short.)
    programs = [program for name, program in directed(params) if len(_requests(params, program)[0]) < 50]
    table.append(Scenario("short directed programs back to back, gaps and stalls", {"i_program": programs},
                          {"o_request": reference(params, programs)},
                          valid={"i_program": (1, 0, 0)}, ready={"o_request": (1, 1, 0)}))
    rng = rng_for(seed, "nt_pmag", "windowed")
    programs = _windowed_programs(params, rng, 8)
    table.append(Scenario("windows bounded by walked h and k values, pad and skip", {"i_program": programs},
                          {"o_request": reference(params, programs)}))
    rng = rng_for(seed, "nt_pmag", "random")
    generator = np.random.default_rng(rng.randrange(1 << 30))
    programs = [random_program(generator, params["counter_bits"], max_steps=24) for _ in range(10)]
    table.append(Scenario("random programs under gaps and stalls", {"i_program": programs},
                          {"o_request": reference(params, programs)},
                          valid={"i_program": random_pattern(rng, 0.6)}, ready={"o_request": random_pattern(rng, 0.6)}))
    return table


def golden(params, scenario):
    requests = []
    for program in scenario.stimulus["i_program"]:
        stream = nt_pmag(program, **params)
        requests += [{"address": int(address), "write": int(write), "pad": int(pad), "end": int(end)}
                     for address, write, pad, end in zip(stream["address"], stream["write"], stream["pad"],
                                                         stream["end"])]
    return Transactions({"o_request": requests})
