"""Algorithm 1 (two groups, dynamic programming), Algorithm 2 (hierarchical),
brute force, baselines and the traffic of any given partition.

A partition is a boolean array ``choices[h, l]``: True where layer l is model
parallel (mp) at hierarchy level h (h = 0 is the paper's H1, the split of the
whole array in two), False for data parallel (dp). Printed as the paper does,
one bit string per level, ``1`` for mp.

At each level the two groups hold the share of the work left by the levels
above: dp halves a layer's batch, mp halves its C_in (see
:mod:`trainforge.sim.hypar.comm`). Algorithm 2's recursion
``com = com_h + 2 x com_{next}`` is evaluated level by level: the 2**h group
pairs of level h are identical, so the total is ``sum_h 2**h com_h``.
"""
from dataclasses import dataclass

import numpy as np

from trainforge.checks import check_range
from trainforge.errors import ConfigError

from .comm import LayerTensors, LevelCosts


def _level_costs(network, setup, batch_scale, in_channel_scale):
    return LevelCosts.of(LayerTensors.of(network, setup, batch_scale, in_channel_scale), setup, network)


def partition_two_groups(costs):
    """Algorithm 1: the dp/mp choice per layer minimising one level's traffic.

    Parameters
    ----------
    costs : LevelCosts
        One level's costs, 1-D arrays of length L.

    Returns
    -------
    total : float
        Minimum traffic in bytes between the two groups.
    model_parallel : numpy.ndarray of bool
        The choice per layer (ties go to dp, which has no inter-layer cost
        after dp).
    """
    if costs.main_producer is not None:
        return _partition_two_groups_dag(costs)
    intra_dp = costs.intra_dp.tolist()
    intra_mp = costs.intra_mp.tolist()
    dp_to_mp = (costs.dp_mp_forward + costs.dp_mp_backward).tolist()
    mp_to_any = costs.mp_to_any_backward.tolist()
    layers = len(intra_dp)
    # came_from_mp[l][p]: whether the best path ending in parallelism p at layer l had mp at layer l-1.
    came_from_mp = [(False, False)] * layers
    com_dp, com_mp = intra_dp[0], intra_mp[0]
    for index in range(1, layers):
        dp_via_dp, dp_via_mp = com_dp, com_mp + mp_to_any[index]
        mp_via_dp, mp_via_mp = com_dp + dp_to_mp[index], com_mp + mp_to_any[index]
        came_from_mp[index] = (dp_via_mp < dp_via_dp, mp_via_mp < mp_via_dp)
        com_dp = min(dp_via_dp, dp_via_mp) + intra_dp[index]
        com_mp = min(mp_via_dp, mp_via_mp) + intra_mp[index]
    model_parallel = np.zeros(layers, dtype=bool)
    current = com_mp < com_dp
    for index in range(layers - 1, -1, -1):
        model_parallel[index] = current
        current = came_from_mp[index][int(current)]
    return min(com_dp, com_mp), model_parallel


def _partition_two_groups_dag(costs):
    """Algorithm 1 generalised to a network with branches, concatenations and residual edges (exact).

    The layers are visited in their (topological) order. After layer i, the
    *frontier* is the set of layers j <= i with an edge to a layer after i;
    the cost of every later edge depends on the past only through the
    choices of the frontier layers. The dynamic programme therefore keeps,
    for each assignment of dp/mp to the frontier, the cheapest cost of the
    layers so far: 2**|frontier| states instead of the chain's 2. For
    ResNets the frontier holds at most the current layer, a block's input
    and its projection (at most 8 states); a concatenation keeps every
    branch it joins in the frontier until its last reader (GoogLeNet: at
    most 7 layers, 128 states); for a DAG with wide frontiers it becomes an
    exhaustive search over the frontier's choices. Ties go to dp.
    """
    intra = np.stack([np.asarray(costs.intra_dp, dtype=np.float64),
                      np.asarray(costs.intra_mp, dtype=np.float64)], axis=-1).tolist()
    incoming = [[] for _ in intra]
    for layer, source in enumerate(costs.main_producer.tolist()):
        if source >= 0:
            dp_to_mp = float(costs.dp_mp_forward[layer] + costs.dp_mp_backward[layer])
            mp_to_any = float(costs.mp_to_any_backward[layer])
            incoming[layer].append((source, ((0.0, dp_to_mp), (mp_to_any, mp_to_any))))
    if costs.branch_source is not None:
        for edge, (source, layer) in enumerate(zip(costs.branch_source.tolist(), costs.branch_reader.tolist())):
            half = 0.5 * float(costs.branch_boundary[edge])
            incoming[layer].append((source, ((0.0, half), (half, half))))
    total, types = frontier_partition(intra, incoming)
    return total, np.array(types, dtype=bool)


def frontier_partition(intra, incoming):
    """The exact minimum of one level's traffic over per-layer types, by dynamic programming over frontiers.

    Parameters
    ----------
    intra : list of list of float
        ``intra[l][t]``: the intra-layer cost of layer l under type t.
    incoming : list of list of (int, table)
        ``incoming[l]``: the edges into layer l, each ``(source, table)`` with
        ``table[t_source][t_l]`` the edge's cost; every source is an earlier layer.

    Returns
    -------
    total : float
    types : list of int
        The type per layer (ties go to the lower type).
    """
    layers, kinds = len(intra), len(intra[0])
    last_use = list(range(layers))
    for layer, edges in enumerate(incoming):
        for source, _ in edges:
            last_use[source] = max(last_use[source], layer)
    frontier = ()
    states = {(): (0.0, None)}
    history = []
    for layer in range(layers):
        keep = tuple(j for j in (*frontier, layer) if last_use[j] > layer)
        position = {j: index for index, j in enumerate(frontier)}
        edges = [(position[source], table) for source, table in incoming[layer]]
        kept = [position.get(j) for j in keep]          # None: this layer's own type
        new_states = {}
        for assignment, (cost, _) in states.items():
            for kind in range(kinds):
                total = cost + intra[layer][kind]
                for index, table in edges:
                    total += table[assignment[index]][kind]
                key = tuple(kind if index is None else assignment[index] for index in kept)
                if key not in new_states or total < new_states[key][0]:
                    new_states[key] = (total, (assignment, kind))
        history.append(new_states)
        frontier, states = keep, new_states
    key = min(states, key=lambda key: states[key][0])
    total = states[key][0]
    types = [0] * layers
    for layer in range(layers - 1, -1, -1):
        key, types[layer] = history[layer][key][1]
    return total, types


def level_bytes_of(costs, model_parallel):
    """Traffic of one level for given choices, vectorised over leading axes.

    Parameters
    ----------
    costs : LevelCosts
        Arrays broadcastable to ``model_parallel``.
    model_parallel : numpy.ndarray of bool, shape (..., L)

    Returns
    -------
    numpy.ndarray, shape (...)
    """
    forward, backward = costs.transfers(model_parallel)
    intra = np.where(model_parallel, costs.intra_mp, costs.intra_dp)
    return (intra + forward + backward).sum(axis=-1)


def brute_force_two_groups(costs):
    """Minimum of one level's traffic over all 2**L choices (L <= 20).

    Returns
    -------
    total : float
    model_parallel : numpy.ndarray of bool
    """
    layers = costs.intra_dp.shape[-1]
    check_range("layers", layers, 1, 20)  # brute force over 2**layers choices
    codes = np.arange(2 ** layers)
    every_choice = ((codes[:, None] >> np.arange(layers - 1, -1, -1)) & 1).astype(bool)
    totals = level_bytes_of(costs, every_choice)
    best = int(np.argmin(totals))
    return float(totals[best]), every_choice[best]


@dataclass(frozen=True)
class Traffic:
    """Traffic of a partition per level and layer, bytes per group pair.

    Attributes
    ----------
    choices : numpy.ndarray of bool, shape (..., H, L)
        True for mp; for a three-type partition
        (:func:`trainforge.sim.hypar.third_type.traffic_of`), the int types 0..2.
    forward_reduce : numpy.ndarray, shape (..., H, L)
        mp partial sums of F_{l+1} (forward pass, after layer l's compute).
    gradient_reduce : numpy.ndarray
        dp partial sums of dW_l (after layer l's gradient compute).
    forward_transfer : numpy.ndarray
        Inter-layer feature map into layer l (before its forward compute).
    backward_transfer : numpy.ndarray
        Inter-layer error E_l (output error of layer l-1), needed before
        layer l-1's backward and gradient compute; charged to layer l.
    backward_reduce : numpy.ndarray or None
        Three-type partitions only: the type-III partial sums of E_l (after
        layer l's backward compute, before its error goes to its sources).
    """

    choices: np.ndarray
    forward_reduce: np.ndarray
    gradient_reduce: np.ndarray
    forward_transfer: np.ndarray
    backward_transfer: np.ndarray
    backward_reduce: np.ndarray = None

    @property
    def level_bytes(self):
        """Bytes between the two groups of one pair at each level, shape (..., H)."""
        per_layer = self.forward_reduce + self.gradient_reduce + self.forward_transfer + self.backward_transfer
        if self.backward_reduce is not None:
            per_layer = per_layer + self.backward_reduce
        return per_layer.sum(axis=-1)

    @property
    def total_bytes(self):
        """Algorithm 2's com: sum over levels of 2**h pairs x level bytes, shape (...)."""
        levels = self.choices.shape[-2]
        return (self.level_bytes * 2.0 ** np.arange(levels)).sum(axis=-1)


def group_shares(choices):
    """Share of batch and of C_in a group holds at each level, before that level's split.

    Parameters
    ----------
    choices : numpy.ndarray of bool, shape (..., H, L)

    Returns
    -------
    batch_share, in_channel_share : numpy.ndarray, shape (..., H + 1, L)
        Index h is the share at level h; index H is one accelerator's share.
    """
    top = np.zeros((*choices.shape[:-2], 1, choices.shape[-1]), dtype=bool)
    halved = np.concatenate([top, np.ones_like(choices)], axis=-2)
    mp = np.concatenate([top, choices], axis=-2)
    batch_share = 0.5 ** np.cumsum(np.where(mp, 0.0, halved), axis=-2)
    in_channel_share = 0.5 ** np.cumsum(np.where(mp, 1.0, 0.0), axis=-2)
    return batch_share, in_channel_share


def check_samples(network, setup, batch_share, choices, first_level=0):
    """Refuse a dp level that leaves a group with less than one sample of some layer.

    Parameters
    ----------
    network : Network
    setup : TrainingSetup
    batch_share : numpy.ndarray, shape (..., H, L)
        The share of the batch each group holds *before* level h's split.
    choices : numpy.ndarray of bool, shape (..., H, L)
    first_level : int
        The level of index 0 of the H axis (0 = H1).

    Raises
    ------
    trainforge.errors.ConfigError
        Naming the first such level (H1 = the top split) and layer.
    """
    samples_after = setup.batch * np.asarray(batch_share) * np.where(choices, 1.0, 0.5)
    short = ~np.asarray(choices, dtype=bool) & (samples_after < 1.0)
    if short.any():
        where = np.argwhere(short)
        first = where[np.lexsort((where[:, -1], where[:, -2]))[0]]
        level, layer = int(first[-2]) + first_level, int(first[-1])
        after = float(setup.batch * np.broadcast_to(batch_share, short.shape)[tuple(first)]) / 2
        raise ConfigError(
            f"network {network.name!r}: layer {network.names[layer]!r} at level H{level + 1}: data parallelism "
            f"would leave {after:g} samples (less than one) per group of batch {setup.batch}; use a larger batch, "
            f"fewer levels or model parallelism for this layer at this level")


def traffic_of(network, setup, choices):
    """The traffic of a given partition, vectorised over leading axes of ``choices``.

    Parameters
    ----------
    network : Network
    setup : TrainingSetup
    choices : array-like of bool, shape (..., H, L)

    Returns
    -------
    Traffic
    """
    choices = np.asarray(choices, dtype=bool)
    if choices.shape[-1] != len(network):
        raise ValueError(f"choices has {choices.shape[-1]} layers; network {network.name!r} has {len(network)}")
    batch_share, in_channel_share = group_shares(choices)
    check_samples(network, setup, batch_share[..., :-1, :], choices)
    costs = _level_costs(network, setup, batch_share[..., :-1, :], in_channel_share[..., :-1, :])
    forward, backward = costs.transfers(choices)
    return Traffic(
        choices=choices,
        forward_reduce=np.where(choices, costs.intra_mp, 0.0),
        gradient_reduce=np.where(choices, 0.0, costs.intra_dp),
        forward_transfer=forward,
        backward_transfer=backward,
    )


def hierarchical_partition(network, setup, levels):
    """Algorithm 2: Algorithm 1 at each level, on the tensors the level above left.

    Parameters
    ----------
    network : Network
    setup : TrainingSetup
    levels : int
        H; the array has 2**H accelerators.

    Returns
    -------
    total : float
        com in bytes (``com_h + 2 com_next`` unrolled).
    choices : numpy.ndarray of bool, shape (H, L)
    """
    layers = len(network)
    batch_share = np.ones(layers)
    in_channel_share = np.ones(layers)
    choices = np.zeros((levels, layers), dtype=bool)
    total = 0.0
    for level in range(levels):
        level_total, choices[level] = partition_two_groups(
            _level_costs(network, setup, batch_share, in_channel_share))
        check_samples(network, setup, batch_share[None], choices[level][None], first_level=level)
        total += 2.0 ** level * level_total
        batch_share = np.where(choices[level], batch_share, 0.5 * batch_share)
        in_channel_share = np.where(choices[level], 0.5 * in_channel_share, in_channel_share)
    return total, choices


def enumerate_partitions(layers, levels):
    """Every partition of ``layers`` layers over ``levels`` levels, shape (2**(H*L), H, L).

    Code c's bits, most significant first, are level 0's layers, then level 1's, ...
    """
    bits = levels * layers
    check_range("levels*layers", bits, 0, 20)  # enumeration of 2**(levels*layers) partitions
    codes = np.arange(2 ** bits)
    flat = ((codes[:, None] >> np.arange(bits - 1, -1, -1)) & 1).astype(bool)
    return flat.reshape(-1, levels, layers)


#: Baselines of the paper: name -> function(network, levels) -> choices (H, L).
BASELINES = {
    "DP": lambda network, levels: np.zeros((levels, len(network)), dtype=bool),
    "MP": lambda network, levels: np.ones((levels, len(network)), dtype=bool),
    "Trick": lambda network, levels: np.tile(~network.arrays.is_conv, (levels, 1)),
}


def strategy_choices(name, network, setup, levels):
    """Choices of strategy ``name``: ``"HyPar"`` or one of :data:`BASELINES`."""
    if name == "HyPar":
        return hierarchical_partition(network, setup, levels)[1]
    return BASELINES[name](network, levels)


def format_choices(choices):
    """Bit strings per level, ``1`` for mp (the paper's Fig. 9 notation)."""
    return ["".join("1" if bit else "0" for bit in row) for row in np.asarray(choices)]
