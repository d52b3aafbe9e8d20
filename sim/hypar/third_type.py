"""A third partition type (AccPar's type III) next to HyPar's two, for comparison.

AccPar (Song et al., HPCA 2020, the HyPar authors' follow-up; its public partitioner is the one
``verif/test_hypar_conventions.py`` compares against) partitions a layer in one of three ways:

====  ==================  ======================================  =======================
type  splits              intra-layer exchange                    HyPar name
====  ==================  ======================================  =======================
0     the batch           A(dW_l): gradient partial sums          dp
1     C_in (W's rows)     A(F_{l+1}): output partial sums         mp
2     C_out (W's columns) A(E_l): input-error partial sums        (none)
====  ==================  ======================================  =======================

Type 2 computes half of the output channels for the whole batch from the whole
input; in the backward pass each half of W gives partial sums of the whole
input error E_l, which the two groups reduce. Its output is split along C_out,
i.e. along the next layer's C_in, which a type-1 reader takes as it is.

Inter-layer costs, as fractions of the reader's A(F) (forward part, backward
part), the authors' table (``Layer::Com_Cost_Inter_Layer``) with Table 2 of
HyPar as its 2x2 corner; both groups are counted and every tensor is in its
layer's current shape, as in :mod:`trainforge.sim.hypar.comm`:

============  ============  ============  ============
from / to     0             1             2
============  ============  ============  ============
0             0             0.25 + 0.25   0.5 + 0
1             0 + 0.5       0 + 0.5       0
2             0.25 + 0.25   0             0.5 + 0
============  ============  ============  ============

A type-2 split halves a layer's C_out share (and with it its weights and
outputs) at the levels below. The communication model and the partitioner
cover chains and DAGs (residual sums and concatenations: a concatenation
slice is an edge of its own, sized as in :mod:`trainforge.sim.hypar.comm`).

The step simulator (:func:`trainforge.sim.hypar.simulator.simulate_step`)
runs three-type partitions: :func:`traffic_of` splits the traffic into its
tasks, the type-2 exchange being a *backward reduce* of E_l after layer l's
backward compute and before the transfer of that error to l's sources.
"""
import numpy as np

from trainforge.errors import ConfigError

from .comm import BOTH_SIDES
from .partition import Traffic, check_samples, frontier_partition

#: (forward, backward) fractions of the reader's A(F) for an edge from type ``[source]`` to type ``[reader]``.
INTER_FRACTIONS = (
    ((0.0, 0.0), (0.25, 0.25), (0.5, 0.0)),
    ((0.0, 0.5), (0.0, 0.5), (0.0, 0.0)),
    ((0.25, 0.25), (0.0, 0.0), (0.5, 0.0)),
)

#: Number of partition types.
TYPES = 3


def _edges(network):
    """Every edge (source, reader, share of the reader's input) of ``network`` (:meth:`Network.input_edges`)."""
    return network.input_edges()


def _level_tensors(network, setup, shares):
    """Element counts of one group's tensors, given (batch, C_in, C_out) shares of shape (L,)."""
    arrays = network.arrays
    batch, in_channels, out_channels = shares
    samples = setup.batch * batch
    inputs = samples * arrays.in_channels * in_channels * arrays.in_area
    outputs = samples * arrays.out_channels * out_channels
    partial_sums = outputs * (arrays.out_area if setup.mp_partial_sums == "pre_pooling" else arrays.pooled_area)
    weights = arrays.in_channels * in_channels * arrays.out_channels * out_channels * arrays.kernel_area
    return inputs, outputs * arrays.pooled_area, partial_sums, weights


def level_costs(network, setup, shares):
    """One level's costs in bytes: ``intra`` (L, 3) and, per edge, (source, reader, bytes of its tensor).

    The tensor of an edge is the reader's F in the reader's shape (``inter_layer="consumer"``) or the
    source's output in the source's shape (``"producer"``); both groups are counted.
    """
    scale = BOTH_SIDES * setup.bytes_per_element
    inputs, outputs, partial_sums, weights = _level_tensors(network, setup, shares)
    intra = np.stack([weights, partial_sums, inputs], axis=-1) * scale
    edges = [(source, reader, float(scale * (share * inputs[reader] if setup.inter_layer == "consumer"
                                             else outputs[source])))
             for source, reader, share in _edges(network)]
    return intra, edges


def _incoming(layers, edges):
    incoming = [[] for _ in range(layers)]
    for source, reader, size in edges:
        table = tuple(tuple(size * (forward + backward) for forward, backward in row) for row in INTER_FRACTIONS)
        incoming[reader].append((source, table))
    return incoming


def _split(shares, types):
    batch, in_channels, out_channels = shares
    return (np.where(types == 0, 0.5 * batch, batch), np.where(types == 1, 0.5 * in_channels, in_channels),
            np.where(types == 2, 0.5 * out_channels, out_channels))


def level_bytes(network, setup, shares, types):
    """One level's traffic in bytes for the given types (L,)."""
    intra, edges = level_costs(network, setup, shares)
    total = float(intra[np.arange(len(types)), types].sum())
    for source, reader, size in edges:
        forward, backward = INTER_FRACTIONS[types[source]][types[reader]]
        total += size * (forward + backward)
    return total


def hierarchical_partition(network, setup, levels):
    """Algorithm 2 with three types per layer: the exact per-level minimum on the shares left above.

    Returns
    -------
    total : float
        Bytes per step (both groups, ``sum_h 2**h com_h``).
    types : numpy.ndarray of int, shape (H, L)
    """
    layers = len(network)
    shares = (np.ones(layers), np.ones(layers), np.ones(layers))
    types = np.zeros((levels, layers), dtype=np.int64)
    total = 0.0
    for level in range(levels):
        intra, edges = level_costs(network, setup, shares)
        level_total, chosen = frontier_partition(intra.tolist(), _incoming(layers, edges))
        types[level] = chosen
        check_samples(network, setup, shares[0][None], (types[level] != 0)[None], first_level=level)
        total += 2.0 ** level * level_total
        shares = _split(shares, types[level])
    return total, types


def traffic_bytes(network, setup, types):
    """Bytes per step of a given three-type partition ``types`` (H, L) (both groups, all levels)."""
    types = np.asarray(types, dtype=np.int64)
    if types.ndim != 2 or types.shape[1] != len(network):
        raise ConfigError(f"types has shape {types.shape}; expected (levels, {len(network)})")
    if ((types < 0) | (types >= TYPES)).any():
        raise ConfigError(f"types: expected values 0, 1 or 2, got {sorted(set(types.ravel().tolist()))}")
    layers = len(network)
    shares = (np.ones(layers), np.ones(layers), np.ones(layers))
    total = 0.0
    for level, row in enumerate(types):
        check_samples(network, setup, shares[0][None], (row != 0)[None], first_level=level)
        total += 2.0 ** level * level_bytes(network, setup, shares, row)
        shares = _split(shares, row)
    return total


def group_shares(types):
    """The (batch, C_in, C_out) shares a group holds at each level before that level's split.

    Parameters
    ----------
    types : numpy.ndarray of int, shape (..., H, L)

    Returns
    -------
    batch, in_channels, out_channels : numpy.ndarray, shape (..., H + 1, L)
        Index h is the share at level h; index H is one accelerator's share.
    """
    types = np.asarray(types)
    top = np.zeros((*types.shape[:-2], 1, types.shape[-1]))

    def share(kind):
        return 0.5 ** np.cumsum(np.concatenate([top, (types == kind).astype(np.float64)], axis=-2), axis=-2)
    return share(0), share(1), share(2)


def checked_types(network, types):
    """``types`` as an int array (..., H, L) with values 0..2 and L layers of ``network``.

    Raises
    ------
    trainforge.errors.ConfigError
        For another layer count or another value.
    """
    types = np.asarray(types, dtype=np.int64)
    if types.ndim < 2 or types.shape[-1] != len(network):
        raise ConfigError(f"types has shape {types.shape}; expected (..., levels, {len(network)})")
    if ((types < 0) | (types >= TYPES)).any():
        raise ConfigError(f"types: expected values 0, 1 or 2, got {sorted(set(types.ravel().tolist()))}")
    return types


def traffic_of(network, setup, types):
    """The traffic of three-type partitions by task, vectorised over leading axes of ``types`` (..., H, L).

    Returns
    -------
    trainforge.sim.hypar.partition.Traffic
        Bytes per group pair: ``forward_reduce`` (type 1, A(F_{l+1})), ``gradient_reduce``
        (type 0, A(dW_l)), ``backward_reduce`` (type 2, A(E_l)) and the inter-layer parts of
        :data:`INTER_FRACTIONS` per edge, charged to the reader. ``total_bytes`` equals
        :func:`traffic_bytes`.
    """
    types = checked_types(network, types)
    batch, in_channels, out_channels = (share[..., :-1, :] for share in group_shares(types))
    check_samples(network, setup, batch, types != 0)
    scale = BOTH_SIDES * setup.bytes_per_element
    inputs, outputs, partial_sums, weights = _level_tensors(network, setup, (batch, in_channels, out_channels))
    table = np.array(INTER_FRACTIONS)  # (source type, reader type, forward/backward)
    forward = np.zeros(types.shape)
    backward = np.zeros(types.shape)
    for source, reader, share in _edges(network):
        size = scale * (share * inputs[..., reader] if setup.inter_layer == "consumer" else outputs[..., source])
        fractions = table[types[..., source], types[..., reader]]
        forward[..., reader] += size * fractions[..., 0]
        backward[..., reader] += size * fractions[..., 1]
    return Traffic(choices=types, forward_reduce=np.where(types == 1, scale * partial_sums, 0.0),
                   gradient_reduce=np.where(types == 0, scale * weights, 0.0), forward_transfer=forward,
                   backward_transfer=backward, backward_reduce=np.where(types == 2, scale * inputs, 0.0))


def format_types(types):
    """Digit strings per level (0 = dp, 1 = mp, 2 = type III)."""
    return ["".join(str(int(value)) for value in row) for row in np.asarray(types)]
