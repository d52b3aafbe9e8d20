"""The TensorDash family's blocks in the registry."""
from ..registry import Block, MutationSubset
from .pe import TDPE
from .scheduler import TDScheduler
from .tile import TDTile
from .transposer import TDTransposer

BLOCKS = (
    Block(
        name="td_scheduler",
        component=TDScheduler,
        testbench="tb_td_scheduler",
        summary="TensorDash hierarchical priority-encoder scheduler (MS, AS) behind a registered stream",
        test_params=({}, {"lanes": 16, "depth": 3}),
        regress_params=({"depth": 2}, {"depth": 3}, {"depth": 5},
                        {"lanes": 8, "depth": 4, "pattern": "0:0,1:0,2:0,3:0,1:1,1:-1,2:2,2:-2,3:4"},
                        {"pattern": "searched-4x4"}, {"pattern": "two-level-4x4"}, {"lanes": 16, "depth": 3, "pattern": "searched-16x3"}),
    ),
    Block(
        name="td_pe",
        component=TDPE,
        testbench="tb_td_pe",
        summary="TensorDash PE: staging buffers, sparse muxes, scheduler, L multipliers, one accumulator",
        test_params=({}, {"mac": "fp16", "pattern": "two-level-4x4", "partial_sums": 8},
                     {"mac": "bf16", "mode": "b_only", "depth": 3, "partial_sums": 2}),
        # The 16-lane 6-bit set moved here from test_params to keep make test under 5 minutes (2026-11-29).
        regress_params=({"lanes": 16, "depth": 3, "mode": "b_only", "width": 6, "acc_width": 20},
                        {"depth": 2, "signed": False}, {"depth": 5, "width": 16, "acc_width": 40},
                        {"depth": 3, "mode": "b_only"}, {"mac": "bf16", "lanes": 16, "depth": 3},
                        {"mac": "fp16", "depth": 2, "lanes": 3}),
        # trainforge mutate --subset: the table and a short random regression (a survivor runs everything).
        mutation_subset=MutationSubset(tests=("scenario_table", "random_regression"), transactions=300),
    ),
    Block(
        name="td_tile",
        component=TDTile,
        testbench="tb_td_tile",
        summary="TensorDash R x C tile, B-side skipping, rows synchronized on min(AS)",
        test_params=({"rows": 2, "cols": 2, "pattern": "two-level-4x4"}, {"rows": 2, "cols": 1, "mac": "bf16"}),
        regress_params=({}, {"rows": 2, "cols": 2}, {"rows": 4, "cols": 2, "depth": 3}, {"mac": "fp16"}, {"rows": 2, "cols": 2, "mac": "bf16"}),
    ),
    Block(
        name="td_transposer",
        component=TDTransposer,
        testbench="tb_td_transposer",
        summary="TensorDash 4x4 transposer between memory banks and scratchpads",
        test_params=({},),
        regress_params=({"size": 8, "width": 16},),
    ),
)
