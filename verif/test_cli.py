"""The ``trainforge`` command line: listing, emission, manifest, and clean failures on bad parameters."""
import hashlib
import json
import subprocess
import sys

import pytest

from trainforge.hw.registry import BLOCKS


def trainforge(*args, cwd):
    return subprocess.run([sys.executable, "-m", "trainforge.cli", *args], cwd=cwd,
                          capture_output=True, text=True)


def test_list_shows_every_block_and_parameter(tmp_path):
    result = trainforge("list", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert set(listing) == set(BLOCKS)
    for name, block in BLOCKS.items():
        assert [p["name"] for p in listing[name]["params"]] == list(block.schema.names)


def test_verilog_override_and_manifest(tmp_path):
    result = trainforge("verilog", "dense_pe", "--param", "lanes=8", "--param", "width=16", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "build" / "verilog"
    manifest = json.loads((out / "manifest.json").read_text())
    (entry,) = manifest["blocks"]
    text = (out / "dense_pe.v").read_bytes()
    assert entry["sha256"] == hashlib.sha256(text).hexdigest()
    assert entry["params"] == {"lanes": 8, "width": 16, "acc_width": 32, "signed": True, "mac": "integer",
                               "partial_sums": 4}
    ports = {port["name"]: port for port in entry["ports"]}
    payload = ports["i_row__payload"]
    assert (payload["direction"], payload["width"]) == ("input", 2 * 8 * 16 + 2)
    # Field by field from the row layout: a[0..7], b[0..7] (16-bit, signed), then the clear and read flags.
    expected = [{"name": f"{operand}[{lane}]", "offset": 16 * (8 * side + lane), "width": 16, "signed": True}
                for side, operand in enumerate("ab") for lane in range(8)]
    expected += [{"name": "clear", "offset": 256, "width": 1, "signed": False},
                 {"name": "read", "offset": 257, "width": 1, "signed": False}]
    assert payload["fields"] == expected
    assert entry["module"] == "dense_pe" and (out / "dense_pe_inst.v").exists()
    assert ports["i_row__ready"]["direction"] == "output"
    assert b"module dense_pe" in text


def test_verilog_all_blocks(tmp_path):
    result = trainforge("verilog", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "build" / "verilog" / "manifest.json").read_text())
    assert [entry["block"] for entry in manifest["blocks"]] == sorted(BLOCKS)
    for name in BLOCKS:
        assert (tmp_path / "build" / "verilog" / f"{name}.v").exists()


@pytest.mark.parametrize("args,needles", [
    (["--param", "lanes=65"], ["lanes", "65", "1..64"]),
    (["--param", "lanes=0"], ["lanes", "0", "1..64"]),
    (["--param", "width=eight"], ["width", "eight", "integer"]),
    (["--param", "signed=maybe"], ["signed", "maybe", "true or false"]),
    (["--param", "depth=3"], ["depth", "lanes"]),
    (["--param", "lanes"], ["lanes", "name=value"]),
])
def test_bad_parameter_exits_2_and_writes_nothing(tmp_path, args, needles):
    result = trainforge("verilog", "dense_pe", *args, cwd=tmp_path)
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not (tmp_path / "build").exists()


def test_unknown_block_exits_2(tmp_path):
    result = trainforge("verilog", "no_such_block", cwd=tmp_path)
    assert result.returncode == 2 and "no_such_block" in result.stderr and "dense_pe" in result.stderr
    assert not (tmp_path / "build").exists()


def test_param_without_single_block_exits_2(tmp_path):
    result = trainforge("verilog", "--param", "lanes=8", cwd=tmp_path)
    assert result.returncode == 2 and "exactly one block" in result.stderr
    assert not (tmp_path / "build").exists()
