"""Architecture model of CATERPILLAR: memory fit, MAC and weight-access counts, cycles, energy, area.

Everything is derived from the paper's Section 3.4 counts, its Table 1
energies and areas, and the cycle schedules of the mapped microprograms
(:mod:`trainforge.golden.caterpillar.core` and ``.ring``); no utilization is
a constant.
"""
import math
from dataclasses import dataclass

from trainforge.errors import ConfigError
from trainforge.golden.caterpillar import core, ring
from trainforge.spec import network as network_format

__all__ = ["TABLE1", "Config", "CONFIGS", "BUILTIN_NETWORKS", "NETWORKS", "widths_from_network", "layer_shapes", "memory_per_pe", "fits",
           "epoch_counts", "epoch_cycles", "epoch_energy", "area_mm2", "METHODS"]

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
        timesteps, reading another layer than the previous one, or whose
        inputs are not the previous layer's outputs); one line naming it.
    """
    source = source or f"network {description.name!r}"
    widths = [description.layers[0].in_channels]
    for index, layer in enumerate(description.layers):
        where = f"{source}: layers[{index}]"
        if layer.kind != "fc":
            raise ConfigError(f"{where}.kind: CATERPILLAR trains chains of fc layers, got {layer.kind} "
                              f"(layer {layer.name!r})")
        for key, default in (("timesteps", 1), ("input_from", None), ("residual_from", None)):
            if getattr(layer, key) != default:
                raise ConfigError(f"{where}.{key}: CATERPILLAR trains plain chains of fc layers, got "
                                  f"{getattr(layer, key)!r} (layer {layer.name!r})")
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


def _gemv_cycles(m, n, cores, config, overlap):
    """Forward + backward GEMV of an ``m x n`` layer split in row panels over ``cores`` cores, with the
    cross-core reduction (reduce-scatter then all-gather) of the outputs."""
    n_r = config.n_r
    mb = core.blocks(-(-m // cores), n_r)
    nb = core.blocks(n, n_r)
    forward = core.schedule(core.OP_GEMV_FORWARD, mb, nb, n_r=n_r, reduction=config.reduction, overlap=overlap)
    backward_mb = core.blocks(m, n_r)
    backward_nb = core.blocks(-(-n // cores), n_r)
    backward = core.schedule(core.OP_GEMV_BACKWARD, backward_mb, backward_nb, n_r=n_r,
                             reduction=config.reduction, overlap=overlap)
    exchange = 2 * ring.collective_cycles(n, cores, n_r) + 2 * ring.collective_cycles(m, cores, n_r)
    return (forward.issue_cycles + backward.issue_cycles + 2 * core.COMMAND_LATENCY + exchange)


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


def _core_allocation(shapes, cores):
    """Cores per layer for the CP pipeline: at least one each, the rest in proportion to the weights."""
    weights = [m * n for m, n in shapes]
    allocation = [1] * len(shapes)
    for _ in range(cores - len(shapes)):
        load = [w / a for w, a in zip(weights, allocation)]
        allocation[load.index(max(load))] += 1
    return allocation


def epoch_cycles(widths, method, samples, config, batch=1):
    """Cycles of one epoch and the MAC utilization, from the mapped microprograms' schedules.

    SGD, FA, DFA with ``batch == 1``: every layer on all cores in turn (GEMV
    without overlap, then the rank-1 update). CP: layers pipelined over
    disjoint groups of cores with overlapped reductions; the slowest stage
    sets the rate. MBGD (and FA, DFA with ``batch > 1``): GEMMs on all cores
    with all-gather and reduce-scatter. When the network does not fit, the
    weight accesses of SGD and CP stream from the off-core SRAMs at
    ``offcore_words_per_cycle`` per core, and a layer takes the longer of its
    compute and its weight transfer.

    Returns
    -------
    dict
        ``cycles``, ``utilization``, ``seconds``.
    """
    shapes = layer_shapes(widths)
    cores = config.cores
    counts = epoch_counts(widths, method, samples, batch)
    local = fits(widths, config)
    streamed = 0 if local or method not in ("SGD", "CP", "FA", "DFA") or batch > 1 else 1
    if method == "CP":
        allocation = _core_allocation(shapes, cores)
        stage = []
        for (m, n), group in zip(shapes, allocation):
            compute = _gemv_cycles(m, n, group, config, overlap=True) + _update_cycles(m, n, group, config, 1)
            transfer = streamed * m * n / (group * config.offcore_words_per_cycle)
            stage.append(max(compute, transfer))
        cycles = samples * max(stage) + 2 * len(shapes) * max(stage)
    elif batch == 1 and method != "MBGD":
        per_sample = 0
        for m, n in shapes:
            compute = _gemv_cycles(m, n, cores, config, overlap=False) + _update_cycles(m, n, cores, config, 1)
            transfer = streamed * 2 * m * n / (cores * config.offcore_words_per_cycle)
            per_sample += max(compute, transfer)
        cycles = samples * per_sample
    else:
        per_batch = sum(_gemm_cycles(m, n, cores, config, batch) + _update_cycles(m, n, cores, config, batch)
                        for m, n in shapes)
        cycles = math.ceil(samples / batch) * per_batch
    utilization = counts["macs"] / (cycles * config.pes)
    return {"cycles": int(cycles), "utilization": utilization, "seconds": cycles / config.frequency_hz}


def epoch_energy(widths, method, samples, config, batch=1):
    """Energy of one epoch (J): FPU and weight-access energy (broadcasts and activations neglected, as in the paper).

    Weights are read from the local SRAM when the network fits or the method
    is minibatched with weights staged locally per GEMM, else from the off-core SRAM.

    Returns
    -------
    dict
        ``fpu_j``, ``memory_j``, ``total_j``; ``gflops_per_w`` counts one operation per FPU
        operation (a MAC), the unit of Table 1's energy per op; ``gflops_per_w_2`` counts two.
    """
    counts = epoch_counts(widths, method, samples, batch)
    local = fits(widths, config) or (batch > 1 and method != "CP")
    per_word = TABLE1["local_sram_pj_per_word" if local else "offcore_sram_pj_per_word"]
    fpu = counts["macs"] * TABLE1["fpu_pj"] * 1e-12
    memory = counts["weight_accesses"] * per_word * 1e-12
    total = fpu + memory
    return {"fpu_j": fpu, "memory_j": memory, "total_j": total,
            "gflops_per_w": counts["macs"] / total / 1e9, "gflops_per_w_2": 2 * counts["macs"] / total / 1e9}


def area_mm2(config):
    """Area from Table 1: one FPU and one 16 KB SRAM per PE, one 512 KB off-core SRAM per core."""
    return (config.pes * (TABLE1["fpu_mm2"] + TABLE1["local_sram_mm2"])
            + config.cores * TABLE1["offcore_sram_mm2"])
