"""Cross-parameter constraints of the CATERPILLAR schemas and the UPDATE field checks of the golden core."""
import re

import numpy as np

import pytest

from trainforge.errors import ParameterError, ProgramError
from trainforge.golden.caterpillar import core as golden_core
from trainforge.hw.caterpillar.core import CPCore
from trainforge.hw.caterpillar.pe import CPPE
from trainforge.hw.caterpillar.reciprocal import CPReciprocal
from trainforge.hw.caterpillar.ring import CPRing
from trainforge.spec import caterpillar as spec

ACC_WIDTH_MESSAGE = ("parameter 'acc_width' = 31 is invalid (narrower than the 32-bit products of width 16); "
                     "allowed: an integer in 32..64")


@pytest.mark.parametrize("schema, extra", [
    (spec.PE_PARAMS, {}),
    (spec.CORE_PARAMS, {"n_r": 2}),
    (spec.RING_PARAMS, {"cores": 3, "n_r": 2}),
])
def test_acc_width_must_hold_a_product(schema, extra):
    """``acc_width >= 2 * width`` for the PE, and through it for the core and the ring."""
    with pytest.raises(ParameterError, match=re.escape(ACC_WIDTH_MESSAGE)) as caught:
        schema.resolve(width=16, acc_width=31, **extra)
    assert str(caught.value) == ACC_WIDTH_MESSAGE
    assert schema.resolve(width=16, acc_width=32, **extra)["acc_width"] == 32
    assert schema.resolve(width=2, acc_width=4, **extra)["acc_width"] == 4


def test_table_bits_must_leave_the_leading_one():
    """``table_bits <= frac - 2``: the table indexes the bits after the leading one of the fraction."""
    message = ("parameter 'table_bits' = 7 is invalid (the table indexes the bits after the leading one of a "
               "8-bit fraction); allowed: an integer in 1..6")
    with pytest.raises(ParameterError) as caught:
        spec.RECIPROCAL_PARAMS.resolve(frac=8, table_bits=7)
    assert str(caught.value) == message
    assert spec.RECIPROCAL_PARAMS.resolve(frac=8, table_bits=6)["table_bits"] == 6
    with pytest.raises(ParameterError) as caught:
        spec.RECIPROCAL_PARAMS.resolve(frac=4, table_bits=3)
    assert "allowed: an integer in 1..2" in str(caught.value)
    assert spec.RECIPROCAL_PARAMS.resolve(frac=4, table_bits=2)["table_bits"] == 2


def test_components_check_the_constraints():
    """The generators resolve their parameters through the spec schemas."""
    assert CPPE.PARAMS is spec.PE_PARAMS and CPCore.PARAMS is spec.CORE_PARAMS
    assert CPRing.PARAMS is spec.RING_PARAMS and CPReciprocal.PARAMS is spec.RECIPROCAL_PARAMS
    with pytest.raises(ParameterError, match=re.escape(ACC_WIDTH_MESSAGE)):
        CPCore(n_r=2, width=16, acc_width=31, sram_depth=8, max_blocks=2)
    with pytest.raises(ParameterError, match="'table_bits' = 7"):
        CPReciprocal(frac=8, table_bits=7)
    CPReciprocal(frac=8, table_bits=6)


def test_derived_widths():
    """Hand-worked derived widths and cycle counts."""
    assert [spec.shift_bits(a) for a in (4, 16, 17, 32, 33, 64)] == [2, 4, 5, 5, 6, 6]
    assert spec.max_shift(32) == 31 and spec.max_shift(20) == 31 and spec.max_shift(16) == 15
    assert [spec.reduction_cycles(n, "bus") for n in (2, 3, 16)] == [1, 2, 15]
    assert [spec.reduction_cycles(n, "tree") for n in (2, 3, 4, 5, 16)] == [1, 2, 2, 3, 4]
    with pytest.raises(ParameterError, match="'reduction' = 'ring'"):
        spec.reduction_cycles(4, "ring")
    assert [spec.addr_width(d) for d in (2, 3, 8, 9, 8192)] == [1, 2, 3, 4, 13]
    params = spec.CORE_PARAMS.resolve(n_r=2, sram_depth=64, max_blocks=8, acc_width=20, width=8)
    assert spec.core_cmd_layout(params).size == 3 + 1 + 3 * 4 + 6 + 5
    assert spec.result_width(16) == 34 and spec.unit_latency(2) == 6


@pytest.mark.parametrize("fields, name, value, allowed", [
    ((0, 1, 1, 0), "mb", 0, "1..8"),
    ((1, 9, 1, 0), "nb", 9, "1..8"),
    ((3, 1, 3, 0), "qb * mb", 9, "1..8"),
    ((1, 5, 2, 0), "qb * nb", 10, "1..8"),
    ((1, 1, 1, 32), "shift", 32, "0..31"),
])
def test_update_fields_are_range_checked(fields, name, value, allowed):
    """An UPDATE field out of range raises :class:`ProgramError` naming the field, its value and the range."""
    with pytest.raises(ProgramError) as caught:
        golden_core.check_update(*fields, acc_width=32, max_blocks=8)
    assert str(caught.value) == (f"UPDATE command field {name!r} = {value} is out of range; allowed: {allowed} "
                                 f"(max_blocks=8, sram_depth=8192, acc_width=32)")


# Each command field just out of range (limits written out by hand for max_blocks 8, sram_depth 48,
# acc_width 32: 1..8 counts, 0..47 base, 0..31 shift), with the code the core sends on o_error.
_SMALL = {"max_blocks": 8, "sram_depth": 48, "acc_width": 32}


@pytest.mark.parametrize("op, fields, name, value, allowed, code", [
    (5, {}, "op", 5, "0..4", "OP"),
    (spec.CoreOp.GEMV_FORWARD, {"mb": 9}, "mb", 9, "1..8", "MB"),
    (spec.CoreOp.GEMV_BACKWARD, {"mb": 0, "nb": 0}, "mb", 0, "1..8", "MB"),
    (spec.CoreOp.LOAD, {"nb": 9}, "nb", 9, "1..8", "NB"),
    (spec.CoreOp.GEMM, {"qb": 0}, "qb", 0, "1..8", "QB"),
    (spec.CoreOp.GEMM, {"qb": 9}, "qb", 9, "1..8", "QB"),
    (spec.CoreOp.LOAD, {"base": 48}, "base", 48, "0..47", "BASE"),
    (spec.CoreOp.UPDATE, {"mb": 3, "qb": 3}, "qb * mb", 9, "1..8", "BATCH_MB"),
    (spec.CoreOp.UPDATE, {"nb": 2, "qb": 5}, "qb * nb", 10, "1..8", "BATCH_NB"),
])
def test_command_fields_out_of_range(op, fields, name, value, allowed, code):
    """The builder raises naming the field, value and range; the golden core rejects the command with the code."""
    with pytest.raises(ProgramError) as caught:
        golden_core.command(op, **fields, **_SMALL)
    assert f"field {name!r} = {value} is out of range; allowed: {allowed} " in str(caught.value)
    word = {"op": int(op), "overlap": 0, "mb": 1, "nb": 1, "qb": 1, "base": 0, "shift": 0, **fields}
    assert golden_core.command_error(word, **_SMALL) == {"field": int(spec.CommandField[code]), "op": int(op)}
    assert list(golden_core.command_schedule(word, **_SMALL).error_offsets) == [2]


@pytest.mark.parametrize("op, fields", [
    (spec.CoreOp.UPDATE, {"mb": 8, "nb": 1, "qb": 1}),
    (spec.CoreOp.UPDATE, {"mb": 2, "nb": 2, "qb": 4, "base": 44}),
    (spec.CoreOp.GEMM, {"mb": 1, "nb": 1, "qb": 8, "base": 47}),
    (spec.CoreOp.GEMV_FORWARD, {"mb": 8, "nb": 6, "qb": 0}),  # qb is not a field of a GEMV
    (spec.CoreOp.LOAD, {"mb": 1, "nb": 8, "shift": 31}),
])
def test_command_fields_just_in_range(op, fields):
    word = golden_core.command(op, **fields, **_SMALL)
    assert golden_core.command_error(word, **_SMALL) is None
    assert len(golden_core.command_schedule(word, **_SMALL).error_offsets) == 0


def test_command_extent_is_checked_by_the_builder_only():
    """``base + mb * nb`` past the memory: the builder raises; the core's field checks let it through."""
    with pytest.raises(ProgramError, match=r"'base' = 41 is out of range for mb \* nb = 8 words; allowed: 0..40"):
        golden_core.command(spec.CoreOp.GEMV_FORWARD, mb=4, nb=2, base=41, **_SMALL)
    word = {"op": 0, "overlap": 0, "mb": 4, "nb": 2, "qb": 1, "base": 41, "shift": 0}
    assert golden_core.command_error(word, **_SMALL) is None


def test_update_fields_accept_the_boundaries():
    golden_core.check_update(8, 8, 1, 31, acc_width=32, max_blocks=8)
    golden_core.check_update(4, 2, 2, 0, acc_width=32, max_blocks=8)
    golden_core.check_update(1, 1, 1, 15, acc_width=16, max_blocks=1)


def test_fp16_is_built_for_every_block():
    """``mac="fp16"`` is accepted by the PE, the core and the ring at width 16 / acc_width 32, and by the
    reciprocal at width 32; the core and the ring refuse other widths with the PE's message."""
    assert spec.PE_PARAMS.resolve(mac="fp16")["mac"] == "fp16"
    for schema in (spec.CORE_PARAMS, spec.RING_PARAMS):
        assert schema.resolve(mac="fp16")["mac"] == "fp16"
        with pytest.raises(ParameterError) as caught:
            schema.resolve(mac="fp16", width=8)
        assert str(caught.value) == ("parameter 'width' = 8 is invalid with mac 'fp16' (FP16 operands, an FP32 "
                                     "accumulator); allowed: 16")
    assert spec.RECIPROCAL_PARAMS.resolve(mac="fp16")["mac"] == "fp16"
    with pytest.raises(ParameterError) as caught:
        spec.RECIPROCAL_PARAMS.resolve(mac="fp16", width=16)
    assert str(caught.value) == "parameter 'width' = 16 is invalid with mac 'fp16' (FP32 values); allowed: 32"

@pytest.mark.parametrize("name, what", [("partial_sums", "accumulator"), ("reduction_partials", "reduction")])
def test_interleaved_partials_only_with_the_fpu(name, what):
    """``partial_sums`` (the interleaved accumulator) and ``reduction_partials`` (the interleaved reduction) above 1
    are the fp16 FPU's; the fixed PE and the fixed core refuse them (the core passes them to its PEs); the ring
    has neither (its cores keep 1)."""
    assert spec.PE_PARAMS.resolve(mac="fp16", **{name: 4})[name] == 4
    assert spec.PE_PARAMS.resolve()[name] == 1
    with pytest.raises(ParameterError) as caught:
        CPPE(**{name: 4})
    assert str(caught.value) == (f"parameter '{name}' = 4 is invalid with mac 'fixed' (only the fp16 FPU has the "
                                 f"interleaved {what}); allowed: 1")
    with pytest.raises(ParameterError, match=f"'{name}' = 3"):
        spec.PE_PARAMS.resolve(mac="fp16", **{name: 3})
    assert spec.CORE_PARAMS.resolve(mac="fp16", **{name: 4})[name] == 4
    assert spec.CORE_PARAMS.resolve()[name] == 1
    with pytest.raises(ParameterError) as caught:
        CPCore(n_r=2, **{name: 2})
    assert str(caught.value) == (f"parameter '{name}' = 2 is invalid with mac 'fixed' (only the fp16 FPU has the "
                                 f"interleaved {what}); allowed: 1")
    with pytest.raises(ParameterError, match=f"'{name}' = 3"):
        spec.CORE_PARAMS.resolve(mac="fp16", **{name: 3})
    assert name not in spec.RING_PARAMS.names
    assert CPRing(cores=2, n_r=2, sram_depth=16, max_blocks=2, mac="fp16").core_params.get(name, 1) == 1


def test_tree_refuses_the_interleaved_reduction():
    """The tree reduction keeps the one-cycle reduction add (a step adds the sum of the step before); the
    interleaved accumulator is taken."""
    with pytest.raises(ParameterError) as caught:
        CPCore(n_r=3, reduction="tree", mac="fp16", reduction_partials=4)
    assert str(caught.value) == ("parameter 'reduction_partials' = 4 is invalid with reduction 'tree' (a tree step "
                                 "adds the sum of the step before: the interleaved reduction would make each step "
                                 "21 cycles long; use reduction 'bus'); allowed: 1")
    assert spec.CORE_PARAMS.resolve(n_r=3, reduction="tree", mac="fp16", partial_sums=4)["partial_sums"] == 4


def test_core_schedule_latencies_by_hand():
    """The core's schedule with P 4 and R 4 at n_r 2 (A 19, Lr 20, R 1), by hand: a GEMV block's output 19 + 20
    cycles later than with the one-cycle adds, its drain 1 + 1 + 20, the UPDATE drain 14 + 19 (fp16: 11 write-back
    stages, 5 - 1 + 11 - 1 = 14, against 5 - 1 + 3 - 1 = 6 fixed); block periods that divide R + Lr = 21 (1, 3,
    7, 21) lengthened by one cycle (2 and 4 do not divide it)."""
    one = {"n_r": 2, "mac": "fp16"}
    piped = {**one, "partial_sums": 4, "reduction_partials": 4}
    for overlap in (False, True):
        before = golden_core.schedule(golden_core.OP_GEMV_FORWARD, 5, 1, overlap=overlap, **one)
        after = golden_core.schedule(golden_core.OP_GEMV_FORWARD, 5, 1, overlap=overlap, **piped)
        assert list(after.output_offsets - before.output_offsets) == [39]
        assert after.issue_cycles == before.issue_cycles + 20
    update = (golden_core.schedule(golden_core.OP_UPDATE, 2, 2, 2, **piped).issue_cycles
              - golden_core.schedule(golden_core.OP_UPDATE, 2, 2, 2, **one).issue_cycles)
    assert update == 19
    # UPDATE b 2, Mb 2, Nb 2: b Mb (Nb + 1) = 12 issue cycles, then the drain (fixed 6; fp16 14, + A 19 with P 4).
    assert golden_core.schedule(golden_core.OP_UPDATE, 2, 2, 2, n_r=2).issue_cycles == 12 + 6
    assert golden_core.schedule(golden_core.OP_UPDATE, 2, 2, 2, **one).issue_cycles == 12 + 14
    assert golden_core.schedule(golden_core.OP_UPDATE, 2, 2, 2, **piped).issue_cycles == 12 + 14 + 19
    assert [spec.update_write_back_stages({"mac": mac}) for mac in ("fixed", "fp16")] == [3, 1 + 7 + 2 + 1]
    # overlap: period max(steps, 2); 3 and 7 divide 21, so they become 4 and 8.
    periods = {steps: int(np.diff(golden_core.schedule(golden_core.OP_GEMV_FORWARD, steps, 3, overlap=True,
                                                       **piped).output_offsets)[0]) for steps in (1, 2, 3, 4, 7, 8)}
    assert periods == {1: 2, 2: 2, 3: 4, 4: 4, 7: 8, 8: 8}
    # without overlap: period steps + 2; steps 1 (3), 5 (7), 19 (21) lengthened.
    periods = {steps: int(np.diff(golden_core.schedule(golden_core.OP_GEMV_FORWARD, steps, 3, **piped)
                                  .output_offsets)[0]) for steps in (1, 2, 5, 6, 19)}
    assert periods == {1: 4, 2: 4, 5: 8, 6: 8, 19: 22}


def test_pe_reduction_latency():
    """By hand: the row register, then the interleaved accumulator (P stages, the partials' register, 7 stages
    per level of the tree over P partials)."""
    assert [spec.pe_reduction_latency(p) for p in (1, 2, 4, 8)] == [0, 1 + 2 + 1 + 7, 1 + 4 + 1 + 14, 1 + 8 + 1 + 21]


def test_pe_accumulate_latency():
    """By hand: the adder's P stages, the partials' register, 7 stages per level of the tree over P partials."""
    assert [spec.pe_accumulate_latency(p) for p in (1, 2, 4, 8)] == [0, 2 + 1 + 7, 4 + 1 + 14, 8 + 1 + 21]
