"""The single source of truth for every HyPar parameter.

All other modules of :mod:`trainforge.sim.hypar` read their numbers from the
dataclasses here; none of them hard-codes a batch size, a word width, a level
count, a bandwidth or an energy. Defaults are the paper's Section 6.1 setup.
"""
from dataclasses import dataclass

from trainforge.checks import check_range
from trainforge.spec.params import Param

#: Topologies the array simulator knows (see :mod:`trainforge.sim.hypar.topology`).
TOPOLOGIES = ("htree", "torus")


#: The ``topology`` parameter of :class:`ArrayConfig` (checks the value, names the choices).
TOPOLOGY = Param("topology", str, "htree", "accelerator array topology", choices=TOPOLOGIES)

#: Inter-layer conventions (see :mod:`trainforge.sim.hypar.comm`): whose tensors a boundary is charged with.
INTER_LAYER_CONVENTIONS = ("consumer", "producer")

#: The ``inter_layer`` parameter of :class:`TrainingSetup`.
INTER_LAYER = Param("inter_layer", str, "consumer", "tensors charged at a layer boundary",
                    choices=INTER_LAYER_CONVENTIONS)

#: Sizes of the partial sums a model-parallel layer exchanges (see :mod:`trainforge.sim.hypar.comm`).
PARTIAL_SUM_SIZES = ("pre_pooling", "post_pooling")

#: The ``mp_partial_sums`` parameter of :class:`TrainingSetup`.
MP_PARTIAL_SUMS = Param("mp_partial_sums", str, "pre_pooling", "size of the mp partial sums",
                        choices=PARTIAL_SUM_SIZES)


@dataclass(frozen=True)
class TrainingSetup:
    """What is trained (batch size, word width) and how its communication is counted.

    Parameters
    ----------
    batch : int
        Mini-batch size B (samples per training step), >= 1. Paper: 256.
    bytes_per_element : int
        Bytes of one tensor element, 1..8. Paper: fp32, 4 bytes.
    inter_layer : str
        ``"consumer"`` (default, the paper's Algorithm 1 and Table 2): the
        boundary into layer l is charged with layer l's own input map and
        error in layer l's current shape. ``"producer"``: it is charged with
        layer l-1's output in layer l-1's current shape (what the groups
        hold rather than what they need; see :mod:`trainforge.sim.hypar.comm`).
    mp_partial_sums : str
        ``"pre_pooling"`` (default): an mp layer exchanges its partial sums
        before pooling (max pooling does not commute with a sum).
        ``"post_pooling"``: sized after pooling, as the authors' public
        partitioner (AccPar, HyPar mode) counts them.
    """

    batch: int = 256
    bytes_per_element: int = 4
    inter_layer: str = "consumer"
    mp_partial_sums: str = "pre_pooling"

    def __post_init__(self):
        check_range("batch", self.batch, 1)
        check_range("bytes_per_element", self.bytes_per_element, 1, 8)
        INTER_LAYER.check(self.inter_layer)
        MP_PARTIAL_SUMS.check(self.mp_partial_sums)


@dataclass(frozen=True)
class ArrayConfig:
    """The accelerator array: size, topology and links.

    Parameters
    ----------
    levels : int
        Hierarchy levels H; the array has 2**H accelerators. 0..10. Paper: 4.
    topology : str
        ``"htree"`` (a fat tree: a link's bandwidth doubles at each level up)
        or ``"torus"`` (a 2D torus, every link at ``link_bits_per_second``).
    link_bits_per_second : float
        Bandwidth of one leaf link, per direction, > 0. Paper: 1600 Mb/s.
    """

    levels: int = 4
    topology: str = "htree"
    link_bits_per_second: float = 1.6e9

    def __post_init__(self):
        check_range("levels", self.levels, 0, 10)
        TOPOLOGY.check(self.topology)
        check_range("link_bits_per_second", self.link_bits_per_second, 0, kind="number", exclusive_minimum=True)

    @property
    def accelerators(self):
        """Number of accelerators, 2**levels."""
        return 2 ** self.levels


#: The paper's array node: one Eyeriss-like processing unit per HMC vault (Section 6.1, see NodeConfig).
UNITS_PER_HMC = 16


@dataclass(frozen=True)
class NodeConfig:
    """One accelerator (one HMC) for the default roofline compute model.

    Parameters
    ----------
    units_per_hmc : int
        Processing units in the HMC's logic die, one per vault, 1..1024.
        Default 16: Section 6.1 puts a unit in every vault, "Within an HMC
        vault (i.e., an Eyeriss accelerator and its local memory), we modeled
        the computation cost and the memory access between vaults"; the
        paper does not state the vault count. Its HMC figures ("the DRAM
        bandwidth is 320 GB/s and each HMC has 8 GB memory") are the peak of
        the 8-link HMC 1.0 cube, which has 16 vaults ("HMC 1.0 is composed of
        4 DRAM dies partitioned into 16 vaults", NeuroTrainer paper, Section
        3); the paper cites specification 2.1, whose vault count we did not
        check, hence a parameter. The units split each layer's work evenly
        and share the HMC's DRAM bandwidth; traffic between vaults is not
        modelled.
    macs_per_cycle : float
        Multiply-accumulates per cycle of one unit, > 0. Paper: 168 PEs, one MAC each
        (168 x 250 MHz x 2 ops = 84 GOPS).
    frequency_hz : float
        Clock, > 0. Paper: 250 MHz.
    dram_bytes_per_second : float
        Local HMC bandwidth (shared by its units), > 0. Paper: 320 GB/s.
    dram_capacity_bytes : float
        Local HMC capacity, > 0. Paper: 8 GB (documents the node; the timing model does not use it).
    buffer_bytes : float
        On-chip buffer, > 0. Paper: 108 KB (documents the node; the roofline
        model assumes each tensor is streamed from DRAM once per phase).
    """

    units_per_hmc: int = UNITS_PER_HMC
    macs_per_cycle: float = 168.0
    frequency_hz: float = 250e6
    dram_bytes_per_second: float = 320e9
    dram_capacity_bytes: float = 8 * 2 ** 30
    buffer_bytes: float = 108 * 1024

    def __post_init__(self):
        check_range("units_per_hmc", self.units_per_hmc, 1, 1024)
        for name in ("macs_per_cycle", "frequency_hz", "dram_bytes_per_second",
                     "dram_capacity_bytes", "buffer_bytes"):
            check_range(name, getattr(self, name), 0, kind="number", exclusive_minimum=True)


@dataclass(frozen=True)
class EnergyConfig:
    """Energy per 32-bit operation or access, in picojoules (paper, ref. [118]).

    Parameters
    ----------
    add_pj, multiply_pj, sram_pj, dram_pj : float
        fp32 add, fp32 multiply, SRAM access and DRAM access energies, >= 0.
    sram_accesses_per_mac : float
        Buffer accesses per MAC, >= 0. The paper leaves it open; 2 (one
        operand read and one partial-sum update from the buffer, the other
        operand held stationary in the PE) is our choice.
    """

    add_pj: float = 0.9
    multiply_pj: float = 3.7
    sram_pj: float = 5.0
    dram_pj: float = 640.0
    sram_accesses_per_mac: float = 2.0

    def __post_init__(self):
        for name in ("add_pj", "multiply_pj", "sram_pj", "dram_pj", "sram_accesses_per_mac"):
            check_range(name, getattr(self, name), 0, kind="number")
