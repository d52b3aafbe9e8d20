"""What the integrated system's generator and golden model share: the parameters.

The PE parameters are the PE's (:data:`trainforge.spec.neurotrainer.pe.PARAMS`) with the
system's defaults, ranges and wording; :data:`PE_KEYS` names them.

Parameters
----------
See :data:`PARAMS`.
"""
from dataclasses import replace

from ..params import Param, ParamSchema
from . import pe
from .mac import check_seed

__all__ = ["PARAMS", "PE_KEYS"]

#: The system parameters that are the PEs' (the compiler's ``pe``).
PE_KEYS = pe.PARAMS.names


def _pe(name, default, doc, **limits):
    return replace(pe.PARAMS[name], default=default, doc=doc, **limits)


#: The parameters of ``nt_system``.
PARAMS = ParamSchema((
    Param("pes", int, 2, "number of PEs (each with its own vault)", minimum=2, maximum=4),
    _pe("lanes", 2, "MACs and comparators per PE", maximum=8),
    Param("vault_depth", int, 512, "common vault words (power of two)", minimum=16, maximum=1 << 16,
          power_of_two=True),
    Param("pe_vault_depth", int, 256, "words of each PE's vault (power of two)", minimum=16, maximum=1 << 16,
          power_of_two=True),
    Param("vault_latency", int, 4, "read latency of every vault in cycles", minimum=1, maximum=64),
    Param("vault_interval", int, 1, "minimum cycles between requests of every vault", minimum=1, maximum=16),
    Param("broadcast_credits", int, 8, "words of each PE's broadcast FIFO (broadcast credits)", minimum=2,
          maximum=256),
    _pe("in1_depth", 128, "PE BUF Input 1 depth in words"),
    _pe("in2_depth", 64, "PE BUF Input 2 depth in rows"),
    _pe("out_depth", 16, "PE BUF Output depth in rows"),
    _pe("frac_bits", 8, "fraction bits of the PEs' 32-bit format"),
    _pe("frac_bits16", 0, "fraction bits of the PEs' 16-bit format"),
    _pe("rounding", "sr_lo", "32-bit rounding of the PEs' MACs"),
    _pe("seed", 0xA5, "the PEs' random generator seed (1..255 for sr_lo)"),
    _pe("index_bits", 4, "the PEs' argmax index width"),
), constraints=(check_seed,))
