"""Five-tier architecture template (paper Section II-B, Fig. 3) and its config file.

PE -> PE array -> core -> chip -> system. Every compute, memory and
interconnect parameter is declared once here; the default is the paper's
Fig. 10 system (64 chips as a 4x16 torus, 8 PFLOPs FP16 peak).
"""
from dataclasses import asdict, dataclass, field, fields, replace
import math

from trainforge.checks import check_range
from trainforge.errors import ConfigError, ParameterError
from trainforge.sim.dsm.workload import load_document
from trainforge.spec.params import Param


def _check(owner, name, value, low, high, integer=True):
    check_range(f"{owner}.{name}", value, low, high, kind="integer" if integer else "number")


@dataclass(frozen=True)
class PEConfig:
    """Processing element: register file plus SIMD MACs.

    Parameters
    ----------
    simd_lanes : int
        MAC lanes per PE; the lanes work on the ``in`` dimension.
    register_file_bytes : int
        Register file per PE (operand staging; not a capacity constraint of the model).
    """

    simd_lanes: int = 4
    register_file_bytes: int = 256

    def __post_init__(self):
        _check("pe", "simd_lanes", self.simd_lanes, 1, 1024)
        _check("pe", "register_file_bytes", self.register_file_bytes, 1, 1 << 20)


@dataclass(frozen=True)
class ArrayConfig:
    """2D systolic PE array. Rows work on ``out``, columns on ``ij x mb``.

    Parameters
    ----------
    rows, cols : int
        PE rows and columns. With the PE lanes they define the minimum work
        ``P = {in: simd_lanes, out: rows, ij*mb: cols, kij: 1}`` that fills the array.
    """

    rows: int = 16
    cols: int = 16

    def __post_init__(self):
        _check("array", "rows", self.rows, 1, 4096)
        _check("array", "cols", self.cols, 1, 4096)


@dataclass(frozen=True)
class CoreConfig:
    """Core: PE arrays, private scratchpad and special-function processors (SFPs).

    Parameters
    ----------
    arrays : int
        PE arrays per core (work is split evenly over them along ``ij x mb``).
    sfp_lanes : int
        SFP element operations per cycle (all SFPs of the core together).
    scratchpad_bytes : int
        Scratchpad capacity.
    scratchpad_bw : float
        Scratchpad port bandwidth in bytes/s, shared by data arriving from the
        chip interconnect and by the SFPs.
    stream_buffer_fraction : float
        Fraction of the scratchpad reserved for double-buffered streaming; the
        rest may hold data kept across layers (memory reuse, preloaded weights).
    """

    arrays: int = 1
    sfp_lanes: int = 64
    scratchpad_bytes: int = 1 << 20
    scratchpad_bw: float = 128e9
    stream_buffer_fraction: float = 0.25

    def __post_init__(self):
        _check("core", "arrays", self.arrays, 1, 64)
        _check("core", "sfp_lanes", self.sfp_lanes, 1, 1 << 16)
        _check("core", "scratchpad_bytes", self.scratchpad_bytes, 1 << 10, 1 << 34)
        _check("core", "scratchpad_bw", self.scratchpad_bw, 1e6, 1e14, integer=False)
        _check("core", "stream_buffer_fraction", self.stream_buffer_fraction, 0.05, 0.95, integer=False)


CHIP_TOPOLOGIES = ("ring", "splitbus")
_CHIP_TOPOLOGY = Param("chip.topology", str, "ring", "on-chip interconnect of the cores", choices=CHIP_TOPOLOGIES)


@dataclass(frozen=True)
class ChipConfig:
    """Chip: cores on a ring or split bus, with external memory.

    Parameters
    ----------
    cores : int
        Cores per chip (a power of two, so that balanced splits exist).
    topology : str
        ``ring`` (bidirectional ring, memory port on one stop) or ``splitbus``
        (two buses, each serving half of the cores, both reaching the memory port).
    core_to_core_bw : float
        Bandwidth of one ring link (per direction) or of one bus, bytes/s.
    ext_mem_bytes : int
        External memory (HBM) capacity.
    ext_mem_bw : float
        Peak external memory bandwidth, bytes/s.
    ext_mem_efficiency : float
        Achieved fraction of ``ext_mem_bw``.
    """

    cores: int = 32
    topology: str = "ring"
    core_to_core_bw: float = 256e9
    ext_mem_bytes: int = 8 << 30
    ext_mem_bw: float = 256e9
    ext_mem_efficiency: float = 0.8

    def __post_init__(self):
        _check("chip", "cores", self.cores, 1, 4096)
        if self.cores & (self.cores - 1):
            raise ParameterError(f"parameter 'chip.cores' = {self.cores!r} is invalid (not a power of two); "
                                 "allowed: a power of two in 1..4096")
        _CHIP_TOPOLOGY.check(self.topology)
        _check("chip", "core_to_core_bw", self.core_to_core_bw, 1e6, 1e14, integer=False)
        _check("chip", "ext_mem_bytes", self.ext_mem_bytes, 1 << 20, 1 << 44)
        _check("chip", "ext_mem_bw", self.ext_mem_bw, 1e6, 1e14, integer=False)
        _check("chip", "ext_mem_efficiency", self.ext_mem_efficiency, 0.01, 1.0, integer=False)

    @property
    def link_bw(self):
        """Bandwidth that carries data between the memory port and the cores, bytes/s.

        A bidirectional ring sends half of the traffic each way from the memory
        stop; a split bus has two buses. Both give twice the link bandwidth.
        """
        return 2 * self.core_to_core_bw


@dataclass(frozen=True)
class SystemConfig:
    """System: chips on a 2D torus with separate X and Y bandwidths.

    Parameters
    ----------
    chips_x, chips_y : int
        Torus shape ``M x N``.
    link_bw_x, link_bw_y : float
        Bandwidth out of each chip along X and along Y (both directions together), bytes/s.
    """

    chips_x: int = 4
    chips_y: int = 16
    link_bw_x: float = 80e9
    link_bw_y: float = 80e9

    def __post_init__(self):
        _check("system", "chips_x", self.chips_x, 1, 1024)
        _check("system", "chips_y", self.chips_y, 1, 1024)
        _check("system", "link_bw_x", self.link_bw_x, 1e6, 1e14, integer=False)
        _check("system", "link_bw_y", self.link_bw_y, 1e6, 1e14, integer=False)

    @property
    def chips(self):
        return self.chips_x * self.chips_y


@dataclass(frozen=True)
class Architecture:
    """The whole accelerator system.

    Parameters
    ----------
    pe, array, core, chip, system : dataclass
        The five tiers.
    frequency : float
        Clock in Hz.
    bytes_per_element : int
        Data type width (2 for FP16).
    """

    pe: PEConfig = field(default_factory=PEConfig)
    array: ArrayConfig = field(default_factory=ArrayConfig)
    core: CoreConfig = field(default_factory=CoreConfig)
    chip: ChipConfig = field(default_factory=ChipConfig)
    system: SystemConfig = field(default_factory=SystemConfig)
    frequency: float = 2e9
    bytes_per_element: int = 2

    def __post_init__(self):
        _check("architecture", "frequency", self.frequency, 1e6, 1e11, integer=False)
        _check("architecture", "bytes_per_element", self.bytes_per_element, 1, 8)

    @property
    def macs_per_array(self):
        return self.array.rows * self.array.cols * self.pe.simd_lanes

    @property
    def macs_per_core(self):
        return self.macs_per_array * self.core.arrays

    @property
    def peak_flops(self):
        """Peak FLOP/s (2 per MAC)."""
        return 2 * self.macs_per_core * self.chip.cores * self.system.chips * self.frequency

    def to_dict(self):
        return asdict(self)

    def with_changes(self, **changes):
        """Copy with dotted changes, e.g. ``with_changes(**{"system.chips_x": 8})``."""
        tiers = {name: getattr(self, name) for name in ("pe", "array", "core", "chip", "system")}
        top = {}
        for key, value in changes.items():
            tier, _, name = key.partition(".")
            if name:
                if tier not in tiers or name not in {f.name for f in fields(tiers[tier])}:
                    raise ConfigError(f"unknown architecture parameter {key!r}")
                tiers[tier] = replace(tiers[tier], **{name: value})
            else:
                if key not in ("frequency", "bytes_per_element"):
                    raise ConfigError(f"unknown architecture parameter {key!r}")
                top[key] = value
        return replace(self, **tiers, **top)


def default_architecture():
    """Paper Fig. 10, symmetric torus (80/80 GB/s)."""
    return Architecture()


def asymmetric(arch, x_share=0.75):
    """The asymmetric torus of Section III-A with the same total bandwidth per chip.

    ``x_share`` is the fraction of the per-chip bandwidth given to X. The paper
    argues for Y = X / M (``x_share = M / (M + 1)``, 128/32 GB/s for M = 4) but
    evaluates 120/40 GB/s, i.e. ``x_share = 0.75``, which is the default here.
    """
    check_range("x_share", x_share, 0.0, 1.0, kind="number", exclusive_minimum=True, exclusive_maximum=True)
    total = arch.system.link_bw_x + arch.system.link_bw_y
    return arch.with_changes(**{"system.link_bw_x": total * x_share, "system.link_bw_y": total * (1.0 - x_share)})


def architecture_from_dict(data, source="config"):
    """Build an :class:`Architecture` from ``{"pe": {...}, "chip": {...}, "frequency": ...}``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected an object of tiers")
    changes = {}
    for key, value in data.items():
        if isinstance(value, dict):
            for name, item in value.items():
                changes[f"{key}.{name}"] = item
        else:
            changes[key] = value
    try:
        return default_architecture().with_changes(**changes)
    except (ConfigError, ParameterError) as error:
        raise type(error)(f"{source}: {error}") from None


def load_architecture(path=None):
    """The default architecture, or one read from a JSON/YAML config file (missing keys keep Fig. 10 values)."""
    if path is None:
        return default_architecture()
    return architecture_from_dict(load_document(path), source=str(path))
