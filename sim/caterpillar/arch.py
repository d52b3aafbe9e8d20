"""Architecture model of CATERPILLAR: memory fit, MAC and weight-access counts, cycles, energy, area.

Cycles come from the schedules of the mapped microprograms
(:mod:`trainforge.golden.caterpillar.core` and ``.ring``); energy from the
events those microprograms count (:func:`trainforge.golden.caterpillar.core.counts`,
the same events the RTL's testbench counts on its enables), priced with the
paper's Table 1; area from Table 1. No utilization and no energy per MAC is a
constant. The paper's Section 3.4 counts are kept for comparison
(:func:`epoch_counts`, :func:`section34_energy`).
"""
import functools
import math
from dataclasses import dataclass

from trainforge.errors import ConfigError
from trainforge.golden.caterpillar import core, ring
from trainforge.spec.caterpillar import CoreEvent
from trainforge.spec import network as network_format

__all__ = ["TABLE1", "Config", "CONFIGS", "BUILTIN_NETWORKS", "NETWORKS", "widths_from_network", "layer_shapes", "memory_per_pe", "fits",
           "epoch_counts", "epoch_cycles", "epoch_energy", "section34_energy", "EVENT_PJ", "store_events",
           "PROGRAMS", "step_events", "step_events_by_program", "epoch_events", "price", "COUNTERFACTUALS",
           "counterfactual_energy", "area_mm2", "gflops_per_mm2", "cp_allocation",
           "METHODS"]

#: Table 1: energy per operation (pJ) and area (mm^2).
TABLE1 = {
    "fpu_pj": 2.63, "fpu_mm2": 0.0056,
    "local_sram_pj_per_word": 3.5, "local_sram_mm2": 0.0617,
    "offcore_sram_pj_per_word": 16.0, "offcore_sram_mm2": 1.948,
}

#: Training methods of the study.
METHODS = ("SGD", "MBGD", "FA", "DFA", "CP")


@dataclass(frozen=True)
class Config:
    """An array of ``2 x C`` cores of ``n_r x n_r`` PEs.

    Attributes
    ----------
    name : str
    c : int
        Half the number of cores.
    n_r : int
    local_words : int
        16-bit words of local SRAM per PE (16 KB -> 8192).
    reduction : str
        ``"bus"`` or ``"tree"`` (the evaluated architecture has the neighbour links).
    frequency_hz : float
    """
    name: str
    c: int
    n_r: int
    local_words: int = 8192
    reduction: str = "bus"
    frequency_hz: float = 1e9

    @property
    def cores(self):
        return 2 * self.c

    @property
    def pes(self):
        return self.cores * self.n_r ** 2

    @property
    def offcore_words_per_cycle(self):
        """Words per cycle a core's private off-core SRAM delivers: one per row bus, ``n_r``."""
        return self.n_r


#: The two configurations of Section 4.1 (as the Table 2 captions and the areas assign them).
CONFIGS = {
    "2x16-cores-4x4": Config("2x16-cores-4x4", c=16, n_r=4, reduction="tree"),
    "2x4-cores-16x16": Config("2x4-cores-16x16", c=4, n_r=16, reduction="tree"),
}

def _mlp(name, widths):
    """An MLP of fully connected layers ``fc1``... in the common network format."""
    layers = [{"name": f"fc{index}", "kind": "fc", "in_channels": inputs, "out_channels": outputs}
              for index, (inputs, outputs) in enumerate(zip(widths, widths[1:]), start=1)]
    return network_format.from_dict({"name": name, "layers": layers}, f"caterpillar {name}")


def widths_from_network(description, source=None):
    """The layer widths (inputs, then every layer's outputs) of a chain of ``fc`` layers.

    Parameters
    ----------
    description : trainforge.spec.network.Network
        The network in the common format (:mod:`trainforge.spec.network`).
    source : str, optional
        Where it came from (a file name), the start of every error message.

    Raises
    ------
    trainforge.errors.ConfigError
        For a layer CATERPILLAR cannot train (not ``fc``, applied over
        timesteps, reading another layer than the previous one or a
        concatenation, adding a residual, or whose inputs are not the
        previous layer's outputs); one line naming it.
    """
    source = source or f"network {description.name!r}"
    widths = [description.layers[0].in_channels]
    for index, layer in enumerate(description.layers):
        where = f"{source}: layers[{index}]"
        if layer.kind != "fc":
            raise ConfigError(f"{where}.kind: CATERPILLAR trains chains of fc layers, got {layer.kind} "
                              f"(layer {layer.name!r})")
        for key, default in (("timesteps", 1), ("input_from", None), ("residual_from", None),
                             ("concat_from", None)):
            value = getattr(layer, key)
            if value != default:
                value = list(value) if isinstance(value, tuple) else value
                raise ConfigError(f"{where}.{key}: CATERPILLAR trains plain chains of fc layers, got "
                                  f"{value!r} (layer {layer.name!r})")
        if layer.in_channels != widths[-1]:
            raise ConfigError(f"{where}.in_channels: expected {widths[-1]}, the previous layer's outputs, got "
                              f"{layer.in_channels} (layer {layer.name!r})")
        widths.append(layer.out_channels)
    return tuple(widths)


#: The study's networks (MLPs from the 784 inputs to the 10 outputs) in the common format.
BUILTIN_NETWORKS = {name: _mlp(name, widths) for name, widths in (
    ("500-500-500-10", (784, 500, 500, 500, 10)),
    ("500x4-10", (784, 500, 500, 500, 500, 10)),
    ("500x5-10", (784, 500, 500, 500, 500, 500, 10)),
    ("2500-2000-1500-1000-500-10", (784, 2500, 2000, 1500, 1000, 500, 10)),
)}

#: The study's networks: layer widths from the 784 inputs to the 10 outputs.
NETWORKS = {name: widths_from_network(network) for name, network in BUILTIN_NETWORKS.items()}


def layer_shapes(widths):
    """``[(m_i, n_i)]`` of the layers of a network given by its widths."""
    return list(zip(widths[:-1], widths[1:]))


def memory_per_pe(widths, config, literal=False):
    """Words per PE that SGD/CP need to keep the network local (Section 3.4).

    With ``literal`` the paper's formula ``sum (L - i + 1)(m + n + max(m, n) + m n) / (2 C n_r^2)``;
    otherwise the weights are counted once and only the inputs, activations and
    partial sums are multiplied by the ``L - i + 1`` samples in flight.
    """
    shapes = layer_shapes(widths)
    depth = len(shapes)
    total = 0
    for index, (m, n) in enumerate(shapes, start=1):
        in_flight = depth - index + 1
        vectors = m + n + max(m, n)
        total += in_flight * (vectors + m * n) if literal else in_flight * vectors + m * n
    return total / config.pes


def fits(widths, config):
    """Whether the network fits in the local memories (our reading of the formula, :func:`memory_per_pe`)."""
    return memory_per_pe(widths, config) <= config.local_words


def epoch_counts(widths, method, samples, batch=1):
    """MACs and weight accesses of one epoch (Section 3.4).

    Returns
    -------
    dict
        ``macs``, ``weight_accesses``.
    """
    shapes = layer_shapes(widths)
    weights = sum(m * n for m, n in shapes)
    outputs = widths[-1]
    feedback = sum(n * outputs for _, n in shapes[:-1])  # B_i maps the output error to layer i's n_i outputs
    updates = samples / batch
    if method == "DFA":
        return {"macs": samples * (2 * weights + feedback),
                "weight_accesses": 2 * updates * weights + updates * feedback}
    macs = 3 * samples * weights
    if method == "FA":
        return {"macs": macs, "weight_accesses": 2 * updates * weights + updates * weights}
    if method == "CP":
        return {"macs": macs, "weight_accesses": updates * weights}
    return {"macs": macs, "weight_accesses": 2 * updates * weights}


def _ring_gemv(op, rows, n, cores, config, overlap):
    """Cycles of one ring GEMV command (Fig. 4 on ``cores`` cores, row panels of ``rows`` rows each, ``n``
    columns): the golden ring schedule (:func:`trainforge.golden.caterpillar.ring.gemv_command_cycles`):
    forward, the chain of adds over the cores; backward, ``e`` along the ring and the parts of ``d`` read
    out of the cores."""
    n_r = config.n_r
    return ring.gemv_command_cycles(op, core.blocks(rows, n_r), core.blocks(n, n_r), overlap=overlap, cores=cores,
                                    n_r=n_r, reduction=config.reduction)


def _gemv_cycles(m, n, cores, config, overlap):
    """Forward + backward GEMV of an ``m x n`` layer split in row panels over ``cores`` cores (the ring GEMV,
    Fig. 4 on all cores: the chain of adds sums the partial outputs), then the moves the next layer needs: the
    ``n`` outputs from the end of the chain to the cores as the next layer's inputs (one ring collective) and
    the cores' parts of the ``m`` backward outputs to every core as the next layer's error (an all-gather)."""
    n_r = config.n_r
    rows = -(-m // cores)
    forward = _ring_gemv(ring.RING_GEMV_FORWARD, rows, n, cores, config, overlap)
    backward = _ring_gemv(ring.RING_GEMV_BACKWARD, rows, n, cores, config, overlap)
    exchange = ring.collective_cycles(n, cores, n_r) + ring.collective_cycles(m, cores, n_r)
    return forward + backward + exchange


def _forward_cycles(m, n, cores, config):
    """Forward ring GEMV of an ``m x n`` layer in row panels over ``cores`` cores (no overlap), with the move of
    its ``n`` outputs to the cores: the forward half of :func:`_gemv_cycles`."""
    return (_ring_gemv(ring.RING_GEMV_FORWARD, -(-m // cores), n, cores, config, False)
            + ring.collective_cycles(n, cores, config.n_r))


def _feedback_cycles(outputs, width, cores, config):
    """DFA's backward GEMV of one hidden layer, ``B_i^T e``: the ``outputs`` elements of the output
    error in, the layer's ``width`` errors out, ``B_i`` split in column panels (``ceil(width / cores)``
    outputs per core), no overlap, then one collective of the ``width`` errors (the paper's
    reduce-scatter, Section 3.3: "the reduce-scatter operation is still required")."""
    n_r = config.n_r
    feedback = core.schedule(core.OP_GEMV_FORWARD, core.blocks(outputs, n_r),
                             core.blocks(-(-width // cores), n_r), n_r=n_r, reduction=config.reduction,
                             overlap=False)
    return feedback.issue_cycles + core.COMMAND_LATENCY + ring.collective_cycles(width, cores, n_r)


def _update_cycles(m, n, cores, config, batch):
    """Rank-``batch`` weight update of an ``m x n`` layer on ``cores`` cores, in place: the ``cp_core``
    UPDATE microprogram on each core's row panel (:func:`core.schedule` with ``OP_UPDATE``): the
    activations into the vector buffer, then ``batch`` products per weight word (activation on the
    row bus, error on the column bus) and one read-modify-write of the word."""
    n_r = config.n_r
    update = core.schedule(core.OP_UPDATE, core.blocks(-(-m // cores), n_r), core.blocks(n, n_r), batch, n_r=n_r)
    return update.issue_cycles + core.COMMAND_LATENCY


def _gemm_cycles(m, n, cores, config, batch):
    """Forward and backward GEMMs of a minibatch on ``cores`` cores, with all-gather and reduce-scatter."""
    n_r = config.n_r
    forward = core.schedule(core.OP_GEMM, core.blocks(-(-n // cores), n_r), core.blocks(m, n_r),
                            core.blocks(batch, n_r), n_r=n_r)
    backward = core.schedule(core.OP_GEMM, core.blocks(-(-m // cores), n_r), core.blocks(n, n_r),
                             core.blocks(batch, n_r), n_r=n_r)
    exchange = ring.collective_cycles(n * batch, cores, n_r) + ring.collective_cycles(m * batch, cores, n_r)
    return forward.issue_cycles + backward.issue_cycles + 2 * core.COMMAND_LATENCY + exchange


def _forward_gemm_cycles(m, n, cores, config, batch):
    """The forward GEMM of a minibatch on ``cores`` cores with the all-gather of its outputs:
    the forward half of :func:`_gemm_cycles`."""
    n_r = config.n_r
    forward = core.schedule(core.OP_GEMM, core.blocks(-(-n // cores), n_r), core.blocks(m, n_r),
                            core.blocks(batch, n_r), n_r=n_r)
    return forward.issue_cycles + core.COMMAND_LATENCY + ring.collective_cycles(n * batch, cores, n_r)


def _feedback_gemm_cycles(outputs, width, cores, config, batch):
    """DFA's backward GEMM of one hidden layer for a minibatch: ``B_i^T E`` (``outputs`` x ``batch``
    output errors in, ``width`` x ``batch`` out) in column panels, then one collective of the result."""
    n_r = config.n_r
    feedback = core.schedule(core.OP_GEMM, core.blocks(-(-width // cores), n_r), core.blocks(outputs, n_r),
                             core.blocks(batch, n_r), n_r=n_r)
    return feedback.issue_cycles + core.COMMAND_LATENCY + ring.collective_cycles(width * batch, cores, n_r)


def _group_allocation(shapes, cores):
    """CP mapping "layer groups": each layer on its own group of whole cores, at least one each, the
    rest in proportion to the weights (greedy on the heaviest load per core); ``None`` when there are
    more layers than cores. Returned as :func:`cp_allocation` pieces."""
    if len(shapes) > cores:
        return None
    weights = [m * n for m, n in shapes]
    allocation = [1] * len(shapes)
    for _ in range(cores - len(shapes)):
        load = [w / a for w, a in zip(weights, allocation)]
        allocation[load.index(max(load))] += 1
    pieces = []
    for layer, ((m, _), group) in enumerate(zip(shapes, allocation)):
        rows = [m // group + (1 if index < m % group else 0) for index in range(group)]
        pieces.extend([(layer, count)] for count in rows)
    return pieces


def _even_allocation(shapes, cores):
    """CP mapping "equal shares": the layers' weights, in layer order, cut into ``cores`` equal
    contiguous shares (at whole rows of a layer); a layer may span several cores (its row panels are
    reduced across them as in the paper's Fig. 4) and a core may hold the end of one layer and the
    start of the next (it runs both in every pipeline step). Returned as :func:`cp_allocation` pieces."""
    total = sum(m * n for m, n in shapes)
    pieces = [[] for _ in range(cores)]
    start = 0
    for layer, (m, n) in enumerate(shapes):
        cuts = [min(m, max(0, round((k * total / cores - start) / n))) for k in range(cores + 1)]
        cuts[0], cuts[-1] = 0, m
        for k in range(cores):
            if cuts[k + 1] > cuts[k]:
                pieces[k].append((layer, cuts[k + 1] - cuts[k]))
        start += m * n
    return pieces


def _shared_allocation(shapes, cores):
    """CP mapping "every layer on every core" (SGD's mapping, Section 3.3): each core holds a row
    panel of every layer. Returned as :func:`cp_allocation` pieces."""
    return [[(layer, m // cores + (1 if k < m % cores else 0)) for layer, (m, _) in enumerate(shapes)
             if m // cores + (1 if k < m % cores else 0) > 0] for k in range(cores)]


def _stage_cycles(shapes, pieces, config, streamed):
    """Cycles of one CP pipeline step on the mapping ``pieces``: the slowest core's pieces, each a
    forward and a backward GEMV with overlapped reductions on the core's row panel, the exchange
    across the cores that share the layer, and the rank-1 update; a streamed piece (the network does
    not fit) takes at least its weight transfer from the off-core SRAM."""
    n_r = config.n_r
    sharing = [0] * len(shapes)
    for core_pieces in pieces:
        for layer, _ in core_pieces:
            sharing[layer] += 1
    slowest = 0
    for core_pieces in pieces:
        total = 0
        for layer, rows in core_pieces:
            m, n = shapes[layer]
            group = sharing[layer]
            mb, nb = core.blocks(rows, n_r), core.blocks(n, n_r)
            forward = _ring_gemv(ring.RING_GEMV_FORWARD, rows, n, group, config, True)
            backward = _ring_gemv(ring.RING_GEMV_BACKWARD, rows, n, group, config, True)
            update = core.schedule(core.OP_UPDATE, mb, nb, 1, n_r=n_r)
            exchange = ring.collective_cycles(n, group, n_r) + ring.collective_cycles(m, group, n_r)
            compute = forward + backward + update.issue_cycles + core.COMMAND_LATENCY + exchange
            total += max(compute, streamed * rows * n / config.offcore_words_per_cycle)
        slowest = max(slowest, total)
    return slowest


def cp_allocation(shapes, config, streamed=False):
    """The CP mapping of layers onto cores: the fastest of three mappings.

    The paper (Section 3.3): "larger layers must be assigned to more cores to
    keep the cores busy with a stream of activations", a layer may span a
    non-square array of cores (Fig. 4), and "the mapping of CP and SGD are
    therefore similar" (SGD runs every layer on all cores). So the candidates
    are: each layer on its own group of whole cores (:func:`_group_allocation`,
    when there are at most as many layers as cores), equal contiguous shares of
    the weights (:func:`_even_allocation`), and every layer on every core
    (:func:`_shared_allocation`, SGD's mapping); the one with the fewest cycles
    per pipeline step is taken (ties: that order). With SGD's mapping a
    candidate, CP's step is SGD's per-sample work with the reductions
    overlapped (the backward GEMV on each core's row panel), so CP's
    utilization is not capped below SGD's by the mapping.

    Parameters
    ----------
    shapes : list of (int, int)
        ``(m_i, n_i)`` of the layers.
    config : Config
    streamed : bool
        The weights stream from the off-core SRAMs (the network does not fit).

    Returns
    -------
    dict
        ``mapping`` (``"groups"``, ``"equal shares"`` or ``"every core"``), ``pieces`` (per core the
        list of ``(layer, rows)`` row panels it holds) and ``stage_cycles``.
    """
    best = None
    for name, allocate in (("groups", _group_allocation), ("equal shares", _even_allocation),
                           ("every core", _shared_allocation)):
        pieces = allocate(shapes, config.cores)
        if pieces is None:
            continue
        stage = _stage_cycles(shapes, pieces, config, int(streamed))
        if best is None or stage < best["stage_cycles"]:
            best = {"mapping": name, "pieces": pieces, "stage_cycles": stage}
    return best


def epoch_cycles(widths, method, samples, config, batch=1):
    """Cycles of one epoch and the MAC utilization, from the mapped microprograms' schedules.

    SGD, FA with ``batch == 1``: every layer on all cores in turn (GEMV
    without overlap, then the rank-1 update). DFA with ``batch == 1``: every
    layer's forward GEMV and rank-1 update on all cores, and instead of the
    backward GEMVs through ``W_i`` one GEMV ``B_i^T e`` per hidden layer from
    the output error (:func:`_feedback_cycles`). CP: the mapping of
    :func:`cp_allocation` with overlapped reductions; the slowest core sets
    the rate of the pipeline, which fills and drains in ``2 L`` steps. MBGD
    (and FA with ``batch > 1``): GEMMs on all cores with all-gather and
    reduce-scatter; DFA with ``batch > 1`` the forward GEMMs and the feedback
    GEMMs. When the network does not fit, the weight accesses of SGD, FA,
    DFA and CP stream from the off-core SRAMs at ``offcore_words_per_cycle``
    per core, and a layer takes the longer of its compute and its weight
    transfer.

    Returns
    -------
    dict
        ``cycles``, ``utilization``, ``seconds``; for CP also ``cp_mapping``.
    """
    shapes = layer_shapes(widths)
    cores = config.cores
    outputs = widths[-1]
    counts = epoch_counts(widths, method, samples, batch)
    local = fits(widths, config)
    streamed = 0 if local or method not in ("SGD", "CP", "FA", "DFA") or batch > 1 else 1
    extra = {}
    if method == "CP":
        mapping = cp_allocation(shapes, config, streamed=bool(streamed))
        stage = mapping["stage_cycles"]
        cycles = samples * stage + 2 * len(shapes) * stage
        extra["cp_mapping"] = mapping["mapping"]
    elif method == "DFA" and batch == 1:
        per_sample = 0
        for index, (m, n) in enumerate(shapes):
            compute = _forward_cycles(m, n, cores, config) + _update_cycles(m, n, cores, config, 1)
            words = 2 * m * n
            if index < len(shapes) - 1:
                compute += _feedback_cycles(outputs, n, cores, config)
                words += outputs * n
            per_sample += max(compute, streamed * words / (cores * config.offcore_words_per_cycle))
        cycles = samples * per_sample
    elif batch == 1 and method != "MBGD":
        per_sample = 0
        for m, n in shapes:
            compute = _gemv_cycles(m, n, cores, config, overlap=False) + _update_cycles(m, n, cores, config, 1)
            transfer = streamed * 2 * m * n / (cores * config.offcore_words_per_cycle)
            per_sample += max(compute, transfer)
        cycles = samples * per_sample
    elif method == "DFA":
        per_batch = sum(_forward_gemm_cycles(m, n, cores, config, batch) + _update_cycles(m, n, cores, config, batch)
                        for m, n in shapes)
        per_batch += sum(_feedback_gemm_cycles(outputs, n, cores, config, batch) for _, n in shapes[:-1])
        cycles = math.ceil(samples / batch) * per_batch
    else:
        per_batch = sum(_gemm_cycles(m, n, cores, config, batch) + _update_cycles(m, n, cores, config, batch)
                        for m, n in shapes)
        cycles = math.ceil(samples / batch) * per_batch
    utilization = counts["macs"] / (cycles * config.pes)
    return {"cycles": int(cycles), "utilization": utilization, "seconds": cycles / config.frequency_hz, **extra}


def section34_energy(widths, method, samples, config, batch=1, partly_resident=False, gradient_in_sram=False,
                     offcore_when_no_fit=False, update_write=False):
    """Energy of one epoch (J) from the paper's Section 3.4 counts alone (the former model, for comparison).

    ``3 K sum m n`` MACs (DFA: fewer) and the weight accesses of :func:`epoch_counts`, read from the local
    SRAM when the network fits or the method is minibatched (``offcore_when_no_fit``: only when the network
    fits), else from the off-core SRAM; nothing else.

    Three hypotheses about the paper's Table 2 (tested, not fitted; see the README):

    - ``update_write``: the in-place update writes every weight once per update, one more access per
      weight per update than Section 3.4 counts;
    - ``partly_resident``: when the network does not fit, the share of the weights that the local SRAMs
      hold (``pes * local_words / weights``) is accessed locally, the rest off-core;
    - ``gradient_in_sram``: a minibatch method accumulates each sample's gradient into a ``dW`` kept in
      the local SRAMs, one read and one write of every ``dW`` word per sample.

    Returns
    -------
    dict
        ``fpu_j``, ``memory_j``, ``total_j``, ``gflops_per_w`` (one operation per MAC), ``gflops_per_w_2``.
    """
    counts = epoch_counts(widths, method, samples, batch)
    local = fits(widths, config) or (batch > 1 and method != "CP" and not offcore_when_no_fit)
    per_word = TABLE1["local_sram_pj_per_word" if local else "offcore_sram_pj_per_word"]
    weights = sum(m * n for m, n in layer_shapes(widths))
    if partly_resident and not local:
        share = min(1.0, config.pes * config.local_words / weights)
        per_word = share * TABLE1["local_sram_pj_per_word"] + (1 - share) * TABLE1["offcore_sram_pj_per_word"]
    fpu = counts["macs"] * TABLE1["fpu_pj"] * 1e-12
    accesses = counts["weight_accesses"] + (samples / batch * weights if update_write else 0)
    memory = accesses * per_word * 1e-12
    if gradient_in_sram and batch > 1:
        memory += 2 * samples * weights * TABLE1["local_sram_pj_per_word"] * 1e-12
    total = fpu + memory
    return {"fpu_j": fpu, "memory_j": memory, "total_j": total,
            "gflops_per_w": counts["macs"] / total / 1e9, "gflops_per_w_2": 2 * counts["macs"] / total / 1e9}


#: Table 1's energy of each counted event (pJ): an FPU operation (a MAC, or an addition: a reduction step
#: or the UPDATE's subtraction) for ``fpu_pj``; a 16-bit word of a PE's local SRAM, or of the vector and
#: error buffers (the vector elements the paper keeps in the PEs' 16 KB memories), for
#: ``local_sram_pj_per_word``; a 16-bit word in or out of the core (its off-core SRAM) for
#: ``offcore_sram_pj_per_word`` (a result is one half-precision word, as on the paper's FPU).
EVENT_PJ = {
    CoreEvent.MAC: TABLE1["fpu_pj"], CoreEvent.ADD: TABLE1["fpu_pj"],
    CoreEvent.LOCAL_READ: TABLE1["local_sram_pj_per_word"], CoreEvent.LOCAL_WRITE: TABLE1["local_sram_pj_per_word"],
    CoreEvent.BUFFER_READ: TABLE1["local_sram_pj_per_word"], CoreEvent.BUFFER_WRITE: TABLE1["local_sram_pj_per_word"],
    CoreEvent.OFFCORE_READ: TABLE1["offcore_sram_pj_per_word"], CoreEvent.OFFCORE_WRITE: TABLE1["offcore_sram_pj_per_word"],
}


def _panels(size, cores):
    """The sizes of ``size`` rows (or columns) cut into ``cores`` near-equal panels (the non-empty ones)."""
    return [size // cores + (1 if k < size % cores else 0) for k in range(cores) if size // cores + (k < size % cores)]


def store_events(mb, nb, n_r):
    """Events of writing ``Mb x Nb`` blocks of resident weights back to the off-core SRAM.

    ``cp_core`` has no STORE microprogram; this is its mirror of LOAD (each
    word read from its PE's SRAM and sent out of the core), used only where
    updated weights that do not fit must go back off-core.
    """
    events = dict.fromkeys(CoreEvent, 0)
    events[CoreEvent.LOCAL_READ] = events[CoreEvent.OFFCORE_WRITE] = n_r * n_r * mb * nb
    return events


def _accumulate(total, events, times=1):
    for event, count in events.items():
        total[event] += times * count


def _layer_step_programs(m, n, method, config, batch, staged, outputs, hidden, pieces_rows=None, padded=True):
    """The microprograms one layer's step (a sample, or a minibatch) runs on the cores, as
    ``(op, mb, nb, qb)`` tuples and the stored blocks ``(mb, nb)`` (weights sent back off-core)."""
    n_r, cores = config.n_r, config.cores
    blocks = core.blocks if padded else (lambda size, n_r: size / n_r)
    programs, stores = [], []
    rows = pieces_rows if pieces_rows is not None else _panels(m, cores)
    if batch == 1 and method != "MBGD":
        for panel in rows:
            mb, nb = blocks(panel, n_r), blocks(n, n_r)
            programs.append((core.OP_GEMV_FORWARD, mb, nb, 1))
            if method != "DFA":
                programs.append((core.OP_GEMV_BACKWARD, mb, nb, 1))
            programs.append((core.OP_UPDATE, mb, nb, 1))
            if staged:  # the weights in for the forward pass, in again for the backward pass and update, out
                programs += [(core.OP_LOAD, mb, nb, 1)] * 2
                stores.append((mb, nb))
        if method == "DFA" and hidden:  # B_i^T e: the n_L output errors in, B_i (n_L x n) in column panels
            for panel in _panels(n, cores):
                programs.append((core.OP_GEMV_FORWARD, blocks(outputs, n_r), blocks(panel, n_r), 1))
                if staged:
                    programs.append((core.OP_LOAD, blocks(outputs, n_r), blocks(panel, n_r), 1))
        return programs, stores
    qb = blocks(batch, n_r)
    for panel in _panels(n, cores):  # forward GEMM: W^T in row panels of its n rows, times the m x b inputs
        programs.append((core.OP_GEMM, blocks(panel, n_r), blocks(m, n_r), qb))
        if staged:
            programs.append((core.OP_LOAD, blocks(panel, n_r), blocks(m, n_r), 1))
    for panel in rows:
        mb, nb = blocks(panel, n_r), blocks(n, n_r)
        if method != "DFA":  # backward GEMM: W in row panels times the n x b errors
            programs.append((core.OP_GEMM, mb, nb, qb))
        programs.append((core.OP_UPDATE, mb, nb, batch))
        if staged:
            programs.append((core.OP_LOAD, mb, nb, 1))
            stores.append((mb, nb))
    if method == "DFA" and hidden:
        for panel in _panels(n, cores):
            programs.append((core.OP_GEMM, blocks(panel, n_r), blocks(outputs, n_r), qb))
            if staged:
                programs.append((core.OP_LOAD, blocks(panel, n_r), blocks(outputs, n_r), 1))
    return programs, stores


def step_events(widths, method, config, batch=1):
    """Events of one step of training on the array: a sample (``batch == 1``) or a minibatch.

    The sum over the layers, and over the cores, of the counts of the
    ``cp_core`` microprograms each core runs (:func:`trainforge.golden.caterpillar.core.counts`,
    checked against the RTL's enables), in the mapping of :func:`epoch_cycles`:

    - SGD, FA (``batch == 1``): per layer and core, on the core's row panel, a forward and a
      backward GEMV and a rank-1 UPDATE (its read-modify-write of every weight counted);
    - DFA (``batch == 1``): the forward GEMV and the UPDATE, and per hidden layer the GEMV
      ``B_i^T e`` on ``B_i`` in column panels, instead of the backward GEMV;
    - CP: the same three commands as SGD on each core's pieces of :func:`cp_allocation` (the
      built core runs no fused pass: each weight is read by the forward GEMV, by the backward
      GEMV and by the UPDATE, and written by the UPDATE);
    - MBGD (and FA, DFA with ``batch > 1``): per layer a forward GEMM (``W^T`` in row panels),
      a backward GEMM (``W`` in row panels; DFA: ``B_i^T`` instead), a rank-``b`` UPDATE; a
      GEMM re-reads ``W`` once per block of ``n_r`` columns of its ``b``-column operand and
      streams that operand in once per row block of its result, as its schedule does.

    When the network does not fit (:func:`fits`), every method's weights live off-core: each
    pass that reads them is preceded by a LOAD (off-core reads, local writes), and updated
    weights go back off-core (:func:`store_events`).

    Returns
    -------
    dict
        ``{CoreEvent: int}``.
    """
    total = dict.fromkeys(CoreEvent, 0)
    for events in step_events_by_program(widths, method, config, batch).values():
        _accumulate(total, events)
    return total


#: The microprograms of :func:`step_events_by_program` (``STORE``: :func:`store_events`, not a ``cp_core`` command).
PROGRAMS = tuple(op.name for op in core.CoreOp) + ("STORE",)


@functools.lru_cache(maxsize=256)
def step_events_by_program(widths, method, config, batch=1, padded=True):
    """:func:`step_events` per microprogram: ``{name: {CoreEvent: int}}`` over :data:`PROGRAMS`.

    ``padded=False`` (a counterfactual): block counts are the exact fractions ``size / n_r``, so that the
    counts (polynomials in the block counts) leave out the zero padding.
    """
    shapes = layer_shapes(widths)
    staged = not fits(widths, config)
    outputs = widths[-1]
    by_program = {name: dict.fromkeys(CoreEvent, 0) for name in PROGRAMS}
    pieces = None
    if method == "CP":
        pieces = cp_allocation(shapes, config, streamed=staged)["pieces"]
    for index, (m, n) in enumerate(shapes):
        rows = None if pieces is None else [r for core_pieces in pieces for layer, r in core_pieces if layer == index]
        programs, stores = _layer_step_programs(m, n, method, config, batch, staged, outputs,
                                                hidden=index < len(shapes) - 1, pieces_rows=rows, padded=padded)
        for op, mb, nb, qb in programs:
            _accumulate(by_program[core.CoreOp(op).name], core.counts(op, mb, nb, qb, n_r=config.n_r))
        for mb, nb in stores:
            _accumulate(by_program["STORE"], store_events(mb, nb, config.n_r))
    return by_program


def epoch_events(widths, method, samples, config, batch=1):
    """Events of one epoch: :func:`step_events` times the steps (``ceil(samples / batch)``), ``{CoreEvent: int}``."""
    steps = math.ceil(samples / batch)
    return {event: steps * count for event, count in step_events(tuple(widths), method, config, batch).items()}


def price(events, macs, energies=None):
    """Energy of counted events with Table 1's energies (:data:`EVENT_PJ`, or ``energies``).

    Parameters
    ----------
    events : dict
        ``{CoreEvent: count}``.
    macs : int
        The useful MACs done (the numerator of GFLOPS/W).

    Returns
    -------
    dict
        ``fpu_j``, ``local_j`` (local SRAMs), ``buffer_j`` (vector and error buffers), ``offcore_j``,
        ``memory_j`` (the three memories), ``total_j``, ``gflops_per_w`` (one operation per useful MAC,
        Table 2's unit), ``gflops_per_w_2`` (two), ``pj_per_mac`` (per event kind, per useful MAC).
    """
    energies = EVENT_PJ if energies is None else energies
    joules = {event: events[event] * energies[event] * 1e-12 for event in CoreEvent}
    fpu = joules[CoreEvent.MAC] + joules[CoreEvent.ADD]
    local = joules[CoreEvent.LOCAL_READ] + joules[CoreEvent.LOCAL_WRITE]
    buffer = joules[CoreEvent.BUFFER_READ] + joules[CoreEvent.BUFFER_WRITE]
    offcore = joules[CoreEvent.OFFCORE_READ] + joules[CoreEvent.OFFCORE_WRITE]
    total = fpu + local + buffer + offcore
    return {"fpu_j": fpu, "local_j": local, "buffer_j": buffer, "offcore_j": offcore,
            "memory_j": local + buffer + offcore, "total_j": total,
            "gflops_per_w": macs / total / 1e9, "gflops_per_w_2": 2 * macs / total / 1e9,
            "pj_per_mac": {event.name: joules[event] / macs * 1e12 for event in CoreEvent}}


def epoch_energy(widths, method, samples, config, batch=1):
    """Energy of one epoch (J), priced from the counted events of the microprograms (:func:`epoch_events`).

    Every MAC, addition, local-SRAM and buffer access and off-core word of the
    ``cp_core`` microprograms that train the network, at Table 1's energies
    (:data:`EVENT_PJ`); GFLOPS/W over the useful MACs of :func:`epoch_counts`
    (padding MACs cost energy but do no useful work). The ring's transfers
    are not priced (the paper: "the energy of broadcasts was found to be negligible").

    Returns
    -------
    dict
        As :func:`price`, with ``events`` (``{event name: count}``) and ``macs`` (useful).
    """
    events = epoch_events(widths, method, samples, config, batch)
    macs = epoch_counts(widths, method, samples, batch)["macs"]
    return {**price(events, macs), "events": {event.name: count for event, count in events.items()}, "macs": macs}


#: The counterfactuals of the deviations from Table 2, applied cumulatively in this order: each removes
#: from the counted events something the paper's Section 3.4 count leaves out (the explanation it tests);
#: with all of them the counts are Section 3.4's (weights priced off-core when the network does not fit,
#: for MBGD too).
COUNTERFACTUALS = (
    ("no UPDATE subtraction", "the write-back's subtraction W - round(P / 2**shift), one FPU addition per "
                              "weight per update, is not among the 3 K sum m n FPU operations"),
    ("no reduction adds", "the reduction's n_r (n_r - 1) additions per GEMV output block are not counted"),
    ("no UPDATE read-modify-write", "Section 3.4 counts the weight accesses of the forward and backward "
                                    "passes only, not the update's read and write of every weight"),
    ("no vector re-reads", "the vector and error buffers (x or e read again for every output block, x_s "
                           "for every UPDATE MAC) are taken as negligible"),
    ("no activation traffic", "the operands streamed into and the results out of the core (activations, "
                              "errors, a GEMM's B and C) are taken as negligible"),
    ("no padding", "the MACs and weight accesses on the zero padding of partial n_r x n_r blocks (and of the "
                   "minibatch to whole blocks of n_r columns) are not counted"),
    ("one W read per GEMM", "a GEMM reads each weight once, not once per block of n_r columns of B (Qb "
                            "times) as its schedule does"),
    ("no weight staging", "weights that do not fit are accessed off-core in place: no LOAD into the local "
                          "SRAMs before a pass and no STORE after the update, one off-core read per pass"),
    ("fused CP pass", "CP reads each weight once for its forward and backward pass (Section 3.4), which "
                      "the built core does not (its backward GEMV reads the weight again)"),
)


def counterfactual_energy(widths, method, samples, config, batch=1, upto=len(COUNTERFACTUALS)):
    """:func:`epoch_energy` with the first ``upto`` :data:`COUNTERFACTUALS` applied (the runs that test them).

    Returns
    -------
    dict
        As :func:`price`.
    """
    applied = {name for name, _ in COUNTERFACTUALS[:upto]}
    steps = math.ceil(samples / batch)
    by_program = {name: dict(events) for name, events in step_events_by_program(
        tuple(widths), method, config, batch, padded="no padding" not in applied).items()}
    macs = epoch_counts(widths, method, samples, batch)["macs"]

    def drop(programs, *events):
        for name in programs:
            for event in events:
                by_program[name][event] = 0

    if "no UPDATE subtraction" in applied:
        drop(["UPDATE"], CoreEvent.ADD)
    if "no reduction adds" in applied:
        drop(PROGRAMS, CoreEvent.ADD)
    if "no UPDATE read-modify-write" in applied:
        drop(["UPDATE"], CoreEvent.LOCAL_READ, CoreEvent.LOCAL_WRITE)
    if "no vector re-reads" in applied:
        drop(PROGRAMS, CoreEvent.BUFFER_READ, CoreEvent.BUFFER_WRITE)
    if "no activation traffic" in applied:
        drop(["GEMV_FORWARD", "GEMV_BACKWARD", "GEMM", "UPDATE"], CoreEvent.OFFCORE_READ, CoreEvent.OFFCORE_WRITE)
    if "one W read per GEMM" in applied and by_program["GEMM"][CoreEvent.LOCAL_READ]:
        # Qb reads of every weight per GEMM: each GEMM's own Qb (the same for all GEMMs of a step)
        qb = core.blocks(batch, config.n_r) if "no padding" not in applied else batch / config.n_r
        by_program["GEMM"][CoreEvent.LOCAL_READ] /= qb
    staged = by_program["LOAD"][CoreEvent.OFFCORE_READ] > 0
    if "no weight staging" in applied and staged:
        drop(["LOAD"], CoreEvent.LOCAL_WRITE)
        drop(["STORE"], CoreEvent.LOCAL_READ, CoreEvent.OFFCORE_WRITE)
        drop(["GEMV_FORWARD", "GEMV_BACKWARD", "GEMM"], CoreEvent.LOCAL_READ)
    if "fused CP pass" in applied and method == "CP":
        drop(["GEMV_BACKWARD"], CoreEvent.LOCAL_READ)
        for event in (CoreEvent.OFFCORE_READ, CoreEvent.LOCAL_WRITE):
            by_program["LOAD"][event] /= 2  # one LOAD per sample for both passes, not two
    total = dict.fromkeys(CoreEvent, 0)
    for events in by_program.values():
        _accumulate(total, events, steps)
    return price(total, macs)


def area_mm2(config):
    """Area from Table 1: one FPU and one 16 KB SRAM per PE, one 512 KB off-core SRAM per core."""
    return (config.pes * (TABLE1["fpu_mm2"] + TABLE1["local_sram_mm2"])
            + config.cores * TABLE1["offcore_sram_mm2"])


def gflops_per_mm2(utilization, config, area=None):
    """Performance density (Fig. 10): MACs per second at ``utilization`` over the area, in G/mm^2.

    ``utilization * pes * frequency_hz / 1e9 / area``; one operation per MAC
    (the unit of Table 2's GFLOPS/W); twice this counts 2 FLOPs per MAC.

    Parameters
    ----------
    utilization : float
    config : Config
    area : float, optional
        mm^2; default :func:`area_mm2` (Table 1's components).
    """
    return utilization * config.pes * config.frequency_hz / 1e9 / (area_mm2(config) if area is None else area)
