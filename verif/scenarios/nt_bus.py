"""Scenario table of ``nt_bus``: broadcast with masks, merge bursts by REQ/grant, priority, END-MARKs, backpressure.

The bus is not a set of plain streams: besides its stream ports it has the ``merge_request``
(REQ) input, the ``broadcast_mask`` input and the ``merge_grant`` output, so its testbench
(``verif/tb_nt_bus.py``) drives the table itself. A scenario's ``stimulus`` holds

- ``i_broadcast``: the common vault's words (``{"data", "end"}``), offered from cycle
  ``broadcast_start`` on;
- ``i_merge__<pe>``: PE ``pe``'s merge words, offered from cycle 0 on;
- ``broadcast_start``: ``[cycle]``; ``broadcast_mask``: the mask port's value in cycle 0, 1, ...
  (the last value holds); ``merge_request``: per PE the cycle its REQ rises (held until its
  last word is accepted).

``expected`` holds ``o_broadcast__<pe>`` (the words delivered to each PE) and either, without
backpressure, ``o_merge`` (``{"data", "end", "source"}`` in bus order) and ``grants`` (``(pe,
first granted cycle)`` of every burst) with the cycles in ``timing``; or, with backpressure
(``valid``/``ready`` patterns, the mask constant), ``o_merge from <pe>``: the merged words of
each PE in order (the order of bursts between PEs then depends on the handshakes).

Reference (independent of the golden model, which walks whole bursts with numpy): a plain
cycle-by-cycle loop of the bus's rules (``hw/neurotrainer/docs/bus.md``):
broadcast word ``j`` is accepted in cycle ``broadcast_start + j`` and goes to the PEs in the
mask of that cycle; in a cycle without grant and without broadcast, the lowest-index PE whose
REQ is up is granted from the next cycle; the holder's words are accepted one per cycle
without broadcast; the grant drops in the cycle after an END-MARK. Every word leaves the bus
``LATENCY`` (4) cycles after its acceptance.
"""
from trainforge.golden.neurotrainer.bus import nt_bus

from scenario import Scenario, Transactions, random_pattern, rng_for

_LATENCY = 4   # Sec. 3.4: "4 stage pipelined BUS"


def _mask(trace, cycle):
    return trace[min(cycle, len(trace) - 1)]


def reference(params, stimulus):
    """Expected items, cycles and grants of a scenario without backpressure, cycle by cycle."""
    pes = params["pes"]
    broadcast = stimulus["i_broadcast"]
    start = stimulus["broadcast_start"][0]
    trace = stimulus["broadcast_mask"]
    merges = [stimulus[f"i_merge__{pe}"] for pe in range(pes)]
    request_cycle = stimulus["merge_request"]
    items = {f"o_broadcast__{pe}": [] for pe in range(pes)}
    cycles = {f"o_broadcast__{pe}": [] for pe in range(pes)}
    for index, word in enumerate(broadcast):
        cycle = start + index
        for pe in range(pes):
            if _mask(trace, cycle) >> pe & 1:
                items[f"o_broadcast__{pe}"].append(dict(word))
                cycles[f"o_broadcast__{pe}"].append(cycle + _LATENCY)
    items["o_merge"], cycles["o_merge"], grants = [], [], []
    taken = [0] * pes
    grant = None
    cycle = 0
    while any(taken[pe] < len(merges[pe]) for pe in range(pes)):
        broadcasting = start <= cycle < start + len(broadcast)
        if grant is not None:
            if taken[grant] == len(merges[grant]):
                break   # a last burst without END-MARK keeps the grant: nobody else is served
            if not broadcasting:
                word = merges[grant][taken[grant]]
                taken[grant] += 1
                items["o_merge"].append({**word, "source": grant})
                cycles["o_merge"].append(cycle + _LATENCY)
                if word["end"]:
                    grant = None
        else:
            requesting = [pe for pe in range(pes) if request_cycle[pe] <= cycle and taken[pe] < len(merges[pe])]
            if requesting and not broadcasting:
                grant = requesting[0]
                grants.append((grant, cycle + 1))
        cycle += 1
    return items, cycles, grants


def _words(rng, width, count, end_probability=0.1):
    return [{"data": rng.randrange(1 << width), "end": int(rng.random() < end_probability)} for _ in range(count)]


def _bursts(rng, width, count, length, marker_probability=0.1):
    """``count`` bursts of 1..length words, each closed by an END-MARK (all-ones data, end = 1).

    Some plain words carry the all-ones data too (end = 0): only the flag makes an END-MARK.
    """
    ones = (1 << width) - 1
    words = []
    for _ in range(count):
        size = rng.randint(1, length)
        data = [ones if rng.random() < marker_probability else rng.randrange(1 << width) for _ in range(size - 1)]
        words += [{"data": d, "end": 0} for d in data] + [{"data": ones, "end": 1}]
    return words


def _stimulus(pes, broadcast, start, trace, merges, request_cycle):
    stimulus = {"i_broadcast": broadcast, "broadcast_start": [start], "broadcast_mask": list(trace),
                "merge_request": list(request_cycle)}
    stimulus.update({f"i_merge__{pe}": merges[pe] for pe in range(pes)})
    return stimulus


def _random_stimulus(rng, pes, width, constant_mask=False):
    broadcast = _words(rng, width, 40)
    merges = [_bursts(rng, width, rng.randint(0, 3), 10) for _ in range(pes)]
    span = len(broadcast) + sum(map(len, merges)) + 20
    trace = [rng.randrange(1 << pes)] if constant_mask else [rng.randrange(1 << pes) for _ in range(span)]
    return _stimulus(pes, broadcast, rng.randrange(30), trace, merges, [rng.randrange(30) for _ in range(pes)])


def _exact(params, name, stimulus):
    items, cycles, grants = reference(params, stimulus)
    return Scenario(name, stimulus, {**items, "grants": grants}, timing=cycles)


def _with_backpressure(params, rng, name, stimulus, valid, ready):
    """The words of a scenario under random valid/ready patterns (the mask must be constant)."""
    assert len(stimulus["broadcast_mask"]) == 1, "with backpressure the mask must be constant"
    pes = params["pes"]
    items, _, _ = reference(params, stimulus)
    expected = {f"o_broadcast__{pe}": items[f"o_broadcast__{pe}"] for pe in range(pes)}
    expected.update({f"o_merge from {pe}": [dict(word) for word in stimulus[f"i_merge__{pe}"]] for pe in range(pes)})
    sources = ["i_broadcast", *(f"i_merge__{pe}" for pe in range(pes))]
    sinks = ["o_merge", *(f"o_broadcast__{pe}" for pe in range(pes))]
    return Scenario(name, stimulus, expected, valid={port: random_pattern(rng, valid) for port in sources},
                    ready={port: random_pattern(rng, ready) for port in sinks})


def _priority_merges(pes, ones):
    """PE 0: all-ones plain words (they must not release the grant); PE 1 two bursts; the last PE zeros."""
    merges = []
    for pe in range(pes):
        if pe == 0:
            merges.append([{"data": ones, "end": int(i == 5)} for i in range(6)])
        elif pe == 1:
            merges.append([{"data": i + 1, "end": int(i in (2, 6))} for i in range(7)])
        elif pe == pes - 1:
            merges.append([{"data": 0, "end": int(i == 3)} for i in range(4)])
        else:
            merges.append([{"data": pe, "end": int(i == 2)} for i in range(3)])
    return merges


def scenarios(params, seed):
    pes, width = params["pes"], params["width"]
    every, ones = (1 << pes) - 1, (1 << width) - 1
    table = []
    for session in range(3):
        rng = rng_for(seed, "nt_bus", "exact", session)
        table.append(_exact(params, f"random traffic without backpressure {session}",
                            _random_stimulus(rng, pes, width)))
    for session in range(3):
        rng = rng_for(seed, "nt_bus", "backpressure", session)
        table.append(_with_backpressure(params, rng, f"random traffic with backpressure {session}",
                                        _random_stimulus(rng, pes, width, constant_mask=True), 0.6, 0.6))
    rng = rng_for(seed, "nt_bus", "broadcast wins")
    together = _stimulus(pes, _words(rng, width, 11, 0) + [{"data": rng.randrange(1 << width), "end": 1}], 0,
                         [every], [_bursts(rng, width, 1, 5) for _ in range(pes)], [0] * pes)
    table.append(_exact(params, "broadcast and every REQ together: broadcast first, then PEs in index order",
                        together))
    table.append(_with_backpressure(params, rng, "broadcast and every REQ together with backpressure",
                                    together, 0.7, 0.5))
    priority = _stimulus(pes, [], 0, [0], _priority_merges(pes, ones), [0] * pes)
    table.append(_exact(params, "every PE requests together: lowest index first, END-MARK releases", priority))
    late = dict(priority, merge_request=[5] + [0] * (pes - 1))
    table.append(_exact(params, "PE 0 requests during another PE's burst", late))
    table.append(_with_backpressure(params, rng, "every PE requests together with backpressure", priority, 0.6, 0.4))
    corner_words = [{"data": value, "end": int(i in (5, 17))}
                    for i, value in enumerate([0] * 6 + [ones] * 6 + list(range(6)))]
    trace = [0] * 4 + [every] * 4 + [1 << (pes - 1)] * 4 + [every] * 30
    long_burst = [{"data": 100 + i, "end": int(i == 29)} for i in range(30)]
    corners = _stimulus(pes, corner_words, 10, trace, [long_burst] + [[]] * (pes - 1), [0] * pes)
    table.append(_exact(params, "zeros, ones, masks of no, one and every PE; broadcast inside a burst", corners))
    table.append(_with_backpressure(params, rng, "zeros, ones, one PE's mask, broadcast inside a burst, backpressure",
                                    dict(corners, broadcast_mask=[1 << (pes - 1)]), 0.5, 0.5))
    return table


def golden(params, scenario):
    stimulus, pes = scenario.stimulus, params["pes"]
    merges = [stimulus[f"i_merge__{pe}"] for pe in range(pes)]
    result = nt_bus([w["data"] for w in stimulus["i_broadcast"]], [w["end"] for w in stimulus["i_broadcast"]],
                    [[w["data"] for w in words] for words in merges], [[w["end"] for w in words] for words in merges],
                    broadcast_start=stimulus["broadcast_start"][0], broadcast_mask=stimulus["broadcast_mask"],
                    request_cycle=stimulus["merge_request"], **params)
    items, cycles = {}, {}
    for pe, delivered in enumerate(result["broadcast"]):
        items[f"o_broadcast__{pe}"] = [{"data": int(d), "end": int(e)} for d, e in zip(delivered["data"], delivered["end"])]
        cycles[f"o_broadcast__{pe}"] = [int(c) for c in delivered["cycles"]]
    merge = result["merge"]
    merged = [{"data": int(d), "end": int(e), "source": int(s)}
              for d, e, s in zip(merge["data"], merge["end"], merge["source"])]
    for pe in range(pes):
        items[f"o_merge from {pe}"] = [{"data": w["data"], "end": w["end"]} for w in merged if w["source"] == pe]
    if scenario.valid or scenario.ready:
        return Transactions(items)
    items["o_merge"] = merged
    items["grants"] = [(int(pe), int(cycle)) for pe, cycle in result["grant_cycles"]]
    cycles["o_merge"] = [int(c) for c in merge["cycles"]]
    return Transactions(items, cycles)
