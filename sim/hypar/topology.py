"""Link-level models of the H-tree (fat tree) and the 2D torus.

Accelerator ``i`` of ``2**H`` takes part, at hierarchy level h (0 = H1), in
the exchange between the two groups that differ in bit ``H-1-h`` of its
index; its partner is ``i XOR 2**(H-1-h)``. During a level-h exchange of
``c`` bytes between the two groups of every pair (both directions counted,
as in :mod:`trainforge.sim.hypar.comm`), each accelerator receives
``c / (2 g)`` bytes from its partner, where ``g = 2**(H-1-h)`` is the group
size: the tensors are spread evenly over a group. All pairs of a level
exchange at once.

Every route is fixed (tree: up to the common ancestor and down; torus:
dimension-ordered, shortest way round, ties in the positive direction), links
are full duplex, and a level's exchange time is set by its most loaded
directed link: ``max(load / capacity)``.
"""
from collections import Counter

import numpy as np


def _htree_route(source, destination):
    """Directed links ('up'|'down', height, subtree index) of the tree route."""
    height = (source ^ destination).bit_length()
    up = [("up", k, source >> k) for k in range(height)]
    down = [("down", k, destination >> k) for k in range(height)]
    return up + down


def _torus_shape(levels):
    rows = 2 ** ((levels + 1) // 2)
    return rows, 2 ** levels // rows


def _ring_steps(start, stop, size):
    forward = (stop - start) % size
    if forward == 0:
        return []
    direction = 1 if forward <= size - forward else -1
    count = forward if direction == 1 else size - forward
    return [((start + direction * step) % size, direction) for step in range(count)]  # (node left, direction)


class Topology:
    """Per-level exchange times of an array; see the module docstring.

    Parameters
    ----------
    array : ArrayConfig
        Levels, topology and leaf-link bandwidth.

    Attributes
    ----------
    seconds_per_pair_byte : numpy.ndarray, shape (H,)
        Time per byte of a level's pair traffic ``c``.
    """

    def __init__(self, array):
        self.array = array
        link_bytes_per_second = array.link_bits_per_second / 8.0
        levels = array.levels
        times = []
        for level in range(levels):
            group = 2 ** (levels - 1 - level)
            loads = Counter()
            for source in range(array.accelerators):
                loads.update(self._route(source ^ group, source))
            worst = max(count / self._capacity(link) for link, count in loads.items())
            times.append(worst / link_bytes_per_second / (2 * group))
        self.seconds_per_pair_byte = np.array(times)

    def _route(self, source, destination):
        if self.array.topology == "htree":
            return _htree_route(source, destination)
        rows, columns = _torus_shape(self.array.levels)
        (source_row, source_column), (row, column) = divmod(source, columns), divmod(destination, columns)
        links = [("x", source_row, position, direction)
                 for position, direction in _ring_steps(source_column, column, columns)]
        links += [("y", position, column, direction) for position, direction in _ring_steps(source_row, row, rows)]
        return links

    def _capacity(self, link):
        """Capacity in leaf-link units: fat-tree links double per level up."""
        if self.array.topology == "htree":
            return 2.0 ** link[1]
        return 1.0
