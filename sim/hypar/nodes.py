"""Node models built from the verified blocks, pluggable into the array simulator.

Each model has the interface of :class:`~trainforge.sim.hypar.simulator.RooflineNode`:
``phase_seconds(work)`` maps a :class:`~trainforge.sim.hypar.simulator.LayerWork`
(vectorised over leading axes, e.g. a batch of partitions) to seconds per
phase (forward, backward, gradient) and layer. One accelerator's share of a
layer has ``ceil(samples)`` samples and ``ceil(in_channels)`` input channels
(the accelerator with the larger half of an uneven split sets the pace), and
under a three-type partition (AccPar's type III splits C_out) ``ceil(out_channels)``
output channels; there are at most H + 1 such shapes per layer (the levels'
splits sum to H), so each model times every distinct (layer, samples, C_in,
C_out) once, caches it, and scatters the result over the batch. A phase takes the longer of its compute
time and its local DRAM time (``work.dram_bytes`` over the node's memory
bandwidth), as the roofline does; a phase with no MACs (the first layer's
backward pass) takes no time.

* :class:`TensorDashNode` - ``tiles`` TensorDash 4x4 tiles, timed by the
  TensorDash golden layer model (:mod:`trainforge.golden.tensordash.layer`)
  at given activation and gradient sparsities.
* :class:`CaterpillarNode` - ``cores`` CATERPILLAR linear algebra cores,
  layers lowered to GEMM (convolution by im2col) and timed by the core's
  golden command schedule (:func:`trainforge.golden.caterpillar.core.schedule`).
* :class:`NeuroTrainerNode` - a NeuroTrainer module timed by
  :func:`trainforge.sim.neurotrainer.module.layer_pass_time`.
"""
import functools
from dataclasses import dataclass, replace

import numpy as np

from trainforge.golden.caterpillar import core as caterpillar_core
from trainforge.golden.tensordash.layer import Lowered, layer_cycles, lower

from trainforge.checks import check_range
from trainforge.errors import ParameterError
from trainforge.hw.registry import get_block
from trainforge.spec.params import Param

__all__ = ["NODE_KINDS", "TensorDashNode", "CaterpillarNode", "NeuroTrainerNode", "make_node",
           "layer_dims", "tensordash_layer_cycles", "caterpillar_phase_cycles"]

#: Node model names accepted by :func:`make_node` and ``trainforge hypar ... --node``.
NODE_KINDS = ("roofline", "tensordash", "caterpillar", "neurotrainer")

#: The ``node`` parameter of :func:`make_node`.
NODE_KIND = Param("node", str, "roofline", "node model of the array simulator", choices=NODE_KINDS)

#: The CATERPILLAR core's parameter schema: ranges and defaults of ``n_r``, ``max_blocks`` and ``sram_depth``.
CP_CORE_SCHEMA = get_block("cp_core").schema

#: The TensorDash tile's parameter schema: ranges and defaults of ``rows``, ``cols``, ``lanes`` and ``depth``.
TD_TILE_SCHEMA = get_block("td_tile").schema


def layer_dims(layer, samples, in_channels):
    """One accelerator's share of ``layer`` as a dict of integer sizes.

    Keys: ``kind``, ``batch``, ``in_channels``, ``out_channels``, ``kernel``,
    ``in_h``, ``in_w``, ``out_h``, ``out_w``, ``stride``, ``padding``
    (fc layers: kernel, maps and stride 1, padding 0).
    """
    return {"kind": layer.kind, "batch": int(samples), "in_channels": int(in_channels),
            "out_channels": layer.out_channels, "kernel": layer.kernel, "in_h": layer.in_height,
            "in_w": layer.in_width, "out_h": layer.out_height, "out_w": layer.out_width,
            "stride": layer.stride, "padding": layer.padding}


def _per_shape_seconds(work, layer_seconds):
    """Scatter ``layer_seconds(index, layer, samples, in_channels) -> (3,) seconds`` over ``work``'s shapes.

    Where ``work.out_channels`` splits a layer's C_out (type III), ``layer`` is passed with its
    ``out_channels`` set to the share's, rounded up.
    """
    def rounded_up(values):
        return np.maximum(1.0, np.ceil(np.asarray(values, dtype=np.float64) - 1e-9))
    full = work.network.arrays.out_channels
    samples, in_channels, out_channels = np.broadcast_arrays(
        rounded_up(work.samples), rounded_up(work.in_channels),
        rounded_up(full if work.out_channels is None else work.out_channels))
    seconds = np.zeros(work.macs.shape)
    for index, layer in enumerate(work.network.layers):
        shapes = np.stack([samples[..., index].ravel(), in_channels[..., index].ravel(),
                           out_channels[..., index].ravel()], axis=1)
        unique, inverse = np.unique(shapes, axis=0, return_inverse=True)
        table = np.array([layer_seconds(index, layer if int(f) == layer.out_channels
                                        else replace(layer, out_channels=int(f)), int(n), int(c))
                          for n, c, f in unique])  # (U, 3)
        seconds[..., :, index] = table[inverse.reshape(-1)].reshape(samples.shape[:-1] + (3,))
    return seconds


def _roofline(compute_seconds, work, dram_bytes_per_second):
    memory = np.asarray(work.dram_bytes, dtype=np.float64) / dram_bytes_per_second
    return np.where(work.macs > 0, np.maximum(compute_seconds, memory), 0.0)


# ----------------------------------------------------------------------------------------------- TensorDash

#: Training operations in the order of the simulator's phases: forward, backward (input gradient), gradient.
TENSORDASH_OPERATIONS = ("AxW", "GxW", "GxA")


def _tensordash_dense_cycles(operation, dims, rows, cols, lanes, targeted):
    """Dense-tile cycles of one operation of a layer share (exact: ``layer_cycles(...).dense``)."""
    n, c, f, k = dims["batch"], dims["in_channels"], dims["out_channels"], dims["kernel"]
    if operation == "AxW":
        rows_b, rows_a, reduction = n * dims["out_h"] * dims["out_w"], f, k * k * c
    elif operation == "GxW":
        rows_b, rows_a, reduction = n * dims["in_h"] * dims["in_w"], c, k * k * f
    else:
        maps, patches = f, c * k * k
        rows_b, rows_a = (patches, maps) if targeted == "A" else (maps, patches)
        reduction = n * dims["out_h"] * dims["out_w"]
    return -(-rows_b // rows) * -(-rows_a // cols) * -(-reduction // lanes)


def _sub_layer_tensors(operation, dims, samples, sparsity_a, sparsity_g, cols, rng):
    """Random ReLU-like tensors (zero with the given probabilities) of a sub-layer for ``lower``.

    The sub-layer keeps everything that sets the targeted operand's rows
    (C_in, C_out, kernel, maps, stride, padding) and has ``samples`` samples;
    the dense side of ``AxW`` and ``GxW`` is cut to ``cols`` rows (one tile
    column block), which does not change the speedup (B-only skipping).
    """
    c, f, k = dims["in_channels"], dims["out_channels"], dims["kernel"]
    conv = dims["kind"] == "conv"
    if operation == "AxW":
        c_shape, f_shape = c, cols
    elif operation == "GxW":
        c_shape, f_shape = cols, f
    else:
        c_shape, f_shape = c, f
    a_shape = (samples, c_shape, dims["in_h"], dims["in_w"]) if conv else (samples, c_shape)
    w_shape = (f_shape, c_shape, k, k) if conv else (f_shape, c_shape)
    g_shape = (samples, f_shape, dims["out_h"], dims["out_w"]) if conv else (samples, f_shape)
    activations = rng.random(a_shape) >= sparsity_a
    gradients = rng.random(g_shape) >= sparsity_g
    return activations, np.ones(w_shape, dtype=bool), gradients


@functools.lru_cache(maxsize=None)
def _tensordash_cycles_cached(operation, dims_items, sparsity_a, sparsity_g, tile, budget, seed):
    dims = dict(dims_items)
    rows, cols, lanes, depth, max_rows = tile
    n = dims["batch"]
    rng = np.random.default_rng(seed)
    true_reduction = {"AxW": dims["kernel"] ** 2 * dims["in_channels"],
                      "GxW": dims["kernel"] ** 2 * dims["out_channels"],
                      "GxA": n * dims["out_h"] * dims["out_w"]}[operation]
    true_rows = -(-true_reduction // lanes)  # stream rows of one dot product
    parts = -(-true_rows // max_rows)
    part_rows = -(-true_rows // parts)  # stream rows of one tile pass
    # Samples of the sub-layer: all of them if the layer share is small enough to time exactly. Else
    # AxW and GxW (one dot product per window) get as many samples as the budget covers, at least one,
    # which shows every window geometry of the map; GxA reduces over the samples, so it gets enough of
    # them for one whole tile pass.
    if operation == "GxA":
        targeted_rows = max(dims["out_channels"], dims["in_channels"] * dims["kernel"] ** 2)
        exact = -(-targeted_rows // rows) * true_rows <= budget
        per_sample = dims["out_h"] * dims["out_w"]
        samples = n if exact else min(n, max(1, -(-part_rows * lanes // per_sample)))
    else:
        maps = (dims["out_h"] * dims["out_w"]) if operation == "AxW" else (dims["in_h"] * dims["in_w"])
        per_sample = maps * true_rows / rows  # block stream rows of one sample
        samples = n if n * per_sample <= budget else min(n, max(1, int(budget // per_sample)))
    activations, weights, gradients = _sub_layer_tensors(operation, dims, samples, sparsity_a, sparsity_g,
                                                         cols, rng)
    stride, padding = (dims["stride"], dims["padding"]) if dims["kind"] == "conv" else (1, 0)
    lowered = lower(operation, activations, weights, gradients, stride=stride, padding=padding)
    dense = _tensordash_dense_cycles(operation, dims, rows, cols, lanes, lowered.targeted)
    blocks_b = -(-lowered.b.shape[0] // rows)
    if samples == n and blocks_b * true_rows <= budget:
        # the sub-layer is the whole layer share and small: time it exactly
        cycles = layer_cycles(lowered, rows=rows, cols=cols, lanes=lanes, depth=depth, max_rows=max_rows)
        return dense, dense / cycles.dense * cycles.tensordash
    # Sampled: random B blocks of ``rows`` consecutive rows, each over a random aligned window of one pass.
    count = min(blocks_b, max(4, budget // part_rows))
    chosen = rng.choice(blocks_b, size=count, replace=False)
    b = np.concatenate([lowered.b, np.zeros((blocks_b * rows - lowered.b.shape[0], lowered.b.shape[1]), bool)])
    b = b.reshape(blocks_b, rows, -1)[chosen]
    length = b.shape[2]
    total = -(-length // lanes) * lanes
    b = np.concatenate([b, np.zeros(b.shape[:2] + (total - length,), bool)], axis=2)
    window = part_rows * lanes  # the sub-layer's reduction holds at least one pass (see ``samples``)
    starts = rng.integers(0, total // window, size=count) * window
    b = np.stack([block[:, start:start + window] for block, start in zip(b, starts)]).reshape(count * rows, window)
    sampled = layer_cycles(Lowered(operation, lowered.targeted, b, lowered.a[:cols], None), rows=rows, cols=cols,
                           lanes=lanes, depth=depth, max_rows=max_rows)
    return dense, dense * sampled.tensordash / sampled.dense


def tensordash_layer_cycles(operation, dims, sparsity_a, sparsity_g, *, rows=TD_TILE_SCHEMA["rows"].default,
                            cols=TD_TILE_SCHEMA["cols"].default, lanes=TD_TILE_SCHEMA["lanes"].default,
                            depth=TD_TILE_SCHEMA["depth"].default, max_rows=1024, budget=8192, seed=0):
    """Dense and TensorDash cycles of one training operation of a layer share on one tile.

    Parameters
    ----------
    operation : str
        ``"AxW"``, ``"GxW"`` or ``"GxA"``.
    dims : dict
        :func:`layer_dims` of the share.
    sparsity_a, sparsity_g : float
        Probability that an activation / a gradient is zero (i.i.d., ReLU-like).
    rows, cols, lanes, depth : int
        The tile; defaults from the ``td_tile`` schema.
    max_rows : int
        Row bound of :func:`trainforge.golden.tensordash.layer.layer_cycles`.
    budget : int
        Block stream rows the golden model simulates at most per call.
    seed : int
        Seed of the random tensors (fixed, so the model is deterministic).

    Returns
    -------
    dense, tensordash : float
        ``dense`` is exact; ``tensordash`` is exact when the layer share's
        targeted operand has at most ``budget`` block stream rows, otherwise
        ``dense`` times the golden model's cycle ratio on a sample of the
        sub-layer (module docstring of :class:`TensorDashNode`). Cached per
        argument set.
    """
    return _tensordash_cycles_cached(operation, tuple(sorted(dims.items())), float(sparsity_a), float(sparsity_g),
                                     (rows, cols, lanes, depth, max_rows), budget, seed)


@dataclass(frozen=True)
class TensorDashNode:
    """An accelerator of TensorDash 4x4 tiles, timed by the TensorDash golden layer model.

    Forward, backward and gradient phases are the operations ``AxW``,
    ``GxW`` and ``GxA`` (Table II of the paper), each lowered onto the tile
    by :func:`trainforge.golden.tensordash.layer.lower` and timed by
    :func:`~trainforge.golden.tensordash.layer.layer_cycles`. The operands are
    random ReLU-like tensors: an activation is zero with probability
    ``activation_sparsity`` (the first layer's input, an image, is dense), a
    gradient with ``gradient_sparsity`` (the last layer's output gradient,
    from the loss, is dense); weights are dense.

    Speedup measurement (cached per operation, layer share and sparsity):
    the dense cycles of the whole layer share are exact; the TensorDash
    cycles are exact when the share is small (at most ``budget`` block stream
    rows on the targeted side), otherwise the golden model runs on a sampled
    sub-layer - one sample (``AxW``, ``GxW``: every window of a map, so the
    padding geometry is that of the layer) or enough samples for one tile
    pass (``GxA``), the dense side cut to one tile column block - of which it
    simulates random B blocks over one pass-long window of the reduction,
    at most ``budget`` block rows; the layer's TensorDash cycles are its
    dense cycles times the sample's TensorDash/dense ratio. The passes are
    split evenly over the ``tiles``.

    Parameters
    ----------
    tiles : int
        4x4 tiles (16 PEs of 4 MAC lanes each) of the node, >= 1. Paper
        (Table III): 256.
    frequency_hz : float
        Clock, > 0. Paper: 500 MHz.
    dram_bytes_per_second : float
        Off-chip bandwidth, > 0. Paper: 4-channel LPDDR4-3200, 4 x 16 bit x
        3.2 GT/s = 25.6 GB/s.
    activation_sparsity, gradient_sparsity : float
        Zero probabilities, 0..1. Default 0.62: the sparsity whose ideal
        speedup 1 / (1 - s) is the paper's average potential 2.6x (Fig. 1).
    depth : int
        Staging buffer depth (lookahead); range and default from the ``td_tile`` schema. Paper: 4.
    budget : int
        Golden-model work bound per cached measurement, >= 64.
    seed : int
        Seed of the random tensors.
    """

    tiles: int = 256
    frequency_hz: float = 500e6
    dram_bytes_per_second: float = 25.6e9
    activation_sparsity: float = 0.62
    gradient_sparsity: float = 0.62
    depth: int = TD_TILE_SCHEMA["depth"].default
    budget: int = 8192
    seed: int = 0

    def __post_init__(self):
        check_range("tiles", self.tiles, 1)
        check_range("frequency_hz", self.frequency_hz, 0, kind="number", exclusive_minimum=True)
        check_range("dram_bytes_per_second", self.dram_bytes_per_second, 0, kind="number", exclusive_minimum=True)
        for name in ("activation_sparsity", "gradient_sparsity"):
            check_range(name, getattr(self, name), 0, 1, kind="number")
        TD_TILE_SCHEMA["depth"].check(self.depth)
        check_range("budget", self.budget, 64)
        check_range("seed", self.seed, 0)

    def layer_cycles(self, index, layer, samples, in_channels, layers):
        """(dense, TensorDash) cycles of the three phases of layer ``index`` of ``layers``, on one tile.

        Returns
        -------
        numpy.ndarray, shape (2, 3)
        """
        dims = layer_dims(layer, samples, in_channels)
        sparsity_a = 0.0 if index == 0 else self.activation_sparsity
        sparsity_g = 0.0 if index == layers - 1 else self.gradient_sparsity
        return np.array([tensordash_layer_cycles(operation, dims, sparsity_a, sparsity_g, depth=self.depth,
                                                 budget=self.budget, seed=self.seed)
                         for operation in TENSORDASH_OPERATIONS]).T

    def phase_seconds(self, work):
        """Seconds per phase and layer, shape (..., 3, L)."""
        layers = len(work.network)

        def layer_seconds(index, layer, samples, in_channels):
            return self.layer_cycles(index, layer, samples, in_channels, layers)[1] / (self.tiles * self.frequency_hz)
        return _roofline(_per_shape_seconds(work, layer_seconds), work, self.dram_bytes_per_second)


# ---------------------------------------------------------------------------------------------- CATERPILLAR

def gemm_shapes(dims):
    """The GEMMs ``C[m x q] = W[m x k] B[k x q]`` of the three phases of a layer share (im2col).

    Forward ``Y[F x P] = W[F x CK^2] X[CK^2 x P]``; backward
    ``dX[CK^2 x P] = W^T[CK^2 x F] dY[F x P]`` (then col2im); gradient
    ``dW[F x CK^2] = dY[F x P] X^T[P x CK^2]``, with ``P = N x OH x OW``.

    Returns
    -------
    tuple of (m, k, q), one per phase
    """
    patch = dims["in_channels"] * dims["kernel"] ** 2
    positions = dims["batch"] * dims["out_h"] * dims["out_w"]
    f = dims["out_channels"]
    return ((f, patch, positions), (patch, f, positions), (f, positions, patch))


def _chunks(count, size):
    """{chunk length: how many} for ``count`` blocks cut into chunks of at most ``size``."""
    full, rest = divmod(count, size)
    return {length: number for length, number in ((size, full), (rest, 1)) if length and number}


@functools.lru_cache(maxsize=None)
def caterpillar_gemm_cycles(m, k, q, n_r, max_blocks, sram_depth):
    """Cycles of one core running ``C[m x q] = W[m x k] B[k x q]`` as a microprogram of core commands.

    ``W`` is cut into resident tiles of at most ``max_blocks`` x ``Kc`` blocks
    (``Kc`` also bounded by the local SRAM, ``Mc Kc <= sram_depth`` words per
    PE); each tile is loaded once (``LOAD``) and every ``max_blocks``-block
    chunk of ``B``'s columns streams through it (``GEMM``). A command takes
    its golden ``issue_cycles`` plus ``COMMAND_LATENCY`` (the next command is
    accepted then; the cp_core testbench checks this spacing). Partial sums
    of the K chunks are added outside the core (not counted).
    """
    mb, kb, qb = (caterpillar_core.blocks(size, n_r) for size in (m, k, q))
    m_chunk = min(mb, max_blocks)
    k_chunk = max(1, min(kb, max_blocks, sram_depth // m_chunk))
    q_chunk = min(qb, max_blocks)
    latency = caterpillar_core.COMMAND_LATENCY
    cycles = 0
    for m_length, m_count in _chunks(mb, m_chunk).items():
        for k_length, k_count in _chunks(kb, k_chunk).items():
            load = caterpillar_core.schedule(caterpillar_core.OP_LOAD, m_length, k_length, n_r=n_r)
            cycles += m_count * k_count * (load.issue_cycles + latency)
            for q_length, q_count in _chunks(qb, q_chunk).items():
                gemm = caterpillar_core.schedule(caterpillar_core.OP_GEMM, m_length, k_length, q_length, n_r=n_r)
                cycles += m_count * k_count * q_count * (gemm.issue_cycles + latency)
    return cycles


def caterpillar_phase_cycles(dims, n_r=CP_CORE_SCHEMA["n_r"].default, max_blocks=CP_CORE_SCHEMA["max_blocks"].default,
                             sram_depth=CP_CORE_SCHEMA["sram_depth"].default):
    """Cycles of one core for the forward, backward and gradient GEMMs of a layer share, shape (3,)."""
    return np.array([caterpillar_gemm_cycles(m, k, q, n_r, max_blocks, sram_depth) for m, k, q in gemm_shapes(dims)],
                    dtype=np.float64)


@dataclass(frozen=True)
class CaterpillarNode:
    """An accelerator of CATERPILLAR linear algebra cores, timed by the core's golden command schedule.

    Every phase of a layer is one GEMM (:func:`gemm_shapes`, convolutions by
    im2col), run as LOAD + GEMM commands (:func:`caterpillar_gemm_cycles`);
    the commands are split evenly over the ``cores`` (each core owns whole
    resident tiles; the ring is not needed because the K-chunk partial sums
    are added outside the cores).

    Parameters
    ----------
    cores : int
        Cores, >= 1. Paper (Section 4.1): 2 x 16 cores of 4 x 4 PEs.
    n_r : int
        PEs per core row and column; range and default from the ``cp_core`` schema. Paper: 4
        (or 16 with 2 x 4 cores).
    frequency_hz : float
        Clock, > 0. Paper: 1 GHz.
    dram_bytes_per_second : float
        Memory bandwidth behind the cores, > 0. The paper's cores read
        private off-core SRAMs at ``n_r`` words per cycle each; a HyPar node
        has the paper's HMC, 320 GB/s (the default).
    max_blocks : int
        Largest block count of one command; range and default from the ``cp_core`` schema (the RTL's).
    sram_depth : int
        Words per PE local memory; range and default from the ``cp_core`` schema.
    """

    cores: int = 32
    n_r: int = CP_CORE_SCHEMA["n_r"].default
    frequency_hz: float = 1e9
    dram_bytes_per_second: float = 320e9
    max_blocks: int = CP_CORE_SCHEMA["max_blocks"].default
    sram_depth: int = CP_CORE_SCHEMA["sram_depth"].default

    def __post_init__(self):
        check_range("cores", self.cores, 1)
        check_range("frequency_hz", self.frequency_hz, 0, kind="number", exclusive_minimum=True)
        check_range("dram_bytes_per_second", self.dram_bytes_per_second, 0, kind="number", exclusive_minimum=True)
        for name in ("n_r", "max_blocks", "sram_depth"):
            CP_CORE_SCHEMA[name].check(getattr(self, name))

    def phase_seconds(self, work):
        """Seconds per phase and layer, shape (..., 3, L)."""
        def layer_seconds(index, layer, samples, in_channels):
            cycles = caterpillar_phase_cycles(layer_dims(layer, samples, in_channels), self.n_r, self.max_blocks,
                                              self.sram_depth)
            return cycles / (self.cores * self.frequency_hz)
        return _roofline(_per_shape_seconds(work, layer_seconds), work, self.dram_bytes_per_second)


# --------------------------------------------------------------------------------------------- NeuroTrainer

#: NeuroTrainer pass names of the simulator's phases.
NEUROTRAINER_PASSES = ("ff", "bp", "up")


def neurotrainer_dims(dims):
    """:func:`layer_dims` in the keys of ``trainforge.sim.neurotrainer.module.layer_pass_time``."""
    if dims["kind"] == "fc":
        return {"inputs": dims["in_channels"], "outputs": dims["out_channels"], "batch": dims["batch"]}
    return {"in_channels": dims["in_channels"], "out_channels": dims["out_channels"], "kernel": dims["kernel"],
            "in_h": dims["in_h"], "in_w": dims["in_w"], "out_h": dims["out_h"], "out_w": dims["out_w"],
            "stride": dims["stride"], "batch": dims["batch"]}


@functools.lru_cache(maxsize=None)
def _neurotrainer_pass_seconds(config, paper_precision, layer, samples, in_channels):
    from trainforge.sim.neurotrainer import module
    dims = neurotrainer_dims(layer_dims(layer, samples, in_channels))
    configs = [module.paper_precision(config, name) if paper_precision else config for name in NEUROTRAINER_PASSES]
    return tuple(module.layer_pass_time(config, layer.kind, dims, name).seconds
                 for config, name in zip(configs, NEUROTRAINER_PASSES))


@dataclass(frozen=True)
class NeuroTrainerNode:
    """A NeuroTrainer module, timed by its throughput model per layer and pass.

    Forward, backward and gradient phases are NeuroTrainer's ``ff``, ``bp``
    and ``up`` passes; a phase takes
    ``trainforge.sim.neurotrainer.module.layer_pass_time(config, kind, dims, pass).seconds``
    for the accelerator's share of the layer. That model covers the module's
    own memory system (dedicated and common HMC vaults, broadcast/merge bus),
    so no roofline is added.

    Parameters
    ----------
    config : trainforge.sim.neurotrainer.module.ModuleConfig, optional
        Defaults to ``ModuleConfig()``: the paper's module, 15 PEs x 32 MACs at 2.5 GHz on HMC vaults.
    paper_precision : bool
        True (default): each pass in the paper's MAC mode (16-bit FF, 32-bit BP and UP,
        ``module.paper_precision``); False: every pass in ``config.wide``'s mode.
    """

    config: object = None
    paper_precision: bool = True

    def __post_init__(self):
        from trainforge.sim.neurotrainer import module
        if self.config is None:
            object.__setattr__(self, "config", module.ModuleConfig())
        if not isinstance(self.config, module.ModuleConfig):
            raise TypeError(f"config={self.config!r}: expected a trainforge.sim.neurotrainer.module.ModuleConfig")
        if not isinstance(self.paper_precision, bool):
            raise TypeError(f"paper_precision={self.paper_precision!r}: expected True or False")

    def pass_seconds(self, layer, samples, in_channels):
        """Seconds of the ``ff``, ``bp`` and ``up`` passes of one layer share, shape (3,) (cached)."""
        return np.array(_neurotrainer_pass_seconds(self.config, self.paper_precision, layer, samples, in_channels))

    def phase_seconds(self, work):
        """Seconds per phase and layer, shape (..., 3, L)."""
        seconds = _per_shape_seconds(work, lambda index, layer, samples, channels: self.pass_seconds(
            layer, samples, channels))
        return np.where(work.macs > 0, seconds, 0.0)


def make_node(kind, sparsity=None, units_per_hmc=None):
    """The node model named ``kind`` (one of :data:`NODE_KINDS`) with its defaults.

    Parameters
    ----------
    kind : str
    sparsity : tuple of (float, float), optional
        TensorDash only: (activation, gradient) sparsity.
    units_per_hmc : int, optional
        Roofline only: processing units per HMC (default
        :data:`~trainforge.sim.hypar.config.UNITS_PER_HMC`).

    Raises
    ------
    trainforge.errors.ParameterError
        Unknown ``kind``, ``sparsity`` or ``units_per_hmc`` given for another node, or a value out of range.
    """
    from .config import NodeConfig
    from .simulator import RooflineNode
    NODE_KIND.check(kind)
    if sparsity is not None and kind != "tensordash":
        raise ParameterError(f"sparsity={sparsity!r} applies to node=tensordash only, not node={kind!r}")
    if units_per_hmc is not None and kind != "roofline":
        raise ParameterError(f"units_per_hmc={units_per_hmc!r} applies to node=roofline only, not node={kind!r}")
    if kind == "roofline":
        return RooflineNode() if units_per_hmc is None else RooflineNode(NodeConfig(units_per_hmc=units_per_hmc))
    if kind == "tensordash":
        if sparsity is None:
            return TensorDashNode()
        return TensorDashNode(activation_sparsity=sparsity[0], gradient_sparsity=sparsity[1])
    if kind == "caterpillar":
        return CaterpillarNode()
    return NeuroTrainerNode()
