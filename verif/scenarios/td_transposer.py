"""Scenario table of ``td_transposer``: groups of ``size`` blocks in, the same groups transposed out.

Reference: numpy's own ``transpose`` of each ``size`` x ``size`` group
(output block ``j`` of a group is value ``j`` of every input block). The
transposer has no cycle model, so only the transactions are compared.
"""
import numpy as np

from trainforge.golden.tensordash.transposer import transpose_blocks

from scenario import Scenario, Transactions, random_pattern, rng_for

#: (name, groups, valid probability, ready probability) of the random scenarios.
RANDOM = (
    ("full rate", 6, 1.0, 1.0),
    ("producer gaps, consumer stalls", 8, 0.6, 0.5),
    ("full producer, slow consumer", 6, 1.0, 0.3),
    ("slow producer, full consumer", 6, 0.3, 1.0),
)


def _reference(blocks, size):
    """Each group of ``size`` blocks transposed with numpy (``np.transpose`` of the group matrix)."""
    out = []
    for start in range(0, len(blocks), size):
        group = np.array(blocks[start:start + size], dtype=object)
        out += [[int(v) for v in row] for row in np.transpose(group)]
    return out


def _scenario(name, blocks, size, valid=None, ready=None):
    return Scenario(name, {"i_block": blocks}, {"o_block": _reference(blocks, size)},
                    valid={} if valid is None else {"i_block": valid},
                    ready={} if ready is None else {"o_block": ready})


def scenarios(params, seed):
    size, width = params["size"], params["width"]
    top = (1 << width) - 1
    table = []
    numbered = [[(row * size + col) & top for col in range(size)] for row in range(size)]
    table.append(_scenario("numbered group", numbered, size))
    table.append(_scenario("all-zero then all-ones group", [[0] * size] * size + [[top] * size] * size, size,
                           ready=(1, 0)))
    for name, groups, valid, ready in RANDOM:
        rng = rng_for(seed, "td_transposer", name)
        blocks = [[rng.randint(0, top) for _ in range(size)] for _ in range(groups * size)]
        table.append(_scenario(name, blocks, size, random_pattern(rng, valid), random_pattern(rng, ready)))
    return table


def golden(params, scenario):
    blocks = scenario.stimulus["i_block"]
    return Transactions({"o_block": [[int(v) for v in row] for row in transpose_blocks(blocks, **params)]})
