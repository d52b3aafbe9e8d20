"""Verilator ``--lint-only -Wall`` of every emitted module, over each block's test parameter sets."""
import subprocess

import pytest

from trainforge.emit import emit_cached
from trainforge.hw.registry import BLOCKS

from trainforge.simulation import VERILATOR_WAIVERS

CASES = [pytest.param(block.name, overrides, id=f"{block.name}-{index}")
         for block in BLOCKS.values() for index, overrides in enumerate(block.test_params)]


@pytest.mark.parametrize("block_name,overrides", CASES)
def test_verilator_lint(block_name, overrides, tmp_path):
    source = tmp_path / f"{block_name}.v"
    source.write_text(emit_cached(block_name, **overrides).text)
    result = subprocess.run(
        ["verilator", "--lint-only", "-Wall", *VERILATOR_WAIVERS, "--top-module", block_name, str(source)],
        capture_output=True, text=True)
    assert result.returncode == 0 and "%Warning" not in result.stderr, \
        f"verilator lint of {block_name} {overrides}:\n{result.stderr}"
