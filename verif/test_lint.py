"""Verilator ``--lint-only -Wall`` of every emitted module, over each block's test parameter sets.

A clean lint is remembered under ``build/lint/`` by the hash of everything it depends on (the Verilog
text, the top module, the waivers and Verilator's version), like the simulation builds: byte-identical
Verilog is not linted again. Only clean results are kept; ``TRAINFORGE_LINT_CACHE=0`` lints every time.
"""
import hashlib
import json
import os
import subprocess

import pytest

from trainforge.emit import emit_cached
from trainforge.hw.registry import BLOCKS
from trainforge.outputs import write_text
from trainforge.simulation import ROOT, VERILATOR_WAIVERS, simulator_version

CASES = [pytest.param(block.name, overrides, id=f"{block.name}-{index}")
         for block in BLOCKS.values() for index, overrides in enumerate(block.test_params)]

LINT_CACHE = ROOT / "build" / "lint"


def _command(top, source):
    return ["verilator", "--lint-only", "-Wall", *VERILATOR_WAIVERS, "--top-module", top, str(source)]


def lint(top, text, folder, cache=LINT_CACHE):
    """``(clean, messages)`` of Verilator's lint of ``text``; a clean result is kept in ``cache``."""
    key = hashlib.sha256(json.dumps([text, _command(top, "top.v"), simulator_version("verilator")])
                         .encode()).hexdigest()
    marker = cache / f"{top}-{key[:24]}.clean"
    if os.environ.get("TRAINFORGE_LINT_CACHE", "1") != "0" and marker.exists():
        return True, "clean (cached)"
    source = folder / f"{top}.v"
    source.write_text(text)
    result = subprocess.run(_command(top, source), capture_output=True, text=True)
    clean = result.returncode == 0 and "%Warning" not in result.stderr
    if clean:
        write_text(marker, f"{top}: verilator --lint-only -Wall clean\n")
    return clean, result.stderr


@pytest.mark.parametrize("block_name,overrides", CASES)
def test_verilator_lint(block_name, overrides, tmp_path):
    clean, messages = lint(block_name, emit_cached(block_name, **overrides).text, tmp_path)
    assert clean, f"verilator lint of {block_name} {overrides}:\n{messages}"


def test_a_changed_module_is_linted_again(tmp_path):
    """The cache never hides a warning: a clean module is remembered, an edited copy with an undriven
    output is linted again and fails, and nothing is remembered for it."""
    cache = tmp_path / "cache"
    good = "module top(input wire a, output wire y);\n  assign y = a;\nendmodule\n"
    bad = "module top(input wire a, output wire y, output wire z);\n  assign y = a;\nendmodule\n"
    assert lint("top", good, tmp_path, cache) == (True, "")
    assert lint("top", good, tmp_path, cache) == (True, "clean (cached)")
    clean, messages = lint("top", bad, tmp_path, cache)
    assert not clean and "UNDRIVEN" in messages
    assert len(list(cache.iterdir())) == 1
