"""The fast random regression of ``nt_sequencer``: its scenario table packed for :mod:`trainforge.sequencer_bench`.

The sequencer's table (``verif/scenarios/nt_sequencer.py``) is played as the
cocotb path plays it (``verif/tb_nt_sequencer.py``): same passes, same scenario
seeds, same resets mid-stream (:mod:`regression_common`). Per scenario, Python
writes the stimulus (the loads, the runs, the system's idle delay, the
``valid`` and ``ready`` patterns) and the expectations from the table's
reference (``scenario.expected``, independent of the golden model): each
queue's words as ``{run, layer, word}`` and the layers' configs as
``{run, layer, config}``, in run and layer order. The testbench also checks,
in every cycle a word is taken, the rules of :data:`trainforge.sequencer_bench.RULES`.
"""
from trainforge import sequencer_bench
from trainforge.spec.neurotrainer import sequencer as spec

from regression_common import add_to_batch, handshake_fields, reset_after
import scenarios.nt_sequencer as table

__all__ = ["plan_batches", "timeout_cycles"]


def timeout_cycles(scenario):
    """Cycles a scenario may take before it counts as a timeout: the sum of ``tb_nt_sequencer.play``'s limits (the
    loads, the runs, the end of the last run)."""
    stimulus = scenario.stimulus
    loads, runs, delay = len(stimulus["i_load"]), stimulus["i_start"], stimulus["system_idle_delay"]
    words = sum(len(items) for port, items in scenario.expected.items() if port != "o_config")
    limit = 20 * words + (delay + 20) * (sum(runs) + len(runs)) + 200
    return 4 * loads + 100 + 2 * limit


def _keyed(run, layer, bits, payload):
    """An expectation entry ``{run, layer, payload}`` (``payload`` ``bits`` wide)."""
    key = sequencer_bench.KEY_BITS
    return ((run << key | layer) << bits) | payload


def plan_batches(params, bench, seed, target, replay=None, alter_expected=None, passes=None, packer=None):
    """Batches of the sequencer's table passes until ``target`` transactions are planned; yields ``(plan, headers,
    stimulus, expected)``.

    As :func:`fast_regression.plan_batches`, with the sequencer's files (:mod:`trainforge.sequencer_bench`).
    ``passes`` is :func:`fast_regression._passes` and ``packer`` :func:`fast_regression.packer` (passed in to keep
    one copy). ``alter_expected(stream, entries)`` sees the packed entries of each expectation stream.
    """
    pes = params["pes"]
    pack_load = packer(spec.load_layout(params))
    pack_config = packer(spec.config_layout())
    config_bits = spec.config_layout().size
    names = sequencer_bench.checked_streams(pes)
    queues = table.port_names(params)
    widths = [port.width for port in bench.outputs]
    header = bench.header
    planned = 0

    def empty():
        return [], [], [[], []], [[] for _ in names]

    plan, headers, stimulus, expected = empty()
    for pass_seed, iteration, index, scenario in passes(table, params, seed, replay):
        if replay is None and planned >= target:
            break
        ins = [[pack_load(load) for load in scenario.stimulus["i_load"]], list(scenario.stimulus["i_start"])]
        outs = [[_keyed(run, layer, width, word) for run, layer, word in scenario.expected[port]]
                for port, width in zip(queues, widths)]
        outs.append([_keyed(run, layer, config_bits, pack_config(config))
                     for run, configs in enumerate(scenario.expected["o_config"])
                     for layer, config in enumerate(configs)])
        if alter_expected is not None:
            outs = [alter_expected(name, entries) for name, entries in zip(names, outs)]
        if (len(headers) == bench.scenarios or any(len(a) + len(b) > bench.depth for a, b in zip(stimulus, ins))
                or any(len(a) + len(b) > bench.depth for a, b in zip(expected, outs))):
            yield plan, headers, stimulus, expected
            plan, headers, stimulus, expected = empty()
        fields = {"reset_after": reset_after(scenario, pass_seed, index), "timeout": timeout_cycles(scenario),
                  "delay": scenario.stimulus["system_idle_delay"]}
        fields.update(handshake_fields(scenario, ("i_load", "i_start"), ins, queues))
        fields.update({f"exp{k}_count": len(entries) for k, entries in enumerate(outs)})
        headers.append(header.pack(**fields))
        add_to_batch(plan, stimulus, expected, {"scenario_seed": pass_seed, "pass": iteration, "index": index,
                                                "scenario": scenario.name, "reset_after": fields["reset_after"]},
                     ins, outs)
        planned += sum(map(len, ins)) + sum(map(len, outs[:-1]))
    if headers:
        yield plan, headers, stimulus, expected
