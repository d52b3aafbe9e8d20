"""Scenario table of ``nt_vault``: reads after writes, full-rate timing, corners, backpressure.

Reference (independent of the golden model): a Python dict as the memory, request by request:
a write stores ``data`` at word ``address mod depth``, a read returns that word's last
stored data. The memory keeps its contents across resets (it is not cleared), so every
scenario writes each word before it reads it. Without backpressure request ``i`` is
accepted in cycle ``i * interval`` and a read's data leave ``latency`` cycles later.
"""
from trainforge.golden.neurotrainer.vault import nt_vault

from scenario import Scenario, Transactions, random_pattern, rng_for

_MASK32 = (1 << 32) - 1


def reference(params, requests):
    """The ``o_data`` items and, per read, its acceptance index."""
    memory, reads = {}, []
    for number, request in enumerate(requests):
        word = request["address"] % params["depth"]
        if request["write"]:
            memory[word] = request["data"]
        else:
            reads.append((memory[word], number))
    return reads


def _random_requests(rng, depth, count):
    words = rng.sample(range(depth), min(depth, 6))
    requests = [{"address": word, "write": 1, "data": rng.randrange(1 << 32)} for word in words]
    for _ in range(count):
        requests.append({"address": rng.choice(words), "write": int(rng.random() < 0.4),
                         "data": rng.randrange(1 << 32)})
    for request in requests:   # the full 32-bit address wraps onto the word
        request["address"] = (request["address"] + rng.randrange((1 << 32) // depth) * depth) & _MASK32
    return requests


def _scenario(params, name, requests, **handshake):
    reads = reference(params, requests)
    timing = {} if handshake else {
        "o_data": [number * params["interval"] + params["latency"] for _, number in reads]}
    return Scenario(name, {"i_request": requests}, {"o_data": [value for value, _ in reads]}, timing=timing,
                    **handshake)


def scenarios(params, seed):
    depth = params["depth"]
    table = []
    rng = rng_for(seed, "nt_vault", "full rate")
    table.append(_scenario(params, "random requests at full rate", _random_requests(rng, depth, 120)))
    top = _MASK32
    corner = [(0, 1, 0), (0, 0, 0), (top, 1, top), (top, 0, 0), (depth - 1, 0, 0), (0, 1, 0x12345678), (0, 0, 0),
              (top, 0, 0), (5 % depth, 1, top), (5 % depth, 0, 0)]
    table.append(_scenario(params, "zeros, ones, highest address, read right after write",
                           [{"address": a, "write": w, "data": d} for a, w, d in corner]))
    for name, valid, ready in (("producer gaps, consumer stalls", 0.6, 0.5), ("slow consumer", 1.0, 0.2)):
        rng = rng_for(seed, "nt_vault", name)
        table.append(_scenario(params, name, _random_requests(rng, depth, 150),
                               valid={"i_request": random_pattern(rng, valid)},
                               ready={"o_data": random_pattern(rng, ready)}))
    return table


def golden(params, scenario):
    requests = scenario.stimulus["i_request"]
    result = nt_vault([r["address"] for r in requests], [r["write"] for r in requests],
                      [r["data"] for r in requests], **params)
    cycles = {} if scenario.valid or scenario.ready else {"o_data": [int(c) for c in result["cycles"]]}
    return Transactions({"o_data": [int(value) for value in result["data"]]}, cycles)
