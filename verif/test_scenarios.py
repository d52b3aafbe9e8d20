"""Every block's scenario table against its golden model, in-process.

The same tables drive the RTL under cocotb (each block's testbench calls
:func:`scenario.run_table`). A block without a table fails
:func:`test_every_block_has_a_table`.
"""
import importlib

import pytest

from trainforge.hw.registry import BLOCKS

from scenario import check_transactions


def _table(block_name):
    try:
        return importlib.import_module(f"scenarios.{block_name}")
    except ModuleNotFoundError:
        return None


TABLED = [name for name in BLOCKS if _table(name) is not None]
CASES = [pytest.param(name, overrides, id=f"{name}-{index}")
         for name in TABLED for index, overrides in enumerate(BLOCKS[name].test_params)]


def test_every_block_has_a_table():
    missing = [name for name in BLOCKS if name not in TABLED]
    assert not missing, f"blocks without a scenario table in verif/scenarios/: {', '.join(missing)}"


@pytest.mark.parametrize("block_name,overrides", CASES)
def test_golden_model_meets_the_table(block_name, overrides, seed):
    block, table = BLOCKS[block_name], _table(block_name)
    params = block.resolve(**overrides)
    scenarios = table.scenarios(params, seed)
    assert scenarios, f"{block_name}: the table has no scenario"
    for scenario in scenarios:
        check_transactions(scenario, table.golden(params, scenario), f"[{block_name} {params} seed={seed}]")


def test_a_wrong_expectation_fails():
    """The check is able to fail: one changed expected item of a real table is reported."""
    table = _table("stream_stage")
    params = BLOCKS["stream_stage"].resolve()
    scenario = table.scenarios(params, 1)[0]
    broken = type(scenario)(scenario.name, scenario.stimulus,
                            {"o_stream": [scenario.expected["o_stream"][0] ^ 1, *scenario.expected["o_stream"][1:]]},
                            timing=scenario.timing)
    with pytest.raises(AssertionError, match="transaction 0 expected"):
        check_transactions(broken, table.golden(params, broken))
    late = type(scenario)(scenario.name, scenario.stimulus, scenario.expected,
                          timing={"o_stream": [cycle + 1 for cycle in scenario.timing["o_stream"]]})
    with pytest.raises(AssertionError, match="expected at cycle"):
        check_transactions(late, table.golden(params, late))
