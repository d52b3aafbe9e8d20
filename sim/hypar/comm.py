"""Tensors per layer and the HyPar communication model (paper Section 3).

Tensors of layer l (element counts A(.), vectorised over layers and over any
leading batch of partitions):

* F_l, E_l: input feature map and its error, ``batch x C_in x H_in x W_in``.
* W_l, dW_l: kernel and gradient, ``C_in x C_out x K x K``.
* F_{l+1}, E_{l+1}: output feature map and its error. Two sizes matter: the
  partial sums a model-parallel layer exchanges are taken *before* pooling
  (max pooling does not commute with a sum of partial sums; the default,
  ``TrainingSetup.mp_partial_sums = "pre_pooling"``), and the tensors handed
  to the next layer are taken *after* pooling. ``"post_pooling"`` sizes the
  partial sums after pooling, as the authors' public partitioner does.

Communication between the two groups of one level (Tables 1 and 2), in
elements, counted for *both* groups (each side fetches its half from the
other, hence the factor :data:`BOTH_SIDES` = 2 of the paper's worked examples):

=========  ==============================================
dp (intra) A(dW_l)
mp (intra) A(F_{l+1}) (pre-pooling partial sums)
dp -> dp   0
dp -> mp   0.25 A(F_{l+1}) + 0.25 A(E_{l+1})
mp -> mp   0.5 A(E_{l+1})
mp -> dp   0.5 A(E_{l+1})
=========  ==============================================

The inter-layer entry for the edge into layer l from the layer it reads (layer
l-1 in a chain; ``input_from``, concatenated and residual sources in a network
with branches, see :class:`LevelCosts`) is charged to layer l. Two conventions
(``TrainingSetup.inter_layer``):

* ``"consumer"`` (default, the paper's): Algorithm 1 step 1 builds each
  layer's F_l and E_l, and Table 2 charges the transition into the consumer
  with A(F) and A(E) of the consumer's L tensors, i.e. layer l's input map and
  error in layer l's *current* shape (its own batch share and C_in share).
  Every mp level above halves the consumer's C_in, so below an mp level the
  boundary shrinks with it. This is what each group *needs*.
* ``"producer"``: the R tensors of layer l-1 (its post-pooling output) in
  layer l-1's current shape. Physical argument: model parallelism splits
  layer l-1's kernel along C_in, so below an mp level of layer l-1 each group
  still holds the *whole* reduced output F_{l+1}; a re-layout has to move
  quarters and halves of what the groups hold, which does not shrink with
  the consumer's C_in share. This is what each group *holds*; it is the
  larger of the two whenever the consumer was mp above (10-12 % more traffic
  for AlexNet and VGG-A under HyPar).

Concatenations: a layer k whose input is the channel concatenation of layers
p_1..p_n reads each p_i's output as a slice of its F_k, a fraction
s_i = C_out(p_i) / C_in(k) of it (fc: values). Each slice is an edge of its
own, charged to k with Table 2 between p_i's choice and k's: under
``"consumer"`` with s_i A(F_k) and s_i A(E_k) in k's current shape (every
mp level above k halves k's C_in and, with it, every slice alike: a group
holds the same fraction of each producer's channels); under ``"producer"``
with p_i's output in p_i's current shape, as for any edge. The slices of one
concatenation sum to the single edge a chain would have when every p_i makes
the same choice; when they differ, each slice is charged by its own
producer's choice. A residual source r of a concatenated layer c reaches k
with c's share s_c.

Model parallelism splits the kernel along its *input* dimension (Section
3.1.2: ``[32x35] x [35x100]`` gives partial sums of the full ``[32x100]``
output), so below an mp choice a group holds half of C_in, of W_l and of F_l,
but still the full F_{l+1}. Data parallelism halves the batch and keeps W_l.
"""
from dataclasses import dataclass

import numpy as np

#: Both groups fetch their missing half, so a level's traffic is twice Tables 1/2.
BOTH_SIDES = 2


@dataclass(frozen=True)
class LayerTensors:
    """Element counts of the tensors of every layer in one group's shape.

    Parameters
    ----------
    input_map : numpy.ndarray
        A(F_l) = A(E_l).
    weights : numpy.ndarray
        A(W_l) = A(dW_l).
    partial_sums : numpy.ndarray
        A(F_{l+1}) before pooling (what mp reduces).
    output_map : numpy.ndarray
        A(F_{l+1}) = A(E_{l+1}) after pooling (what the next layer reads).
    """

    input_map: np.ndarray
    weights: np.ndarray
    partial_sums: np.ndarray
    output_map: np.ndarray

    @classmethod
    def of(cls, network, setup, batch_scale=1.0, in_channel_scale=1.0):
        """Tensors of ``network`` for a group holding the given share of the work.

        Parameters
        ----------
        network : Network
        setup : TrainingSetup
        batch_scale, in_channel_scale : float or numpy.ndarray
            The fraction of the batch and of each layer's C_in the group holds
            (broadcast against ``(..., L)``).
        """
        arrays = network.arrays
        batch = setup.batch * np.asarray(batch_scale, dtype=np.float64)
        in_channels = arrays.in_channels * np.asarray(in_channel_scale, dtype=np.float64)
        return cls(
            input_map=batch * in_channels * arrays.in_area,
            weights=in_channels * arrays.out_channels * arrays.kernel_area,
            partial_sums=batch * arrays.out_channels * arrays.out_area,
            output_map=batch * arrays.out_channels * arrays.pooled_area,
        )


@dataclass(frozen=True)
class LevelCosts:
    """Communication of one level between its two groups, in bytes, per layer.

    Every array has shape ``(..., L)``; the inter-layer arrays are the costs
    of the edge *into* layer l from the layer it reads (zero for a layer
    reading the network input or a concatenation), split into the forward
    (feature map) and backward (error) parts. The *branch edges* are the
    others: one per concatenated source (a slice of the reader's input) and
    one per (residual source, reader of the sum), each charged to the reader
    with the same Table 2 amounts on its own tensor (:meth:`transfers`).

    Parameters
    ----------
    intra_dp, intra_mp : numpy.ndarray
        Table 1.
    dp_mp_forward, dp_mp_backward : numpy.ndarray
        The 0.25 A(F) and 0.25 A(E) halves of Table 2's dp -> mp.
    mp_to_any_backward : numpy.ndarray
        Table 2's 0.5 A(E) of mp -> mp and mp -> dp.
    main_producer : numpy.ndarray of int, optional
        The one layer each layer reads (-1: the input or a concatenation);
        ``None`` for a chain.
    branch_source, branch_reader : numpy.ndarray of int, optional
        The branch edges (source layer, reader): concatenation slices, then
        residual edges, shape (R,).
    branch_boundary : numpy.ndarray, optional
        Both sides' bytes of each branch edge's tensor, shape (..., R).
    """

    intra_dp: np.ndarray
    intra_mp: np.ndarray
    dp_mp_forward: np.ndarray
    dp_mp_backward: np.ndarray
    mp_to_any_backward: np.ndarray
    main_producer: np.ndarray = None
    branch_source: np.ndarray = None
    branch_reader: np.ndarray = None
    branch_boundary: np.ndarray = None

    @classmethod
    def of(cls, tensors, setup, network=None):
        """Costs from :class:`LayerTensors` (one group's shapes), under ``setup``'s conventions.

        ``network`` gives the edges; without it (or for a chain) layer l reads layer l-1.
        """
        scale = BOTH_SIDES * setup.bytes_per_element
        chain = network is None or network.is_chain
        layers = np.shape(tensors.input_map)[-1]
        producer = np.arange(layers) - 1 if chain else network.main_producer
        reads_input = producer < 0
        source = np.where(reads_input, 0, producer)
        if setup.inter_layer == "consumer":
            boundary = np.where(reads_input, 0.0, tensors.input_map)
        else:
            output_map = np.broadcast_to(tensors.output_map, np.broadcast_shapes(np.shape(tensors.output_map),
                                                                                  np.shape(tensors.input_map)))
            boundary = np.where(reads_input, 0.0, output_map[..., source])
        boundary = boundary * scale
        partial_sums = tensors.partial_sums if setup.mp_partial_sums == "pre_pooling" else tensors.output_map
        extra = {}
        branches = [] if chain else network.input_edges()[int((producer >= 0).sum()):]
        if branches:
            branch_source, branch_reader = (np.array(side, dtype=np.int64) for side in list(zip(*branches))[:2])
            share = np.array([edge[2] for edge in branches])
            if setup.inter_layer == "consumer":
                sized = tensors.input_map[..., branch_reader] * share
            else:
                sized = np.broadcast_to(tensors.output_map, np.broadcast_shapes(
                    np.shape(tensors.output_map), np.shape(tensors.input_map)))[..., branch_source]
            extra = {"branch_source": branch_source, "branch_reader": branch_reader,
                     "branch_boundary": sized * scale}
        return cls(
            intra_dp=tensors.weights * scale,
            intra_mp=partial_sums * scale,
            dp_mp_forward=0.25 * boundary,
            dp_mp_backward=0.25 * boundary,
            mp_to_any_backward=0.5 * boundary,
            main_producer=None if chain else producer,
            **extra,
        )

    def inter(self, previous_mp, current_mp):
        """Inter-layer bytes (forward part, backward part) into each layer from the layer it reads.

        Parameters
        ----------
        previous_mp, current_mp : numpy.ndarray of bool
            Model parallelism of the layer each layer reads (layer l-1 in a
            chain) and of the layer itself, shape ``(..., L)`` (ignored where
            a layer reads the input: its cost is zero).
        """
        dp_to_mp = ~previous_mp & current_mp
        forward = np.where(dp_to_mp, self.dp_mp_forward, 0.0)
        backward = np.where(dp_to_mp, self.dp_mp_backward, np.where(previous_mp, self.mp_to_any_backward, 0.0))
        return forward, backward

    def producer_mp(self, model_parallel):
        """Model parallelism of the layer each layer reads (False where it reads the input)."""
        if self.main_producer is None:
            previous = np.zeros_like(model_parallel)
            previous[..., 1:] = model_parallel[..., :-1]
            return previous
        return np.where(self.main_producer < 0, False, model_parallel[..., np.maximum(self.main_producer, 0)])

    def transfers(self, model_parallel):
        """All inter-layer bytes (forward part, backward part) charged to each layer, shape ``(..., L)``.

        The main edges of :meth:`inter` plus, for each branch edge (p, k)
        (a concatenation slice or a residual edge), Table 2 between p's and
        k's choices on the edge's tensor, charged to k.
        """
        forward, backward = self.inter(self.producer_mp(model_parallel), model_parallel)
        if self.branch_source is None:
            return forward, backward
        forward, backward = forward.copy(), backward.copy()
        source = model_parallel[..., self.branch_source]
        reader = model_parallel[..., self.branch_reader]
        dp_to_mp = ~source & reader
        quarter = 0.25 * self.branch_boundary
        edge_forward = np.where(dp_to_mp, quarter, 0.0)
        edge_backward = np.where(dp_to_mp, quarter, np.where(source, 2 * quarter, 0.0))
        for edge, consumer in enumerate(self.branch_reader.tolist()):
            forward[..., consumer] += edge_forward[..., edge]
            backward[..., consumer] += edge_backward[..., edge]
        return forward, backward


def intra_layer_bytes(network, setup):
    """Table 1 for two accelerators: (dp bytes, mp bytes) per layer, both sides counted."""
    costs = LevelCosts.of(LayerTensors.of(network, setup), setup)
    return costs.intra_dp, costs.intra_mp
