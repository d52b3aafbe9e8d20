"""``synthesize`` reuses a result only while the Verilog, the script and the tool are unchanged (fake Yosys)."""
import copy
import stat

import pytest

import trainforge.synth as synth
from trainforge.emit import emit

FAKE_YOSYS = """#!/bin/sh
echo run >> "{calls}"
cat > stat.json <<'JSON'
{{"creator": "Yosys fake (test)", "modules": {{"\\\\dense_pe": {{"num_cells": 7, "num_cells_by_type": {{"$_AND_": 7}}}}}}}}
JSON
"""


@pytest.fixture
def fake_yosys(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    tool = tmp_path / "yosys"
    tool.write_text(FAKE_YOSYS.format(calls=calls))
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(synth, "find_tool", lambda *names: str(tool))
    return lambda: len(calls.read_text().splitlines()) if calls.exists() else 0


def test_result_reused_until_the_verilog_changes(tmp_path, fake_yosys):
    emitted = emit("dense_pe")
    first = synth.synthesize(emitted, tmp_path / "work")
    assert first["cells"] == 7 and fake_yosys() == 1
    assert synth.synthesize(emitted, tmp_path / "work") == first and fake_yosys() == 1, "unchanged: not re-run"
    changed = copy.copy(emitted)
    changed.text = emitted.text + "\n// changed\n"
    synth.synthesize(changed, tmp_path / "work")
    assert fake_yosys() == 2, "changed Verilog must be synthesised again"
