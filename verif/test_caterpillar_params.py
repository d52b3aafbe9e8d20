"""Cross-parameter constraints of the CATERPILLAR schemas and the UPDATE field checks of the golden core."""
import re

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
    ((3, 1, 3, 0), "batch * mb", 9, "1..8"),
    ((1, 5, 2, 0), "batch * nb", 10, "1..8"),
    ((1, 1, 1, 32), "shift", 32, "0..31"),
])
def test_update_fields_are_range_checked(fields, name, value, allowed):
    """An UPDATE field out of range raises :class:`ProgramError` naming the field, its value and the range."""
    with pytest.raises(ProgramError) as caught:
        golden_core.check_update(*fields, acc_width=32, max_blocks=8)
    assert str(caught.value) == (f"UPDATE field {name!r} = {value} is out of range; allowed: {allowed} "
                                 f"(max_blocks=8, acc_width=32)")


def test_update_fields_accept_the_boundaries():
    golden_core.check_update(8, 8, 1, 31, acc_width=32, max_blocks=8)
    golden_core.check_update(4, 2, 2, 0, acc_width=32, max_blocks=8)
    golden_core.check_update(1, 1, 1, 15, acc_width=16, max_blocks=1)
