"""Scenario table of ``stream_stage``: random payloads under every mix of valid gaps and backpressure.

Reference: a pipeline stage delivers exactly the transactions it took, in
order; at full rate each one leaves :data:`~trainforge.spec.stream_stage.LATENCY`
cycles after it entered, one per cycle.
"""
from trainforge.golden import stream_stage as golden_model
from trainforge.spec import stream_stage as spec

from scenario import Scenario, Transactions, random_pattern, rng_for

#: (name, valid probability, ready probability) of the random scenarios.
HANDSHAKES = (
    ("producer gaps, consumer stalls", 0.5, 0.5),
    ("full producer, slow consumer", 1.0, 0.3),
    ("slow producer, full consumer", 0.3, 1.0),
    ("nearly full rate", 0.9, 0.9),
    ("consumer stalls every other cycle", 1.0, None),
)


def scenarios(params, seed):
    width = params["width"]
    top = (1 << width) - 1
    table = []
    rng = rng_for(seed, "stream_stage", "full rate")
    payloads = [rng.randint(0, top) for _ in range(64)]
    table.append(Scenario("full rate", {"i_stream": payloads}, {"o_stream": payloads},
                          timing={"o_stream": [index + spec.LATENCY for index in range(len(payloads))]}))
    table.append(Scenario("extreme payloads", {"i_stream": [0, top, 0, top, top, 0]},
                          {"o_stream": [0, top, 0, top, top, 0]}, ready={"o_stream": (0, 1, 1)}))
    for name, valid, ready in HANDSHAKES:
        rng = rng_for(seed, "stream_stage", name)
        payloads = [rng.randint(0, top) for _ in range(200)]
        ready_pattern = (1, 0) if ready is None else random_pattern(rng, ready)
        table.append(Scenario(name, {"i_stream": payloads}, {"o_stream": payloads},
                              valid={"i_stream": random_pattern(rng, valid)}, ready={"o_stream": ready_pattern}))
    return table


def _expand(pattern, cycles):
    return [pattern[cycle % len(pattern)] for cycle in range(cycles)]


def golden(params, scenario):
    payloads = scenario.stimulus["i_stream"]
    cycles = 40 * (len(payloads) + 10)
    accepted, delivered = golden_model.run(
        payloads, _expand(scenario.valid.get("i_stream", (1,)), cycles),
        _expand(scenario.ready.get("o_stream", (1,)), cycles), **params)
    start = accepted[0] if accepted else 0
    return Transactions({"o_stream": [item for _, item in delivered]},
                        {"o_stream": [cycle - start for cycle, _ in delivered]})
