"""The fast random regression of ``nt_bus``: its scenario table packed for :mod:`trainforge.bus_bench`.

The bus's table (``verif/scenarios/nt_bus.py``) is played as the cocotb path
plays it (``verif/tb_nt_bus.py``): same passes, same scenario seeds, same
resets mid-stream (:mod:`regression_common`). Per scenario, Python writes the
stimulus (the common vault's words, each PE's merge words, the mask trace,
the REQ cycles, the broadcast start) and the expectations:

- payloads from the table's reference (``scenario.expected``): the words each
  PE receives, the words each PE sends (in a scenario without backpressure,
  the table's bus-order ``o_merge`` split by ``source``), and the grants;
- in a scenario without backpressure, the cycle of every output word from the
  **golden cycle model** (``table.golden``), as the cocotb testbench compares
  them; the grants' cycles are the table's.

The testbench checks the arbitration rules in every cycle
(:data:`trainforge.bus_bench.RULES`).
"""
from trainforge import bus_bench
from trainforge.spec.neurotrainer import bus as bus_spec

from regression_common import add_to_batch, handshake_fields, reset_after
import scenarios.nt_bus as table

__all__ = ["plan_batches", "timeout_cycles"]


def timeout_cycles(scenario, pes):
    """Cycles a scenario may take (``tb_nt_bus.drive``'s rule) before it counts as a timeout."""
    stimulus = scenario.stimulus
    words = len(stimulus["i_broadcast"]) + sum(len(stimulus[f"i_merge__{pe}"]) for pe in range(pes))
    return 40 * words + 40 * max(stimulus["merge_request"], default=0) + 400


#: The cycle written for an expected word the golden model did not produce (it can never match).
NO_CYCLE = (1 << 32) - 1


def _cycles(times, count):
    """``count`` expected cycles: ``times`` (the golden model's), cut or padded with :data:`NO_CYCLE`."""
    times = list(times)[:count]
    return times + [NO_CYCLE] * (count - len(times))


def _expectations(params, scenario, pack_word, pack_merged):
    """Per expectation stream (:func:`trainforge.bus_bench.checked_streams`): ``(cycle, payload bits)`` of each entry."""
    pes = params["pes"]
    expected = scenario.expected
    exact = not (scenario.valid or scenario.ready)
    streams = []
    if exact:
        predicted = table.golden(params, scenario)
        cycles = predicted.cycles
        sources = [word["source"] for word in predicted.items["o_merge"]]
    for pe in range(pes):
        port = f"o_broadcast__{pe}"
        words = expected[port]
        streams.append(list(zip(_cycles(cycles[port] if exact else (), len(words)), map(pack_word, words))))
    for pe in range(pes):
        if exact:
            words = [word for word in expected["o_merge"] if word["source"] == pe]
            times = [time for time, source in zip(cycles["o_merge"], sources) if source == pe]
        else:
            words = [{**word, "source": pe} for word in expected[f"o_merge from {pe}"]]
            times = ()
        streams.append(list(zip(_cycles(times, len(words)), map(pack_merged, words))))
    streams.append([(cycle, pe) for pe, cycle in expected["grants"]] if exact else [])
    return exact, streams


def plan_batches(params, bench, seed, target, replay=None, alter_expected=None, passes=None, packer=None):
    """Batches of the bus's table passes until ``target`` transactions are planned; yields ``(plan, headers, stimulus, expected)``.

    As :func:`fast_regression.plan_batches`, with the bus's files: ``stimulus`` lists the ``in<k>.hex`` payloads
    then the mask traces, ``expected`` the ``exp<k>.hex`` entries (``cycle << width | payload``). ``passes`` is
    :func:`fast_regression._passes` and ``packer`` :func:`fast_regression.packer` (passed in to keep one copy).
    """
    pes, width = params["pes"], params["width"]
    pack_word = packer(bus_spec.word_layout(params))
    pack_merged = packer(bus_spec.merge_layout(params))
    widths = ([width + 1] * pes + [bus_spec.merge_layout(params).size] * pes + [bus_bench.GRANT_BITS])
    names = bus_bench.checked_streams(pes)
    header = bench.header
    inputs = ["i_broadcast", *(f"i_merge__{pe}" for pe in range(pes))]
    outputs = ["o_merge", *(f"o_broadcast__{pe}" for pe in range(pes))]
    planned = 0

    def empty():
        return [], [], [[] for _ in range(len(inputs) + 1)], [[] for _ in names]

    plan, headers, stimulus, expected = empty()
    for pass_seed, iteration, index, scenario in passes(table, params, seed, replay):
        if replay is None and planned >= target:
            break
        ins = [[pack_word(word) for word in scenario.stimulus[port]] for port in inputs]
        ins.append(list(scenario.stimulus["broadcast_mask"]))
        exact, streams = _expectations(params, scenario, pack_word, pack_merged)
        outs = [[time << bits | payload for time, payload in stream] for stream, bits in zip(streams, widths)]
        if alter_expected is not None:
            outs = [alter_expected(name, payloads) for name, payloads in zip(names, outs)]
        if (len(headers) == bench.scenarios or any(len(a) + len(b) > bench.depth for a, b in zip(stimulus, ins))
                or any(len(a) + len(b) > bench.depth for a, b in zip(expected, outs))):
            yield plan, headers, stimulus, expected
            plan, headers, stimulus, expected = empty()
        fields = {"reset_after": reset_after(scenario, pass_seed, index), "timeout": timeout_cycles(scenario, pes),
                  "exact": int(exact), "mask_count": len(ins[-1]),
                  "broadcast_start": scenario.stimulus["broadcast_start"][0]}
        fields.update({f"request{pe}": cycle for pe, cycle in enumerate(scenario.stimulus["merge_request"])})
        fields.update(handshake_fields(scenario, inputs, ins, outputs))
        fields.update({f"exp{k}_count": len(stream) for k, stream in enumerate(outs)})
        headers.append(header.pack(**fields))
        add_to_batch(plan, stimulus, expected, {"scenario_seed": pass_seed, "pass": iteration, "index": index,
                                                "scenario": scenario.name, "reset_after": fields["reset_after"]},
                     ins, outs)
        planned += sum(map(len, ins[:-1])) + sum(map(len, streams[:-1]))
    if headers:
        yield plan, headers, stimulus, expected
