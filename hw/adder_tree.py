"""Balanced adder tree, shared by the PEs that reduce their lanes in one cycle."""
from amaranth.hdl import Value

__all__ = ["adder_tree"]


def adder_tree(terms):
    """Sum ``terms`` as a balanced binary tree of adders.

    The depth is ``ceil(log2(len(terms)))`` adders instead of the
    ``len(terms) - 1`` of a chain, which keeps the critical path short for
    wide PEs. Amaranth widens every sum by one bit, so the result is exact.

    Parameters
    ----------
    terms : sequence of Value-castable
        At least one term.
    """
    level = [Value.cast(term) for term in terms]
    if not level:
        raise ValueError("adder_tree needs at least one term")
    while len(level) > 1:
        paired = [level[k] + level[k + 1] for k in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]
