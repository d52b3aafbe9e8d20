"""What the CATERPILLAR generators (``hw/caterpillar``) and golden models (``golden/caterpillar``) share.

One place for the blocks' parameter schemas (``cp_pe``, ``cp_core``,
``cp_reciprocal``, ``cp_ring``), the op codes of their command streams, their
layouts and latencies, and the widths derived from the parameters.
"""
import math
from dataclasses import replace

import numpy as np

from amaranth import signed, unsigned
from amaranth.lib import data, enum

from ..errors import ParameterError
from . import mac as mac_spec
from . import stream_stage
from .fp import FP16, FP32
from .params import Param, ParamSchema

__all__ = [
    "MAC_UNIT_NAMES", "CORE_MAC_UNIT_NAMES", "FP16_MAC", "REDUCTIONS", "MacOp", "CoreOp", "RingOp", "CommandField", "RingField", "CoreEvent",
    "PE_PARAMS", "CORE_PARAMS", "pe_accumulate_latency", "pe_reduction_latency", "core_accumulate_latency",
    "core_reduction_latency", "core_update_drain", "gemv_final_gap", "gemv_landing_collisions", "gemv_block_gap", "RECIPROCAL_PARAMS", "RING_PARAMS",
    "COMMAND_LATENCY", "OUTPUT_LATENCY", "HOP_CYCLES", "COLLECTIVE_LANDING_LATENCY", "collective_step_cycles",
    "collective_command_cycles",
    "RING_OUTPUT_LATENCY", "RING_READ_LATENCY",
    "PE_READ_LATENCY", "PE_MAC_LATENCY", "READ_STAGE_LATENCY", "EXECUTE_LATENCY", "UPDATE_SUBTRACT_STAGES_FP16", "UPDATE_ROUND_STAGES_FP16",
    "update_write_back_stages",
    "addr_width", "reduction_cycles", "shift_bits", "max_shift", "count_shape",
    "core_cmd_layout", "core_data_layout", "core_result_layout", "core_error_layout",
    "ERROR_OFFSET", "REJECT_CYCLES", "core_command_limits", "core_command_checks", "core_command_violation",
    "ring_buffer_depth", "ring_cmd_layout", "ring_word_layout", "ring_error_layout", "ring_command_limits",
    "ring_command_checks", "ring_command_violation",
    "reciprocal_table", "reciprocal_table_fp16", "reciprocal_result_bits", "reciprocal_operand_bits", "result_width", "unit_latency", "unit_interval",
    "params_with_defaults",
]

#: Names of the PE's MAC units (the keys of ``trainforge.hw.caterpillar.mac.MAC_UNITS``): ``fixed`` (two's
#: complement, wrapping accumulator) and ``fp16`` (the paper's half-precision FPU: :data:`FP16_MAC`).
MAC_UNIT_NAMES = ("fixed", "fp16")
#: The MAC units of ``cp_core``: with ``fp16`` its reductions add in FP32 and UPDATE writes back in FP16
#: (``golden.caterpillar.core_fp16``).
CORE_MAC_UNIT_NAMES = MAC_UNIT_NAMES
#: ``mac="fp16"``: the formats of the PE's FPU. The operands (local SRAM words, the low 16 bits of a bus) are
#: IEEE half precision; the product of two of them is exact in FP32 (22-bit significand, no rounding); the
#: accumulator, the reduction register and the buses hold FP32, and every addition (the MAC's and the
#: reduction's) rounds to nearest even once (:mod:`trainforge.spec.fp`: subnormals flushed to zero on input
#: and output, canonical quiet NaN). The MAC is therefore a fused multiply-add with an FP32 addend:
#: ``acc = round32(acc + a * b)``. Why FP32 and not FP16 accumulation: hw/caterpillar/README.md.
FP16_MAC = {"operand": FP16, "accumulator": FP32}
#: GEMV reduction kinds: over the column/row bus, or a tree over the neighbour links.
REDUCTIONS = ("bus", "tree")


class MacOp(enum.IntEnum, shape=2):
    """Operands of the PE's multiply-accumulate in its operand stage."""
    NONE = 0
    ROW_MEM = 1  #: row bus times the local word (GEMV forward)
    COL_MEM = 2  #: column bus times the local word (GEMV backward)
    ROW_COL = 3  #: row bus times column bus (GEMM rank-1 update)


class CoreOp(enum.IntEnum, shape=3):
    """Op codes of the ``cp_core`` ``i_cmd`` stream (the microprograms)."""
    GEMV_FORWARD = 0  #: ``y = x^T W``: x on the row buses, column reduction into the diagonal
    GEMV_BACKWARD = 1  #: ``d = W e``: e on the column buses, row reduction into the diagonal
    GEMM = 2  #: ``C = W B`` by rank-1 updates; B streamed on the column buses
    LOAD = 3  #: write W into the local memories, one row of PEs per ``i_data`` word
    UPDATE = 4  #: in place ``W -= round(sum_s x_s e_s^T / 2**shift)``: x on the row buses, e on the column buses


class CommandField(enum.IntEnum, shape=3):
    """Codes of ``cp_core``'s ``o_error`` word: the command field found out of its range
    (:func:`core_command_limits`; the first in the order of :func:`core_command_checks`)."""
    OP = 0  #: not a :class:`CoreOp`
    MB = 1  #: ``mb`` outside ``1 .. max_blocks``
    NB = 2  #: ``nb`` outside ``1 .. max_blocks``
    QB = 3  #: GEMM, UPDATE: ``qb`` outside ``1 .. max_blocks``
    BASE = 4  #: ``base`` outside ``0 .. sram_depth - 1`` (only a ``sram_depth`` that is not a power of two)
    BATCH_MB = 5  #: UPDATE: ``qb * mb`` (the x words in the vector buffer) above ``max_blocks``
    BATCH_NB = 6  #: UPDATE: ``qb * nb`` (the e words in the error buffer) above ``max_blocks``


class CoreEvent(enum.IntEnum, shape=3):
    """Events of ``cp_core`` that cost energy, counted by the golden model (``golden.caterpillar.core.counts``)
    and by the RTL's testbench (a monitor on the enables): the units Table 1 of the paper prices.

    Each event is one operation of one unit in one cycle:

    - ``MAC``: a PE's FPU multiply-accumulate (the PE's accumulate stage with a MAC in it);
    - ``ADD``: a PE's FPU addition without a multiply: a reduction step (``red_add`` not overruled by a
      handoff) or the UPDATE write-back's subtraction ``W - round(P / 2**shift)``;
    - ``LOCAL_READ``, ``LOCAL_WRITE``: a word read from or written into a PE's local SRAM (one per PE);
    - ``BUFFER_READ``, ``BUFFER_WRITE``: an operand read from or written into the core's vector and error
      buffers (``n_r`` per buffer word: the vector elements the paper keeps in the PEs' local memories);
    - ``OFFCORE_READ``, ``OFFCORE_WRITE``: an operand in on ``i_data`` or a result out on ``o_data`` (``n_r``
      per stream word: the core's traffic with its off-core SRAM).
    """
    MAC = 0
    ADD = 1
    LOCAL_READ = 2
    LOCAL_WRITE = 3
    BUFFER_READ = 4
    BUFFER_WRITE = 5
    OFFCORE_READ = 6
    OFFCORE_WRITE = 7


class RingOp(enum.IntEnum, shape=3):
    """Op codes of the ``cp_ring`` ``i_cmd`` stream."""
    GEMV_FORWARD = 0  #: Fig. 4(a, c) on all cores: each reduces internally, the partials summed by a chain of adds
    GEMV_BACKWARD = 1  #: Fig. 4(b, d) on all cores: ``e`` passed along the ring, each core produces its part of ``d``
    LOAD = 2  #: the core LOAD of one core's weights (``core``, ``mb``, ``nb``, ``base``)
    WRITE = 3  #: ``i_data`` into the ring buffers: ``words`` words per core, core 0 first
    READ = 4  #: the ring buffers onto ``o_data``: ``words`` words per core, core 0 first
    ALL_GATHER = 5  #: chunk ``c`` (``words`` words at ``c * words``) of core ``c`` to every core
    REDUCE_SCATTER = 6  #: core ``c`` ends with chunk ``c`` summed over all cores


class RingField(enum.IntEnum, shape=3):
    """Codes of ``cp_ring``'s ``o_error`` word: the command field found out of its range
    (:func:`ring_command_limits`; the first in the order of :func:`ring_command_checks`)."""
    OP = 0  #: not a :class:`RingOp`
    CORE = 1  #: LOAD: ``core`` not below ``cores``
    MB = 2  #: GEMV, LOAD: ``mb`` outside ``1 .. max_blocks`` (the core's range)
    NB = 3  #: GEMV, LOAD: ``nb`` outside ``1 .. max_blocks``
    BASE = 4  #: GEMV, LOAD: ``base`` outside ``0 .. sram_depth - 1``
    WORDS = 5  #: WRITE, READ: ``words`` outside ``1 .. cores * max_blocks``; collectives: ``1 .. max_blocks``


def _check_acc_width(values):
    """The accumulator must hold a full product of two operands."""
    if values["acc_width"] < 2 * values["width"]:
        raise ParameterError(f"parameter 'acc_width' = {values['acc_width']} is invalid (narrower than the "
                             f"{2 * values['width']}-bit products of width {values['width']}); "
                             f"allowed: an integer in {2 * values['width']}..64")


def _check_fp16_widths(values):
    """The FPU's operands are FP16 (16 bits) and its accumulator and buses FP32 (32 bits)."""
    if values["mac"] != "fp16":
        return
    for name, bits in (("width", FP16.width), ("acc_width", FP32.width)):
        if values[name] != bits:
            raise ParameterError(f"parameter '{name}' = {values[name]} is invalid with mac 'fp16' (FP16 operands, "
                                 f"an FP32 accumulator); allowed: {bits}")


def _check_partial_sums(values):
    """The interleaved accumulator (more than one partial sum) is the FPU's: ``fixed`` keeps its one-cycle add."""
    if values["partial_sums"] != 1 and values["mac"] != "fp16":
        raise ParameterError(f"parameter 'partial_sums' = {values['partial_sums']} is invalid with mac "
                             f"'{values['mac']}' (only the fp16 FPU has the interleaved accumulator); allowed: 1")


def _check_reduction_partials(values):
    """The interleaved reduction (more than one reduction partial) is the FPU's: ``fixed`` keeps its one-cycle
    add."""
    if values["reduction_partials"] != 1 and values["mac"] != "fp16":
        raise ParameterError(f"parameter 'reduction_partials' = {values['reduction_partials']} is invalid with mac "
                             f"'{values['mac']}' (only the fp16 FPU has the interleaved reduction); allowed: 1")


def _check_reciprocal_fp16(values):
    """With ``mac="fp16"`` the reciprocal takes FP32 values (32 bits) and indexes FP32's 23 fraction bits."""
    if values["mac"] == "fp16" and values["width"] != FP32.width:
        raise ParameterError(f"parameter 'width' = {values['width']} is invalid with mac 'fp16' (FP32 values); "
                             f"allowed: {FP32.width}")


def _check_table_bits(values):
    """The lookup table indexes the bits after the leading one of the fraction (fixed point)."""
    if values["mac"] == "fixed" and values["table_bits"] > values["frac"] - 2:
        raise ParameterError(f"parameter 'table_bits' = {values['table_bits']} is invalid (the table indexes the "
                             f"bits after the leading one of a {values['frac']}-bit fraction); allowed: an integer "
                             f"in 1..{values['frac'] - 2}")


# The parameters that the PE, the core and the ring share, declared once.
_WIDTH = Param("width", int, 16, "operand width in bits (fixed point)", minimum=2, maximum=32)
_ACC_WIDTH = Param("acc_width", int, 32, "accumulator and bus width in bits (wraps around)", minimum=4, maximum=64)
_SRAM_DEPTH = Param("sram_depth", int, 8192, "words per PE local SRAM (8192 x 16 bit = the paper's 16 KB)",
                    minimum=2, maximum=65536)
_N_R = Param("n_r", int, 4, "PEs per row and per column of the core", minimum=2, maximum=16)
_MAX_BLOCKS = Param("max_blocks", int, 64, "largest block count of a command (vector buffer depth)",
                    minimum=1, maximum=4096)
_REDUCTION = Param("reduction", str, "bus", "GEMV reduction: column/row bus (n_r-1 cycles) or neighbour-link tree",
                   choices=REDUCTIONS)
_PE_MAC = Param("mac", str, "fixed", "MAC unit: 'fixed' (width-bit operands), or 'fp16' (FP16 operands, FP32 "
                "accumulation; width 16, acc_width 32)", choices=MAC_UNIT_NAMES)
_CORE_MAC = replace(_PE_MAC, doc="MAC unit of the PEs: 'fixed', or 'fp16' (FP16 operands and weights, FP32 "
                   "accumulation, reductions and results; width 16, acc_width 32)")
_RING_MAC = replace(_CORE_MAC, doc="MAC unit of the cores' PEs: 'fixed', or 'fp16' (the ring's adds in FP32 "
                   "too; width 16, acc_width 32)")

#: ``mac="fp16"``: partial sums of the PE's FP32 accumulator. 1: the one-cycle accumulate stage (the whole FP32
#: adder in the loop acc -> adder -> acc; the only choice of ``cp_core`` and ``cp_ring`` so far). 2, 4, 8: the
#: interleaved accumulator of the TensorDash FP PEs (``trainforge.spec.mac``, ``hw/fp/accumulate.py``): an
#: adder of ``partial_sums`` stages, the products since the last clear added in turn to partial ``j mod P``,
#: a result the pairwise sum of the partials (:func:`pe_accumulate_latency` cycles later).
_PARTIAL_SUMS = replace(mac_spec.PARTIAL_SUMS, default=1,
                        doc="fp16 only: partial sums of the interleaved FP32 accumulator (1: the one-cycle "
                            "accumulate stage; 2, 4, 8: a pipelined adder of that many stages, results later)")

#: ``mac="fp16"``: partials of the PE's FP32 reduction register (the ``red_add`` adder). 1: the one-cycle add
#: ``red = red + red_in`` (the whole FP32 adder in the loop red -> adder -> red; the only choice of ``cp_core``
#: and ``cp_ring`` so far). 2, 4, 8: the interleaved accumulator of the accumulate stage used for the reduction:
#: a handoff starts a reduction (its value is row 0), each ``red_add`` is the next row, row ``j`` is added to
#: partial ``j mod P``, and each ``red_add`` row's result, the pairwise sum of the partials, is written into
#: ``red`` :func:`pe_reduction_latency` cycles later. One ``red_in`` per cycle, as the one-cycle add.
_REDUCTION_PARTIALS = replace(mac_spec.PARTIAL_SUMS, name="reduction_partials", default=1,
                              doc="fp16 only: partials of the interleaved FP32 reduction (1: the one-cycle "
                                  "red = red + red_in; 2, 4, 8: a pipelined adder of that many stages, one red_in "
                                  "per cycle, each sum written into red later)")

#: The parameters of ``cp_pe``.
PE_PARAMS = ParamSchema((_WIDTH, _ACC_WIDTH, _SRAM_DEPTH, _PE_MAC, _PARTIAL_SUMS, _REDUCTION_PARTIALS),
                        constraints=(_check_acc_width, _check_fp16_widths, _check_partial_sums,
                                     _check_reduction_partials))


def _check_pe_params(values):
    """The PE parameters of a core must make a valid ``cp_pe`` (raises :class:`ParameterError`); those the core
    does not have take the PE's defaults."""
    PE_PARAMS.resolve(**{name: values[name] for name in PE_PARAMS.names if name in values})


def _check_tree_reduction_partials(values):
    """The tree reduction keeps the one-cycle reduction add: each tree step adds the sum of the step before, so
    with the interleaved reduction a step would take ``pe_reduction_latency + 1`` cycles
    (``ceil(log2 n_r) (Lr + 1)``: 42 at ``n_r`` 4 and ``reduction_partials`` 4, against 23 for the bus)."""
    if values["reduction"] == "tree" and values["reduction_partials"] != 1:
        raise ParameterError(f"parameter 'reduction_partials' = {values['reduction_partials']} is invalid with "
                             f"reduction 'tree' (a tree step adds the sum of the step before: the interleaved "
                             f"reduction would make each step {pe_reduction_latency(values['reduction_partials']) + 1} "
                             f"cycles long; use reduction 'bus'); allowed: 1")


#: The parameters of ``cp_core``. ``partial_sums`` and ``reduction_partials`` are its PEs' (``fp16`` only; the
#: schedule follows them: :func:`core_accumulate_latency`, :func:`gemv_block_gap`, :func:`core_update_drain`).
CORE_PARAMS = ParamSchema((_N_R, _WIDTH, _ACC_WIDTH, _SRAM_DEPTH, _MAX_BLOCKS, _REDUCTION, _CORE_MAC,
                           replace(_PARTIAL_SUMS, doc="fp16 only: partial sums of every PE's interleaved FP32 "
                                   "accumulator (1: the one-cycle accumulate stage; 2, 4, 8: pipelined, every "
                                   "event after the accumulate stage that much later)"),
                           replace(_REDUCTION_PARTIALS, doc="fp16 only, reduction 'bus' only: partials of every "
                                   "PE's interleaved FP32 reduction (1: the one-cycle red = red + red_in; 2, 4, 8: "
                                   "pipelined, one red_in per cycle, each GEMV output word later)")),
                          constraints=(_check_pe_params, _check_tree_reduction_partials))


def _check_core_params(values):
    """The core parameters of a ring must make a valid ``cp_core`` (raises :class:`ParameterError`); those the
    ring does not have (``partial_sums``, ``reduction_partials``: its cores keep 1) take the core's defaults."""
    CORE_PARAMS.resolve(**{name: values[name] for name in CORE_PARAMS.names if name in values})


#: The parameters of ``cp_ring``.
RING_PARAMS = ParamSchema((
    Param("cores", int, 2, "cores on the ring (2 x C); the GEMV spans all of them", minimum=2, maximum=8),
    replace(_N_R, doc="PEs per row and per column of each core"),
    _WIDTH,
    replace(_ACC_WIDTH, doc="accumulator, bus and ring width in bits (wraps around)"),
    replace(_SRAM_DEPTH, default=4096,
            doc="words per PE local SRAM (4096 x 16 bit = 8 KB, half the core's 16 KB: at 16 KB the two cores' 32 PE "
                "SRAMs alone need 256 DP16KD, more than the 208 of the ULX3S's ECP5-85F; at 8 KB they need 128)"),
    replace(_MAX_BLOCKS, doc="largest block count of a core command; ring buffers hold cores x max_blocks"),
    replace(_REDUCTION, doc="GEMV reduction in each core"),
    _RING_MAC,
), constraints=(_check_core_params,))

#: The parameters of ``cp_reciprocal``.
RECIPROCAL_PARAMS = ParamSchema((
    Param("width", int, 32, "input value width in bits (unsigned, frac fraction bits)", minimum=2, maximum=48),
    Param("frac", int, 16, "fraction bits of inputs and results", minimum=4, maximum=28),
    Param("table_bits", int, 3, "lookup-table index bits", minimum=1, maximum=8),
    Param("iterations", int, 2, "Goldschmidt iterations (two MACs each)", minimum=0, maximum=6),
    Param("mac", str, "fixed", "MAC unit: 'fixed' (frac fraction bits), or 'fp16' (FP32 values in and out, "
          "the iterations on the half-precision FPU; width 32, frac unused)", choices=MAC_UNIT_NAMES),
), constraints=(_check_table_bits, _check_reciprocal_fp16))

#: ``cp_pe``: cycles from an issue-stage read (``rd_addr``) to its word on ``mem_data``: the synchronous
#: SRAM read, then the SRAM's output register (the DP16KD's ``OUTREG`` on the ECP5).
PE_READ_LATENCY = 2
#: ``cp_pe``: cycles from the operand stage (``mac_op``, the buses and ``mem_data``) to the accumulate stage,
#: whose end writes the sum into the accumulator: the multiplier's input registers, then its output register.
#: With the interleaved accumulator (``partial_sums`` above 1) the sum is written
#: :func:`pe_accumulate_latency` cycles after the accumulate stage.
PE_MAC_LATENCY = 2


def pe_accumulate_latency(partial_sums=1):
    """``cp_pe``: cycles from the accumulate stage (a product at the accumulator's input) to the cycle whose end
    writes the row's result into ``acc`` (and, with its ``handoff``, into ``red``).

    0 for the one-cycle accumulate stage (``partial_sums`` 1, and every ``fixed`` PE). With the interleaved
    accumulator (``partial_sums`` P of 2, 4, 8): the adder's P stages (the last one is the partial), a register
    of the partials, the pairwise adder tree over them (``FP32_TREE_ADD_STAGES`` per level), so
    ``P + 1 + 7 log2(P)``: 10 for 2, 19 for 4, 30 for 8 (``trainforge.spec.mac.accumulate_stages``).
    """
    if partial_sums == 1:
        return 0
    return mac_spec.accumulate_stages({"mac": "fp16", "partial_sums": partial_sums})


def pe_reduction_latency(reduction_partials=1):
    """``cp_pe``: cycles from a ``red_add`` cycle (its ``red_in``) to the cycle whose end writes its result
    into ``red``.

    0 for the one-cycle reduction add (``reduction_partials`` 1, and every ``fixed`` PE: ``red`` is written at the
    end of the ``red_add`` cycle). With the interleaved reduction (``reduction_partials`` P of 2, 4, 8): a row
    register (the ``red_in`` word, or a landing handoff's value, with their flags), then the interleaved
    accumulator (:func:`pe_accumulate_latency` of P), so ``1 + P + 1 + 7 log2(P)``: 11 for 2, 20 for 4, 31 for 8.
    """
    if reduction_partials == 1:
        return 0
    return 1 + pe_accumulate_latency(reduction_partials)


def core_accumulate_latency(params):
    """``cp_core``: cycles from a micro-operation's accumulate stage to the cycle that writes its PEs' sums
    (:func:`pe_accumulate_latency` of the core's ``partial_sums``): the handoffs, so the reduction, the GEMV
    outputs, the GEMM read-out and the UPDATE write-back all come that much later (0 with ``partial_sums`` 1)."""
    return pe_accumulate_latency(params["partial_sums"])


def core_reduction_latency(params):
    """``cp_core``: cycles from the last ``red_add`` of a bus reduction to the cycle that writes its sum into the
    diagonal PE's ``red`` (:func:`pe_reduction_latency` of the core's ``reduction_partials``; 0 with 1). The GEMV
    output word copies ``red`` in the cycle after that one (``OUTPUT_LATENCY`` before ``o_data``)."""
    return pe_reduction_latency(params["reduction_partials"])


def core_update_drain(params):
    """``cp_core``: idle issue cycles after the last micro-operation of an UPDATE (the read-after-write stall).

    The next command's first read comes in the cycle after the last write-back, so it reads the new weights. The
    reads and the write-backs both come ``READ_STAGE_LATENCY`` after their issue, so that stage cancels out: the
    last write-back is written ``EXECUTE_LATENCY - READ_STAGE_LATENCY`` cycles after the read stage of the last
    micro-operation to its accumulate stage, :func:`core_accumulate_latency` later (the write-back reads the
    accumulator then), and :func:`update_write_back_stages` after that, the first of them the cycle after the
    issue's: ``EXECUTE_LATENCY - READ_STAGE_LATENCY + update_write_back_stages - 1 + A``. 6 + A with ``fixed``
    (3 stages: ``5 - 1 + 3 - 1``), 14 + A with ``fp16`` (11 stages: ``5 - 1 + 11 - 1``).
    """
    return (EXECUTE_LATENCY - READ_STAGE_LATENCY + update_write_back_stages(params) - 1
            + core_accumulate_latency(params))


def gemv_final_gap(params):
    """``cp_core``: idle issue cycles after the last block of a GEMV: the reduction (``R`` cycles), its
    :func:`core_reduction_latency`, the output cycle, so that the next command's first handoff lands after the
    last output word is copied (``R + 1`` with ``reduction_partials`` 1)."""
    return reduction_cycles(params["n_r"], params["reduction"]) + 1 + core_reduction_latency(params)


def gemv_landing_collisions(params):
    """``cp_core``: the extra idle cycles :func:`gemv_block_gap` adds to a GEMV block period ``p`` (index ``p``,
    ``0 .. R + Lr``) so that no handoff lands in the cycle the interleaved reduction writes a block's sum.

    Block ``b``'s handoff lands in cycle ``h``, its last ``red_add`` is cycle ``h + R`` and its sum is written into
    the diagonal PE's ``red`` at the end of cycle ``h + R + Lr`` (``Lr`` = :func:`core_reduction_latency`). A
    handoff landing in that cycle wins (the sum is lost); the handoff of block ``b + k`` lands in cycle
    ``h + k p``. So no period may divide ``R + Lr``: a period that does is lengthened to the next one that does
    not. All zeros with ``reduction_partials`` 1 (``Lr`` 0: the sum is written in the last ``red_add`` cycle,
    before any later handoff, as the period is at least ``R + 1``).
    """
    latency = core_reduction_latency(params)
    span = reduction_cycles(params["n_r"], params["reduction"]) + latency
    extra = []
    for period in range(span + 1):
        longer = period
        while latency and longer >= 1 and span % longer == 0:
            longer += 1
        extra.append(longer - period)
    return extra


def gemv_block_gap(steps, overlap, params):
    """``cp_core``: idle issue cycles after a GEMV block of ``steps`` MAC cycles that is not the last.

    Without ``overlap`` the next block waits for the reduction and the output cycle (``R + 1``); with it only for
    what they need beyond the next block's MACs (``max(0, R + 1 - steps)``). With the interleaved reduction the
    period ``steps + gap`` is then lengthened where a handoff would land in the cycle a block's sum is written
    (:func:`gemv_landing_collisions`).
    """
    drain = reduction_cycles(params["n_r"], params["reduction"]) + 1
    gap = max(0, drain - steps) if overlap else drain
    collisions = gemv_landing_collisions(params)
    period = steps + gap
    return gap + (collisions[period] if period < len(collisions) else 0)


#: ``cp_core``: cycles from the issue of a micro-operation to its local SRAM and buffer reads: the core
#: registers each read's enable and address, so that no combinational path runs from the issue decision
#: to the enables of the SRAMs across the chip (the reads are enabled only where their word is used).
READ_STAGE_LATENCY = 1
#: ``cp_core``: cycles from the issue of a micro-operation to its accumulate stage (1 before pipelining).
EXECUTE_LATENCY = READ_STAGE_LATENCY + PE_READ_LATENCY + PE_MAC_LATENCY
#: ``cp_core`` with ``mac="fp16"``: register stages of the UPDATE write-back's FP32 subtraction
#: ``fp32(W) - P 2**-shift``: the pipelined FP32 adder of the feed-forward adder trees, one adder step per stage
#: (``FP32_TREE_ADD_STAGES`` of :mod:`trainforge.spec.mac`; the last stage holds the difference). In one stage
#: it was the critical path of the fp16 core (33.4 MHz, hw/caterpillar/README.md).
UPDATE_SUBTRACT_STAGES_FP16 = mac_spec.FP32_TREE_ADD_STAGES
#: ``cp_core`` with ``mac="fp16"``: register stages of the UPDATE write-back's FP32 -> FP16 rounding of that
#: difference: the fields, the rounded significand and the exponent field and range checks of both outcomes of
#: the rounding carry, then the carry's selection into the rounded weight's register. In one stage it was the
#: critical path of the fp16 core (66.3 MHz, hw/caterpillar/README.md).
UPDATE_ROUND_STAGES_FP16 = 2


def update_write_back_stages(params):
    """``cp_core``: stages of the UPDATE write-back after the accumulate stage (after
    :func:`core_accumulate_latency`), the last one the cycle whose end writes the SRAM.

    ``fixed``: 3, ``2 P >> shift`` from the registered accumulator, then the rounding and the subtraction, then
    the saturation with the SRAM write. ``fp16``: 11, ``P 2**-shift`` from the registered accumulator, then the
    FP32 subtraction in ``UPDATE_SUBTRACT_STAGES_FP16`` (7) stages, then the rounding to FP16 in
    ``UPDATE_ROUND_STAGES_FP16`` (2) stages into a register, then the SRAM write of that register
    (``1 + 7 + 2 + 1``: with the rounding in the write's cycle, 9 stages, the path rounding -> the DP16KD's DI
    was the critical one at ``n_r`` 2, P 4, R 4, 65.2 MHz; the rounding in one stage of its own (10 stages),
    66.3 MHz, that stage itself critical: hw/caterpillar/README.md).
    """
    if params["mac"] == "fp16":
        return 1 + UPDATE_SUBTRACT_STAGES_FP16 + UPDATE_ROUND_STAGES_FP16 + 1
    return 3


#: ``cp_core``: cycles from the acceptance of a command to the first issue of its first micro-operation.
COMMAND_LATENCY = 1
#: ``cp_core``: cycles from the cycle a result word is written into the output FIFO (the last reduction cycle
#: of a GEMV block, a GEMM read-out cycle) to the word on ``o_data``.
OUTPUT_LATENCY = 1
#: ``cp_ring``: cycles for a word to move from one core to its neighbour.
HOP_CYCLES = 1
#: ``cp_ring``: cycles from a collective's ring buffer read to the write of that word (all-gather) or of the sum
#: with the receiver's own word (reduce-scatter) in the next core's buffer: the sender's read register (the hop)
#: and a landing register of both words in the receiver, in front of the adder (so no path runs from a buffer's
#: read port through the adder into another buffer).
COLLECTIVE_LANDING_LATENCY = 2


def collective_step_cycles(chunk_words):
    """``cp_ring``: cycles of one step of a collective that moves ``chunk_words`` words per core.

    ``chunk_words`` reads, one per cycle, then ``HOP_CYCLES``; but the next step reads the words this step lands,
    so it may start reading only after the first word has landed (``COLLECTIVE_LANDING_LATENCY`` cycles after its
    read): a step lasts at least ``COLLECTIVE_LANDING_LATENCY + 1`` cycles (3 instead of 2 for one-word chunks).
    """
    return max(int(chunk_words) + HOP_CYCLES, COLLECTIVE_LANDING_LATENCY + 1)


def collective_command_cycles(chunk_words, cores):
    """``cp_ring``: cycles of a collective command (``cores - 1`` steps of ``chunk_words`` words per core), from
    the cycle after its acceptance to the cycle its last word lands: ``cores - 2`` whole steps
    (:func:`collective_step_cycles`), then the last step's reads and the landing of its last word
    (``chunk_words + COLLECTIVE_LANDING_LATENCY``)."""
    if cores < 2:
        return 0
    return (cores - 2) * collective_step_cycles(chunk_words) + int(chunk_words) + COLLECTIVE_LANDING_LATENCY
#: ``cp_ring``: cycles of the shared stream stage that every result word crosses on its way to ``o_data``.
RING_OUTPUT_LATENCY = stream_stage.LATENCY
#: ``cp_ring``: cycles from a ``READ`` or backward read-out read of a ring buffer (its enable and address) to the
#: word entering the output stream stage: the buffer's read register, then a read-out register right behind each
#: buffer (no logic between them), so that no path runs from a ring buffer's read port across the device through
#: the word selection into the output stage. Both registers take the same enable (they stall together).
RING_READ_LATENCY = 2


def addr_width(sram_depth):
    """Bits of a local SRAM address (at least one)."""
    return max(1, (int(sram_depth) - 1).bit_length())


def reduction_cycles(n_r, reduction="bus"):
    """Cycles of the reduction of ``n_r`` partial sums into the diagonal PE.

    ``"bus"``: the PEs of a column broadcast in turn on the column bus, ``n_r - 1``
    cycles. ``"tree"``: pairwise links at distances 1, 2, 4, ... halve the
    partial sums each cycle, ``ceil(log2(n_r))`` cycles.
    """
    if reduction == "bus":
        return n_r - 1
    if reduction == "tree":
        return math.ceil(math.log2(n_r))
    raise ParameterError(f"parameter 'reduction' = {reduction!r} is invalid; allowed: {', '.join(REDUCTIONS)}")


def shift_bits(acc_width):
    """Width of the UPDATE command's ``shift`` field: ``max(1, bit_length(acc_width - 1))``.

    Shifts ``0 .. 2 ** shift_bits - 1`` are allowed, at least ``0 .. acc_width - 1``.
    """
    return max(1, (int(acc_width) - 1).bit_length())


def max_shift(acc_width):
    """Largest ``shift`` of an UPDATE command."""
    return (1 << shift_bits(acc_width)) - 1


def count_shape(max_blocks):
    """Shape of a block count field (``0 .. max_blocks``)."""
    return unsigned(int(max_blocks).bit_length())


def core_cmd_layout(params):
    """Payload of ``cp_core``'s ``i_cmd``.

    ``op`` (a :class:`CoreOp`), ``overlap``, ``mb``, ``nb``, ``qb`` (block counts, at least 1; UPDATE:
    ``qb`` is the batch), ``base``, ``shift`` (UPDATE only: ``0 .. max_shift(acc_width)``).
    """
    counts = count_shape(params["max_blocks"])
    return data.StructLayout({
        "op": CoreOp,
        "overlap": 1,
        "mb": counts,
        "nb": counts,
        "qb": counts,
        "base": unsigned(addr_width(params["sram_depth"])),
        "shift": unsigned(shift_bits(params["acc_width"])),
    })


def core_data_layout(params):
    """Payload of ``cp_core``'s ``i_data``: ``n_r`` operands of ``width`` bits."""
    return data.ArrayLayout(signed(params["width"]), params["n_r"])


def core_result_layout(params):
    """Payload of ``cp_core``'s ``o_data``: ``n_r`` results of ``acc_width`` bits."""
    return data.ArrayLayout(signed(params["acc_width"]), params["n_r"])


def core_error_layout(params):
    """Payload of ``cp_core``'s ``o_error``: the rejected command's ``field`` (a :class:`CommandField`) and ``op``.

    ``op`` is the command's op field as given (3 bits; also when ``field`` is ``OP``).
    """
    return data.StructLayout({"field": CommandField, "op": unsigned(3)})


#: ``cp_core``: cycles from the acceptance of a rejected command to its error word on ``o_error``: the
#: cycle that registers the command (and the result of its range checks), then the error stream's stage.
ERROR_OFFSET = COMMAND_LATENCY + stream_stage.LATENCY
#: ``cp_core``: cycles a rejected command holds the core after its acceptance (the error word's hand-off to
#: the error stream's stage); the next command is accepted ``COMMAND_LATENCY + REJECT_CYCLES`` cycles after it.
REJECT_CYCLES = 1

#: The fields a command of each :class:`CoreOp` reads and the core checks, in the order it checks them
#: (``op`` first; the first out of range is the one reported).
_CHECKED_FIELDS = {
    CoreOp.GEMV_FORWARD: ("mb", "nb", "base"),
    CoreOp.GEMV_BACKWARD: ("mb", "nb", "base"),
    CoreOp.GEMM: ("mb", "nb", "qb", "base"),
    CoreOp.LOAD: ("mb", "nb", "base"),
    CoreOp.UPDATE: ("mb", "nb", "qb", "base", "qb * mb", "qb * nb"),
}
#: The :class:`CommandField` of each checked field (``shift`` and ``overlap`` have none: every value their
#: bits can hold is allowed).
_FIELD_CODES = {"op": CommandField.OP, "mb": CommandField.MB, "nb": CommandField.NB, "qb": CommandField.QB,
                "base": CommandField.BASE, "qb * mb": CommandField.BATCH_MB, "qb * nb": CommandField.BATCH_NB}


def core_command_limits(params):
    """Allowed range ``(low, high)`` of every ``cp_core`` command field, from the core's parameters.

    - ``op``: the :class:`CoreOp` codes;
    - ``mb``, ``nb``, ``qb``: ``1 .. max_blocks`` (block counts; ``max_blocks`` is the depth of the vector and
      error buffers, which hold a GEMV's vector and an UPDATE's ``x`` and ``e``; GEMM and LOAD keep the same
      limit, the size of the counters);
    - ``base``: ``0 .. sram_depth - 1`` (out of range only when ``sram_depth`` is not a power of two);
    - ``qb * mb``, ``qb * nb`` (UPDATE: the batch's ``x`` and ``e`` words in the two buffers): ``1 .. max_blocks``;
    - ``shift``: ``0 .. max_shift(acc_width)``, ``overlap``: ``0 .. 1`` (every value of their bits).

    Not a field range, so not checked by the core: the extent ``base + mb * nb <= sram_depth`` (the
    program builders check it, :func:`trainforge.golden.caterpillar.core.command`).
    """
    max_blocks = int(params["max_blocks"])
    return {"op": (0, int(max(CoreOp))), "overlap": (0, 1), "mb": (1, max_blocks), "nb": (1, max_blocks),
            "qb": (1, max_blocks), "base": (0, int(params["sram_depth"]) - 1),
            "qb * mb": (1, max_blocks), "qb * nb": (1, max_blocks), "shift": (0, max_shift(params["acc_width"]))}


def core_command_checks(op):
    """The fields the core checks for a command of ``op``, in order (``op`` alone if it is not a :class:`CoreOp`)."""
    try:
        return ("op",) + _CHECKED_FIELDS[CoreOp(int(op))]
    except ValueError:
        return ("op",)


def core_command_violation(params, command):
    """The first field of ``command`` (a dict of the command's fields) out of its range, or ``None``.

    Returns
    -------
    tuple or None
        ``(code, name, value, low, high)``: the :class:`CommandField` (``None`` for ``shift`` and ``overlap``,
        which the hardware cannot receive out of range), the field's name, its value and allowed range.
        The checked fields (:func:`core_command_checks`) come first, in the core's order, then ``shift``
        and ``overlap``.
    """
    limits = core_command_limits(params)
    op = int(command["op"])
    values = dict(command)
    values["qb * mb"] = int(command.get("qb", 1)) * int(command["mb"])
    values["qb * nb"] = int(command.get("qb", 1)) * int(command["nb"])
    names = core_command_checks(op)
    if names == ("op",) and not limits["op"][0] <= op <= limits["op"][1]:
        return CommandField.OP, "op", op, *limits["op"]
    for name in names + ("shift", "overlap"):
        low, high = limits[name]
        value = int(values.get(name, 0))
        if not low <= value <= high:
            return _FIELD_CODES.get(name), name, value, low, high
    return None


def ring_buffer_depth(params):
    """Words of each core's ring buffer: ``cores * max_blocks``."""
    return params["cores"] * params["max_blocks"]


def ring_cmd_layout(params):
    """Payload of ``cp_ring``'s ``i_cmd``.

    ``op`` (a :class:`RingOp`), ``core``, ``overlap``, ``mb``, ``nb``, ``base``, ``words`` (counts at least 1).
    """
    counts = count_shape(params["max_blocks"])
    return data.StructLayout({
        "op": RingOp,
        "core": unsigned(max(1, (params["cores"] - 1).bit_length())),
        "overlap": 1,
        "mb": counts,
        "nb": counts,
        "base": unsigned(addr_width(params["sram_depth"])),
        "words": unsigned(ring_buffer_depth(params).bit_length()),
    })


def ring_error_layout(params):
    """Payload of ``cp_ring``'s ``o_error``: the rejected command's ``field`` (a :class:`RingField`) and ``op``."""
    return data.StructLayout({"field": RingField, "op": unsigned(3)})


#: The fields a ``cp_ring`` command of each :class:`RingOp` reads and the ring checks, in order.
_RING_CHECKED_FIELDS = {
    RingOp.GEMV_FORWARD: ("mb", "nb", "base"),
    RingOp.GEMV_BACKWARD: ("mb", "nb", "base"),
    RingOp.LOAD: ("core", "mb", "nb", "base"),
    RingOp.WRITE: ("words",),
    RingOp.READ: ("words",),
    RingOp.ALL_GATHER: ("chunk words",),
    RingOp.REDUCE_SCATTER: ("chunk words",),
}
_RING_FIELD_CODES = {"op": RingField.OP, "core": RingField.CORE, "mb": RingField.MB, "nb": RingField.NB,
                     "base": RingField.BASE, "words": RingField.WORDS, "chunk words": RingField.WORDS}


def ring_command_limits(params):
    """Allowed range ``(low, high)`` of every ``cp_ring`` command field, from the ring's parameters.

    ``mb``, ``nb`` and ``base`` are the core's (:func:`core_command_limits`: the ring forwards them to its
    cores); ``core`` ``0 .. cores - 1``; ``words`` ``1 .. cores * max_blocks`` (WRITE, READ: words per core of
    the ring buffers) and, as ``chunk words``, ``1 .. max_blocks`` (collectives: ``cores`` chunks in a buffer).
    """
    core = core_command_limits(params)
    max_blocks = int(params["max_blocks"])
    return {"op": (0, int(max(RingOp))), "core": (0, int(params["cores"]) - 1), "overlap": (0, 1),
            "mb": core["mb"], "nb": core["nb"], "base": core["base"],
            "words": (1, ring_buffer_depth(params)), "chunk words": (1, max_blocks)}


def ring_command_checks(op):
    """The fields the ring checks for a command of ``op``, in order (``op`` alone if it is not a :class:`RingOp`)."""
    try:
        return ("op",) + _RING_CHECKED_FIELDS[RingOp(int(op))]
    except ValueError:
        return ("op",)


def ring_command_violation(params, command):
    """The first field of ``command`` out of its range, or ``None``: ``(code, name, value, low, high)``.

    ``code`` is the :class:`RingField` (``None`` for ``overlap``); ``chunk words`` is the ``words`` field of a
    collective.
    """
    limits = ring_command_limits(params)
    op = int(command["op"])
    values = dict(command)
    values["chunk words"] = command.get("words", 1)
    for name in ring_command_checks(op) + (("overlap",) if op in set(RingOp) else ()):
        low, high = limits[name]
        value = int(values.get(name, 0))
        if not low <= value <= high:
            return _RING_FIELD_CODES.get(name), name, value, low, high
    return None


def ring_word_layout(params):
    """Payload of ``cp_ring``'s ``i_data`` and ``o_data``: ``n_r`` lanes of ``acc_width`` bits."""
    return data.ArrayLayout(signed(params["acc_width"]), params["n_r"])


def reciprocal_table(table_bits, frac):
    """``1 / midpoint`` of each of the ``2 ** table_bits`` intervals of ``[1/2, 1)``, in ``frac`` fraction bits."""
    index = np.arange(1 << table_bits)
    midpoint = 0.5 + (index + 0.5) / (1 << (table_bits + 1))
    return np.round((1 << frac) / midpoint).astype(np.int64)


def reciprocal_table_fp16(table_bits):
    """FP16 bit patterns of ``1 / midpoint`` of each of the ``2 ** table_bits`` intervals of ``[1/2, 1)``
    (rounded to nearest even by numpy's float16 conversion): the ``fp16`` reciprocal's first guesses."""
    index = np.arange(1 << table_bits)
    midpoint = 0.5 + (index + 0.5) / (1 << (table_bits + 1))
    return (1.0 / midpoint).astype(np.float16).view(np.uint16).astype(np.int64)


def reciprocal_result_bits(params):
    """Bits of a ``cp_reciprocal`` result: :func:`result_width` of ``frac`` (fixed), 32 (``fp16``: FP32 bits)."""
    return FP32.width if params["mac"] == "fp16" else result_width(params["frac"])


def reciprocal_operand_bits(frac):
    """Bits of the reciprocal's ``N``, ``Q``, ``F`` and ``d`` (all below ``2 ** (frac + 1)``)."""
    return frac + 2


def result_width(frac):
    """Bits of a reciprocal of ``cp_reciprocal``: ``1 / (2**-frac)`` needs ``2 * frac + 1`` bits, plus one spare."""
    return 2 * frac + 2


def unit_latency(iterations):
    """Cycles of ``cp_reciprocal`` from a value's acceptance to its result on ``o_result`` (no backpressure).

    One MAC ``Q = d * x0`` and then two MACs per iteration, but the last ``Q``
    update is skipped (only ``N`` is the result): ``2 * iterations`` MAC
    cycles, one cycle that hands the denormalised ``N`` to the output stream
    stage (:mod:`trainforge.spec.stream_stage`) and that stage's one cycle.
    """
    return 2 * iterations + 2


def unit_interval(iterations):
    """Cycles between two values accepted by ``cp_reciprocal`` without backpressure: ``2 * iterations + 1``.

    The next value is accepted in the cycle the previous result is handed to
    the output stage (that stage's ``ready`` is a register), one cycle before
    the result is on ``o_result``: the interval is one less than
    :func:`unit_latency`.
    """
    return 2 * iterations + 1


def params_with_defaults(schema, given):
    """``schema``'s defaults updated by the entries of ``given`` that name its parameters (others are ignored).

    The golden models take their parameters as keywords from any block's dict
    (a ring's parameters include a core's); values are not range-checked here,
    so that the system models can evaluate sizes beyond the generators' limits.
    """
    values = schema.defaults
    values.update({name: value for name, value in given.items() if name in values})
    return values
