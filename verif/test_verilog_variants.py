"""Two differently parameterized variants of one block in one Verilog design, under Icarus and Verilator."""
import subprocess
import sys

import pytest

from trainforge.emit import emit
from trainforge.simulation import ICARUS_BUILD_ARGS, VERILATOR_WAIVERS

# One worker builds this module's shared fixture (make test runs xdist with --dist loadgroup).
pytestmark = pytest.mark.xdist_group("verilog_variants")

TOP = """module two_rings(input clk, input rst);
{instances}
endmodule
"""


def _instance(item):
    """Every input tied to 0, every output left open: enough to elaborate and compile the design."""
    connections = []
    for port in item.ports:
        if port["name"] == "clk":
            connections.append(".clk(clk)")
        elif port["name"] == "rst":
            connections.append(".rst(rst)")
        elif port["direction"] == "input":
            connections.append(f".{port['name']}({port['width']}'d0)")
        else:
            connections.append(f".{port['name']}()")
    return f"  {item.module} u_{item.module} ({', '.join(connections)});"


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    folder = tmp_path_factory.mktemp("variants")
    variants = [emit("cp_ring", module="ring_small", cores=2, n_r=2, sram_depth=16),
                emit("cp_ring", module="ring_large", cores=3, n_r=2, sram_depth=32)]
    sources = []
    for item in variants:
        path = folder / f"{item.module}.v"
        path.write_text(item.text)
        sources.append(path)
    top = folder / "two_rings.v"
    top.write_text(TOP.format(instances="\n".join(_instance(item) for item in variants)))
    return folder, [top, *sources]


def test_same_block_same_name_collides(tmp_path):
    """The counterfactual: two variants under the block's own name do not compile together."""
    first, second = emit("dense_pe", lanes=2), emit("dense_pe", lanes=4)
    (tmp_path / "a.v").write_text(first.text)
    (tmp_path / "b.v").write_text(second.text)
    result = subprocess.run(["iverilog", "-g2005", "-o", str(tmp_path / "x"), str(tmp_path / "a.v"),
                             str(tmp_path / "b.v")], capture_output=True, text=True)
    assert result.returncode != 0 and "dense_pe" in result.stderr + result.stdout


def test_variants_compile_under_icarus(design):
    folder, sources = design
    result = subprocess.run(["iverilog", *ICARUS_BUILD_ARGS, "-s", "two_rings", "-o", str(folder / "sim.vvp"),
                             *map(str, sources)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_variants_compile_under_verilator(design):
    folder, sources = design
    result = subprocess.run(["verilator", "--lint-only", "-Wall", *VERILATOR_WAIVERS, "-Wno-PINCONNECTEMPTY",
                             "--top-module", "two_rings", *map(str, sources)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_name_must_be_a_verilog_identifier(tmp_path):
    for bad in ("1pe", "pe-a", "module", ""):
        result = subprocess.run([sys.executable, "-m", "trainforge.cli", "verilog", "dense_pe", "--name", bad],
                                cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 2 and "is not a Verilog module name" in result.stderr, (bad, result.stderr)
        assert not (tmp_path / "build").exists()


def test_testbench_skeleton_runs_under_icarus(tmp_path):
    """The generated cocotb skeleton (clock, reset, a driver on every stream) runs as written."""
    result = subprocess.run([sys.executable, "-m", "trainforge.cli", "verilog", "dense_pe", "--name", "pe_x",
                             "--out", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "pe_x_inst.v").read_text().startswith("// Instantiation template of module pe_x")
    run = subprocess.run([sys.executable, str(tmp_path / "test_pe_x.py")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert "TESTS=1 PASS=1 FAIL=0" in run.stdout + run.stderr, (run.stdout + run.stderr)[-3000:]
