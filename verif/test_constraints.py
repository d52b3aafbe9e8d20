"""Every cross-parameter constraint of every registered block: refused with its exact message, boundary accepted.

The messages are written out here, not read from the code. A block schema
that gains a constraint without a case below fails
:func:`test_every_constraint_has_a_case`.
"""
import pytest

from trainforge.errors import ParameterError
from trainforge.hw.registry import BLOCKS

_SR_LO_SEED = ("parameter 'seed' = {seed} is invalid (the SR-LO LFSR has 8 stages); allowed: an integer in 1..255 "
               "when rounding is sr_lo")

#: (block, violating overrides, exact message, accepted boundary overrides)
CASES = [
    ("td_scheduler", {"pattern": "1:0,0:0"},
     "parameter 'pattern' = '1:0,0:0' is invalid (the first option is (1, 0), but the dense schedule (0, 0) must "
     "come first); allowed: 'default', a named pattern or 'step:offset,...' with distinct options, steps in 0..3 and (0, 0) first",
     {"pattern": "0:0,1:0"}),
    ("td_pe", {"depth": 2, "pattern": "0:0,2:0"},
     "parameter 'pattern' = '0:0,2:0' is invalid (option 1 (2, 0): step 2 is outside 0..1 (depth 2)); allowed: "
     "'default', a named pattern or 'step:offset,...' with distinct options, steps in 0..1 and (0, 0) first",
     {"depth": 2, "pattern": "0:0,1:0"}),
    ("td_tile", {"pattern": "0:0,1:1,1:5"},
     "parameter 'pattern' = '0:0,1:1,1:5' is invalid (option 2 (1, 5) repeats option 1 (1, 1) (offsets compare "
     "modulo 4 lanes)); allowed: 'default', a named pattern or 'step:offset,...' with distinct options, steps in 0..3 and (0, 0) first",
     {"pattern": "0:0,1:1,1:2"}),
    ("nt_mac", {"rounding": "sr_lo", "seed": 256}, _SR_LO_SEED.format(seed=256),
     {"rounding": "sr_lo", "seed": 255}),
    ("nt_mac", {"rounding": "sr_full", "seed": 256}, None, {"rounding": "sr_full", "seed": 256}),
    ("nt_pe", {"rounding": "sr_lo", "seed": 300}, _SR_LO_SEED.format(seed=300), {"rounding": "sr_lo", "seed": 1}),
    ("nt_system", {"rounding": "sr_lo", "seed": 300}, _SR_LO_SEED.format(seed=300),
     {"rounding": "truncate", "seed": 300}),
    ("nt_bus", {"width": 24}, "parameter 'width' = 24 is invalid; allowed: 16 or 32", {"width": 16}),
    ("cp_pe", {"width": 16, "acc_width": 31},
     "parameter 'acc_width' = 31 is invalid (narrower than the 32-bit products of width 16); allowed: an integer "
     "in 32..64", {"width": 16, "acc_width": 32}),
    ("cp_pe", {"mac": "fp16", "width": 8, "acc_width": 32},
     "parameter 'width' = 8 is invalid with mac 'fp16' (FP16 operands, an FP32 accumulator); allowed: 16",
     {"mac": "fp16", "width": 16, "acc_width": 32}),
    ("cp_pe", {"mac": "fp16", "width": 16, "acc_width": 40},
     "parameter 'acc_width' = 40 is invalid with mac 'fp16' (FP16 operands, an FP32 accumulator); allowed: 32",
     {"mac": "fp16"}),
    ("cp_pe", {"partial_sums": 4},
     "parameter 'partial_sums' = 4 is invalid with mac 'fixed' (only the fp16 FPU has the interleaved accumulator); "
     "allowed: 1", {"mac": "fp16", "partial_sums": 4}),
    ("cp_pe", {"reduction_partials": 2},
     "parameter 'reduction_partials' = 2 is invalid with mac 'fixed' (only the fp16 FPU has the interleaved "
     "reduction); allowed: 1", {"mac": "fp16", "reduction_partials": 2}),
    ("cp_core", {"width": 20, "acc_width": 39},
     "parameter 'acc_width' = 39 is invalid (narrower than the 40-bit products of width 20); allowed: an integer "
     "in 40..64", {"width": 20, "acc_width": 40}),
    ("cp_core", {"mac": "fp16", "n_r": 3, "reduction": "tree", "reduction_partials": 2},
     "parameter 'reduction_partials' = 2 is invalid with reduction 'tree' (a tree step adds the sum of the step "
     "before: the interleaved reduction would make each step 12 cycles long; use reduction 'bus'); allowed: 1",
     {"mac": "fp16", "n_r": 3, "reduction": "tree", "partial_sums": 2}),
    ("cp_ring", {"width": 32, "acc_width": 63},
     "parameter 'acc_width' = 63 is invalid (narrower than the 64-bit products of width 32); allowed: an integer "
     "in 64..64", {"width": 32, "acc_width": 64}),
    ("cp_core", {"mac": "fp16", "width": 16, "acc_width": 40},
     "parameter 'acc_width' = 40 is invalid with mac 'fp16' (FP16 operands, an FP32 accumulator); allowed: 32",
     {"mac": "fp16", "n_r": 2}),
    ("cp_ring", {"mac": "fp16", "width": 12},
     "parameter 'width' = 12 is invalid with mac 'fp16' (FP16 operands, an FP32 accumulator); allowed: 16",
     {"mac": "fp16", "cores": 2}),
    ("cp_reciprocal", {"mac": "fp16", "width": 31},
     "parameter 'width' = 31 is invalid with mac 'fp16' (FP32 values); allowed: 32", {"mac": "fp16", "frac": 4}),
    ("cp_reciprocal", {"frac": 8, "table_bits": 7},
     "parameter 'table_bits' = 7 is invalid (the table indexes the bits after the leading one of a 8-bit "
     "fraction); allowed: an integer in 1..6", {"frac": 8, "table_bits": 6}),
]


@pytest.mark.parametrize("block,bad,message,good", CASES, ids=[f"{case[0]}-{index}" for index, case in enumerate(CASES)])
def test_constraint(block, bad, message, good):
    schema = BLOCKS[block].schema
    if message is None:
        # A combination that looks suspicious but is allowed, or refused with a message pinned elsewhere.
        try:
            schema.resolve(**bad)
        except ParameterError:
            pass
    else:
        with pytest.raises(ParameterError) as info:
            BLOCKS[block].component(**bad)
        assert str(info.value) == message
    assert schema.resolve(**good), "the boundary must be accepted"


def _failing_constraints(block, overrides):
    """Which of the schema's constraints refuse ``overrides`` (each parameter itself being in range)."""
    schema = BLOCKS[block].schema
    values = schema.defaults
    values.update({name: schema[name].check(value) for name, value in overrides.items()})
    failing = []
    for index, constraint in enumerate(schema.constraints):
        try:
            constraint(values)
        except ParameterError:
            failing.append(index)
    return failing


def test_every_constraint_has_a_case():
    covered = {(block, index) for block, bad, message, _ in CASES if message is not None
               for index in _failing_constraints(block, bad)}
    missing = [f"{name} constraint {index} ({constraint.__name__})"
               for name, block in BLOCKS.items() for index, constraint in enumerate(block.schema.constraints)
               if (name, index) not in covered]
    assert not missing, "constraints without a refusal case in verif/test_constraints.py:\n" + "\n".join(missing)
