"""Every registered block's cocotb testbench, on both simulators, over the block's test parameter sets."""
import pytest

from trainforge.hw.registry import BLOCKS

from trainforge import simulation


def _cases(attribute, marks=()):
    for block in BLOCKS.values():
        for index, overrides in enumerate(getattr(block, attribute)):
            for simulator in simulation.SIMULATORS:
                label = ",".join(f"{k}={v}" for k, v in sorted(overrides.items())) or "defaults"
                yield pytest.param(block.name, overrides, simulator, marks=marks,
                                   id=f"{block.name}-{label}-{simulator}")


@pytest.mark.parametrize("block_name,overrides,simulator", [
    *_cases("test_params"),
    *_cases("regress_params", marks=(pytest.mark.regress,)),
])
def test_block(block_name, overrides, simulator, seed):
    block = BLOCKS[block_name]
    simulation.run(block_name, block.testbench, overrides, simulator, seed)
