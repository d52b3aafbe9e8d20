"""Time of a network layer's pass on one NeuroTrainer module, from the compiled programs.

The layer is compiled by the host compiler (``sim/neurotrainer/compiler.py``) for the module's
PEs, lanes and buffer sizes, and timed by :func:`~trainforge.sim.neurotrainer.program_time.layer_time`
(the programs' pass rows and PE pipeline costs, their PMAG request counts and set-up, the
vault and bus rates). Nothing here is a separate dataflow: a change of the compiler's mapping
changes these figures. The module's sizes are :class:`~trainforge.sim.neurotrainer.module.ModuleConfig`'s.

A grouped convolution is compiled for one group and runs ``groups`` times. The tiled
convolutions' im2col gather (data preparation, a copy through the common vault) is not a PE
program: its time is reported apart (``prep_seconds``), one read and one write of the common
vault per gathered word.
"""
import math
from dataclasses import dataclass, field, replace

from ...errors import ParameterError
from .compiler import compile_layer
from .program_time import ModuleTiming, layer_time

__all__ = ["ProgramPassTime", "pe_parameters", "module_timing", "program_pass_time"]


def pe_parameters(config):
    """The NTPE parameters of a module: lanes and the three buffers' depths from their bytes.

    BUF Input 1 holds 32-bit words, BUF Input 2 and BUF Output rows of ``macs_per_pe`` words.

    Raises
    ------
    ParameterError
        A depth that is not a power of two.
    """
    k = config.macs_per_pe
    depths = {"in1_depth": config.input1_buffer_bytes // 4, "in2_depth": config.input2_buffer_bytes // (4 * k),
              "out_depth": config.output_buffer_bytes // (4 * k)}
    for name, depth in depths.items():
        if depth < 2 or depth & (depth - 1):
            raise ParameterError(f"parameter '{name}' = {depth} (from the buffer bytes) is invalid; allowed: a power "
                                 "of two")
    return {"lanes": k, **depths, "frac_bits": 16, "frac_bits16": 8, "rounding": "sr_lo"}


def module_timing(config):
    """The vault and bus timing of a module in cycles: latency rounded up, one word per ``interval`` cycles."""
    interval = max(1, math.ceil(4 * config.clock_hz / config.vault_bytes_per_s - 1e-9))
    return ModuleTiming(vault_latency=max(1, math.ceil(config.vault_latency_s * config.clock_hz - 1e-9)),
                        vault_interval=interval, bus_latency=config.bus_stages)


@dataclass
class ProgramPassTime:
    """One layer pass on one module, all its groups, for the whole minibatch.

    Attributes
    ----------
    seconds, cycles : float
        PE programs only (the layer's groups one after the other).
    prep_seconds : float
        The im2col gather (data preparation) of a tiled convolution, 0 otherwise.
    macs : int
        Useful MACs of the layer (all groups).
    tops : float
        ``2 macs / seconds``.
    peak_tops : float
        The module's peak in the pass's MAC mode.
    bits : int
        16 or 32.
    losses : dict
        Seconds: ``compute at peak``, ``padding and PE pipeline`` (pass costs beyond the
        useful MACs: lane/tile padding, preload rows, ``ROW_DELAY + 1 + LAT`` per pass),
        ``waiting for blocks`` (the PE stalled on its streams), ``write-back tail``; they sum
        to ``seconds``.
    bound : str
        ``compute`` when the PE waits less than 10 % of the time, else the stream with more
        words per PE: ``dedicated vault`` or ``common path``.
    detail : dict
        Passes, MAC rows, words and programs per PE, lowering.
    """
    seconds: float
    cycles: float
    prep_seconds: float
    macs: int
    tops: float
    peak_tops: float
    bits: int
    losses: dict = field(default_factory=dict)
    bound: str = "compute"
    detail: dict = field(default_factory=dict)


def _useful_macs(kind, dims, groups):
    if kind.startswith("fc"):
        return dims["h"] * dims["k"] * dims["n"]
    s, p = dims.get("s", 1), dims.get("p", 0)
    out_h = (dims["h"] + 2 * p - dims["hk"]) // s + 1
    out_w = (dims["w"] + 2 * p - dims["wk"]) // s + 1
    return groups * dims["n"] * dims["o"] * dims["d"] * dims["hk"] * dims["wk"] * out_h * out_w


def program_pass_time(config, kind, dims, groups=1, bits=None, **counterfactual):
    """Compile one layer pass for the module and time its programs.

    Parameters
    ----------
    config : ModuleConfig
    kind : str
        A compiler layer kind (``conv_ff`` ... ``fc_up``).
    dims : dict
        The compiler's dimensions (one group).
    groups : int
        Groups run one after the other.
    bits : int, optional
        MAC width (the compiler's default: Table 4's).
    **counterfactual
        :class:`~trainforge.sim.neurotrainer.program_time.ModuleTiming` fields that describe
        another hardware than the RTL's (``elements_per_request``, ``preload_rows``,
        ``common_interval``).

    Returns
    -------
    ProgramPassTime

    Raises
    ------
    ProgramError
        The layer does not compile for the module.
    """
    layer = compile_layer(kind, dims, pes=config.pes, pe=pe_parameters(config), bits=bits)
    timing = replace(module_timing(config), **counterfactual)
    result = layer_time(layer, timing)
    to_s = 1.0 / config.clock_hz
    macs = _useful_macs(kind, dims, groups)
    elements = 2 if layer.bits == 16 else 1
    peak_macs_per_cycle = config.pes * config.macs_per_pe * elements
    cycles = groups * result.cycles
    ideal = macs / peak_macs_per_cycle
    compute = groups * result.compute_cycles
    stall = groups * result.stall_cycles
    losses = {"compute at peak": ideal, "padding and PE pipeline": compute - ideal, "waiting for blocks": stall,
              "write-back tail": cycles - compute - stall}
    words = result.words
    per_pe_local = words["local_read"] + words["local_write"]
    per_pe_common = (words["broadcast"] + words["merge"]) * 1.0
    bound = "compute" if stall < 0.1 * cycles else ("dedicated vault" if per_pe_local >= per_pe_common
                                                    else "common path")
    prep = groups * 2 * words["copy"] * timing.vault_interval
    seconds = cycles * to_s
    return ProgramPassTime(
        seconds=seconds, cycles=cycles, prep_seconds=prep * to_s, macs=macs, tops=2 * macs / seconds / 1e12,
        peak_tops=2 * peak_macs_per_cycle * config.clock_hz / 1e12, bits=layer.bits,
        losses={name: value * to_s for name, value in losses.items()}, bound=bound,
        detail={"lowering": "tiled" if layer.copy_jobs else "direct", "passes_per_pe": result.passes,
                "mac_rows_per_pe": result.mac_rows, "words": words, "programs": result.programs,
                "pe": pe_parameters(config), "timing": timing.__dict__})

