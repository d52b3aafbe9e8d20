"""What the integrated system's generator and golden model share: the parameters.

The PE parameters are the PE's (:data:`trainforge.spec.neurotrainer.pe.PARAMS`) with the
system's defaults, ranges and wording; :data:`PE_KEYS` names them. The activation LUTs on
every vault controller's read path (Section 3.2: the PMAG "computes the non-linear function
(and its derivative) by using look up tables") take :data:`LUT_KEYS`; a read request selects
its table by its address bits ``31 .. 30`` (:data:`LUT_SELECT`, :func:`lut_alias`): the vault
uses only the address bits below its depth, so a PMAG program reads a tensor through f(x) or
f'(x) by the base (and strides) it is given.

Parameters
----------
See :data:`PARAMS`.
"""
from dataclasses import replace

from ..params import Param, ParamSchema
from . import lut, pe, sequencer
from .mac import check_seed

__all__ = ["PARAMS", "PE_KEYS", "LUT_KEYS", "SEQUENCER_KEYS", "ACTIVATIONS", "LUT_OFF", "LUT_SELECT", "LUT_SELECT_SHIFT",
           "WORD_LUT_STAGES",
           "LUT_ADDRESS_MASK", "lut_alias", "lut_functions"]

#: The system parameters that are the PEs' (the compiler's ``pe``).
PE_KEYS = pe.PARAMS.names


#: The activations ``f`` a system's LUTs hold; ``f'`` is ``<f>_grad`` (``spec/neurotrainer/lut.py``).
ACTIVATIONS = ("relu", "tanh", "sigmoid")

#: The table a read request's address bits ``31 .. 30`` select: none (0), f(x), f'(x).
LUT_OFF = 0
LUT_SELECT = {"f": 1, "df": 2}

#: The lowest address bit of the table select; the vault address is below it.
LUT_SELECT_SHIFT = 30
LUT_ADDRESS_MASK = (1 << LUT_SELECT_SHIFT) - 1

#: Registered stages of a vault controller's pipelined word LUT (``hw/neurotrainer/word_lut_pipeline.py``). A
#: controller whose vault latency leaves room for them (``latency > WORD_LUT_STAGES``) runs its LUTs in the
#: last ``WORD_LUT_STAGES`` cycles of the vault's read latency, so the read path's cycles do not change;
#: otherwise its LUTs are combinational on the read stream (``hw/neurotrainer/word_lut.py``).
WORD_LUT_STAGES = 3


def lut_alias(function):
    """What a read address adds to select ``function`` (``"f"``, ``"df"``, or None: no table)."""
    return LUT_SELECT.get(function, LUT_OFF) << LUT_SELECT_SHIFT

#: The system parameters of its LUTs and the ``nt_lut`` parameter each one sets.
LUT_KEYS = {"lut_table_bits": "table_bits", "lut_frac_bits": "frac_bits", "lut_out_frac_bits": "out_frac_bits"}


def lut_functions(system):
    """``{"f": nt_lut parameters, "df": nt_lut parameters}`` of a resolved system parameter dict."""
    common = {lut_key: system[key] for key, lut_key in LUT_KEYS.items()}
    return {"f": {"function": system["activation"], **common},
            "df": {"function": f"{system['activation']}_grad", **common}}


def _lut(name, default, doc):
    return replace(lut.PARAMS[name], name=f"lut_{name}", default=default, doc=doc)


def _pe(name, default, doc, **limits):
    return replace(pe.PARAMS[name], default=default, doc=doc, **limits)


def _sequencer(name, default, doc):
    return replace(sequencer.PARAMS[name], default=default, doc=doc)


#: The system parameters that are its iBuffer / layer sequencer's (``nt_sequencer``; ``pes`` is the system's).
SEQUENCER_KEYS = ("max_layers", "queue_depth")


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
    Param("activation", str, "sigmoid", "f(x) of the vault controllers' LUTs (f'(x) is its derivative)",
          choices=ACTIVATIONS),
    _lut("table_bits", 6, "log2 of the LUTs' segments"),
    _lut("frac_bits", 8, "fraction bits of the LUTs' 16-bit input"),
    _lut("out_frac_bits", 8, "fraction bits of the LUTs' 16-bit output"),
    _sequencer("max_layers", 8, "layer table entries of the iBuffer (power of two)"),
    _sequencer("queue_depth", 64, "program words of each iBuffer queue (power of two)"),
), constraints=(check_seed,))
