"""Parameter schemas: constructors validate, and errors name the parameter, the value and the range."""
import pytest

from trainforge.hw.dense_pe import DensePE
from trainforge.errors import ParameterError
from trainforge.spec.params import Param, ParamSchema
from trainforge.hw.registry import BLOCKS


@pytest.mark.parametrize("kwargs,needles", [
    ({"lanes": 0}, ["'lanes'", "0", "1..64"]),
    ({"lanes": 65}, ["'lanes'", "65", "1..64"]),
    ({"width": 1}, ["'width'", "2..32"]),
    ({"acc_width": 65}, ["'acc_width'", "65", "2..64"]),
    ({"lanes": 4.0}, ["'lanes'", "not an integer"]),
    ({"lanes": True}, ["'lanes'", "not an integer"]),
    ({"signed": 1}, ["'signed'", "true or false"]),
])
def test_dense_pe_constructor_rejects(kwargs, needles):
    with pytest.raises(ParameterError) as info:
        DensePE(**kwargs)
    for needle in needles:
        assert needle in str(info.value)


def test_every_block_default_and_test_sets_are_valid():
    for block in BLOCKS.values():
        for overrides in (*block.test_params, *block.regress_params):
            assert block.build(**overrides) is not None


def test_parse_converts_command_line_strings():
    assert DensePE.PARAMS.parse(["lanes=16", "signed=false"])["lanes"] == 16
    assert DensePE.PARAMS.parse(["lanes=08"])["lanes"] == 8
    for text in ("0x8", "8.0", "eight", ""):
        with pytest.raises(ParameterError, match="not an integer"):
            DensePE.PARAMS.parse([f"lanes={text}"])
    with pytest.raises(ParameterError, match="given twice"):
        DensePE.PARAMS.parse(["lanes=4", "lanes=8"])
    assert DensePE.PARAMS.parse(["signed=off"])["signed"] is False


def test_schema_rejects_invalid_default():
    with pytest.raises(ParameterError, match="'depth'"):
        Param("depth", int, 9, "buffer depth", minimum=2, maximum=5)


def test_constraints_run_on_resolve():
    def lanes_even(values):
        if values["lanes"] % 2:
            raise ParameterError(f"parameter 'lanes' = {values['lanes']} must be even")
    schema = ParamSchema((Param("lanes", int, 4, "lanes", minimum=1, maximum=8),), constraints=(lanes_even,))
    assert schema.resolve(lanes=2)["lanes"] == 2
    with pytest.raises(ParameterError, match="must be even"):
        schema.resolve(lanes=3)
