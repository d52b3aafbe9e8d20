"""Scenario table of ``nt_sequencer`` (the iBuffer and layer sequencer).

A scenario is a program (per layer a ``config`` and every queue's words), loaded by the host
(``sim/neurotrainer/ibuffer_loads.py`` ``sequencer_loads``) and run by ``i_start`` one or more
times, with a system ``idle`` that falls whenever a program word is taken and rises
``system_idle_delay`` cycles after the last one (the testbench's model of the system; the
stimulus key ``system_idle_delay`` is not a port).

Reference (independent of the golden model, which replays the loads): each queue issues the
program's words for it, layer after layer, in order, each run from the first layer; the
words of a layer are taken while ``o_config`` is that layer's config. Output items are
``(run, layer, word)``.
"""
from trainforge.golden.neurotrainer.sequencer import nt_sequencer
from trainforge.sim.neurotrainer.ibuffer_loads import sequencer_loads
from trainforge.spec.neurotrainer import sequencer as spec

from scenario import Scenario, Transactions, random_pattern, rng_for


def port_names(params):
    """The testbench's port name of every queue, in queue order."""
    pes = params["pes"]
    return ([f"o_read_program__{v}" for v in range(pes + 1)] + [f"o_write_program__{v}" for v in range(pes + 1)]
            + [f"o_pe_program__{i}" for i in range(pes)])


def _random_config(rng):
    return {"wide": rng.randrange(2), "broadcast_in1": rng.randrange(2), "local_in1": rng.randrange(2),
            "merge": rng.randrange(2), "in1_block": rng.randrange(1 << 16), "in2_block": rng.randrange(1 << 16),
            "out_rows": rng.randrange(1 << 16)}


def _random_program(rng, params, layers, most, empty=0.0):
    widths = spec.queue_widths(params["pes"])
    program = []
    for _ in range(layers):
        words = [[] if rng.random() < empty else [rng.getrandbits(width) for _ in range(rng.randrange(most + 1))]
                 for width in widths]
        program.append({"config": _random_config(rng), "words": words})
    return program


def reference(params, program, runs):
    """Per port the expected ``(run, layer, word)`` items, and ``o_config``: per run the layers' configs."""
    expected = {port: [] for port in port_names(params)}
    for run, layers in enumerate(runs):
        for layer in range(layers):
            for port, words in zip(port_names(params), program[layer]["words"]):
                expected[port] += [(run, layer, word) for word in words]
    expected["o_config"] = [[program[layer]["config"] for layer in range(layers)] for layers in runs]
    return expected


def _scenario(params, name, program, runs, delay, **handshake):
    loads, layers = sequencer_loads(params, program)
    assert all(run <= layers for run in runs)
    return Scenario(name, {"i_load": loads, "i_start": list(runs), "system_idle_delay": delay},
                    reference(params, program, runs), **handshake)


def scenarios(params, seed):
    table = []
    depth, most_layers = params["queue_depth"], params["max_layers"]
    names = port_names(params)

    def fit(layers, words):
        """``layers`` capped at the layer table, ``words`` per queue and layer capped so that they fit a queue."""
        layers = min(layers, most_layers)
        return layers, min(words, depth // layers)

    layers, most = fit(2, 4)
    rng = rng_for(seed, "nt_sequencer", "two layers")
    table.append(_scenario(params, "two layers, every queue, full rate",
                           _random_program(rng, params, layers, most), [layers], delay=3))
    layers, most = fit(3, 2)
    rng = rng_for(seed, "nt_sequencer", "slow idle")
    table.append(_scenario(params, "up to three layers, the system idle 25 cycles after the last word",
                           _random_program(rng, params, layers, most), [layers], delay=25))
    layers, most = fit(4, 3)
    rng = rng_for(seed, "nt_sequencer", "empty")
    program = _random_program(rng, params, layers, most, empty=0.5)
    program[0]["words"] = [[] for _ in names]          # a layer with no words at all
    program[-1]["words"][0] = [rng.getrandbits(spec.queue_widths(params["pes"])[0]) for _ in range(min(2, most))]
    table.append(_scenario(params, "empty queues and an empty layer", program, [layers], delay=0))
    layers, most = fit(3, 5)
    rng = rng_for(seed, "nt_sequencer", "backpressure")
    table.append(_scenario(params, "backpressure on every queue, gaps in the loads",
                           _random_program(rng, params, layers, most), [layers], delay=7,
                           valid={"i_load": random_pattern(rng, 0.6)},
                           ready={name: random_pattern(rng, 0.4) for name in names}))
    layers, most = fit(2, 3)
    rng = rng_for(seed, "nt_sequencer", "runs")
    table.append(_scenario(params, "run twice (pointers restart), then the first layer only",
                           _random_program(rng, params, layers, most), [layers, 1], delay=4))
    rng = rng_for(seed, "nt_sequencer", "full")
    program = _random_program(rng, params, most_layers, int(most_layers <= depth), empty=0.7)
    for layer in program[1:]:
        layer["words"][-1] = []
    program[0]["words"][-1] = [rng.getrandbits(32) for _ in range(depth)]   # a full PE queue in one layer
    table.append(_scenario(params, "every layer table entry, a full queue", program, [most_layers], delay=2))
    layers, most = fit(2, 4)
    rng = rng_for(seed, "nt_sequencer", "stalled ones and zeros")
    table.append(_scenario(params, "every output stalled two cycles in three, holding all-ones and all-zeros words",
                           _ones_and_zeros_program(rng, params, layers, most), [layers], delay=2,
                           ready={name: (0, 0, 1) for name in names}))
    return table


def _ones_and_zeros_program(rng, params, layers, most):
    """Per queue and layer ``most`` words alternating between all ones and all zeros, the last word of layer 0 all
    ones and of layer 1 all zeros: under a stalled consumer every bit of each queue's output and skid registers
    holds both values, and each layer's last word waits in the output register with no word behind it."""
    program = []
    for layer in range(layers):
        last_ones = layer % 2 == 0
        words = [[((1 << width) - 1) if (most - 1 - k) % 2 == (0 if last_ones else 1) else 0 for k in range(most)]
                 for width in spec.queue_widths(params["pes"])]
        program.append({"config": _random_config(rng), "words": words})
    return program


def golden(params, scenario):
    result = nt_sequencer(scenario.stimulus["i_load"], scenario.stimulus["i_start"], **params)
    items = dict(zip(port_names(params), (result["queues"][name] for name in spec.queue_names(params["pes"]))))
    items["o_config"] = result["configs"]
    return Transactions(items)
