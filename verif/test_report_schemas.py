"""Every report kind, made by its command with small arguments, matches its JSON Schema (trainforge/schemas/).

The commands run in-process in one temporary folder (the reports go to its
``build/``). Yosys and nextpnr are replaced by fakes (as in
``verif/test_synth_cache.py``): the synth, fpga and area reports are checked for
their shape, not their figures. ``tensordash rtl-check`` needs a simulator and
is not run here. Broken copies of real reports must fail validation.
"""
import copy
import json
import pathlib

import pytest

jsonschema = pytest.importorskip("jsonschema", reason="the 'test' extra installs jsonschema")

from trainforge import cli, schemas  # noqa: E402

#: Command line -> report files (relative to build/) it must write.
COMMANDS = {
    "verilog dense_pe": ["verilog/manifest.json"],
    "synth dense_pe": ["reports/synth.json"],
    "fpga dense_pe": ["reports/qor.json"],
    "bench --repeat 1 hypar_dp_vgg_e": ["reports/bench.json"],
    "tensordash speedup --samples 2 --stream-rows 16": ["reports/tensordash/speedup.json"],
    "tensordash training --epochs 1": ["reports/tensordash/training.json"],
    "tensordash area --tile 1 2": ["reports/tensordash/area_l4_w8_a32_both.json"],
    "neurotrainer lut-error --table-bits 4": ["reports/neurotrainer/lut_error.json"],
    "neurotrainer area --lanes 1": ["reports/neurotrainer/area_l1.json"],
    "neurotrainer alexnet": ["reports/neurotrainer/alexnet.json"],
    "neurotrainer scaling": ["reports/neurotrainer/scaling_vgg16.json"],
    "neurotrainer training --quick --networks mlp": ["reports/neurotrainer/training.json"],
    "caterpillar table2": ["reports/caterpillar/table2.json"],
    "caterpillar utilization --m 32 --n 32": ["reports/caterpillar/gemv_utilization.json"],
    "caterpillar rates --network 500-500-500-10 --method SGD CP --batch 1 --epochs 1 --hidden-scale 0.05 "
    "--evaluations 1 --rate 0.1": ["reports/caterpillar/rates.json"],
    "caterpillar study --network 500-500-500-10 --method SGD --batch 1 --epochs 1 --hidden-scale 0.05 "
    "--evaluations 1": ["reports/caterpillar/study.json"],
    "hypar figures": [f"reports/hypar/{name}.json" for name in
                      ("fig5", "fig6_7", "fig8", "fig9", "fig10", "fig11", "fig12", "fig13", "nodes")],
    "dsm sweep training --values 256 --networks vgg16 --executor serial": ["reports/dsm/fig11_training.json"],
}

#: Report kinds with a schema that no command above makes, and why.
NOT_MADE = {"tensordash_rtl_check": "needs Verilator or Icarus"}


def _fake_synthesize(emitted, work_root):
    """A Yosys result whose cell counts depend on the block (so that area ratios are not all 1)."""
    cells = 40 + 7 * len(emitted.block.name) + sum(int(v) for v in emitted.params.values() if isinstance(v, int))
    return {"block": emitted.block.name, "params": emitted.params, "status": "ok", "tool": "Yosys fake (test)",
            "cells": cells, "cells_by_type": {"$_AND_": cells - 9, "$_DFF_P_": 9}}


def _fake_place_and_route(emitted, work_root):
    return {"block": emitted.block.name, "params": emitted.params, "status": "ok", "wrapper_flip_flops": 20,
            "lut4": 120, "ff": 60, "lut4_available": 83640, "ff_available": 83640, "mult18": 4, "mult18_available": 156,
            "bram": 0, "bram_available": 208, "fmax_mhz": 97.5, "meets_board_clock": True, "ff_block": 40,
            "log": "fake.tim"}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Run every command of :data:`COMMANDS` in one folder: ``(folder, {command: exit status or exception})``."""
    import trainforge.fpga
    import trainforge.synth

    folder = tmp_path_factory.mktemp("reports")
    statuses = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setattr(trainforge.synth, "synthesize", _fake_synthesize)
        patch.setattr(trainforge.fpga, "place_and_route", _fake_place_and_route)
        for command in COMMANDS:
            try:
                statuses[command] = cli.main(["--quiet", *command.split()])
            except Exception as error:  # reported by the command's own test
                statuses[command] = error
    return folder, statuses


@pytest.mark.parametrize("command", COMMANDS)
def test_report_matches_its_schema(made, command):
    folder, statuses = made
    assert statuses[command] == 0, f"trainforge {command}: exit status {statuses[command]!r}"
    for name in COMMANDS[command]:
        path = folder / "build" / name
        assert path.is_file(), f"trainforge {command} did not write {name}"
        kind = schemas.kind_of(path)
        assert kind is not None, f"{name}: no report kind"
        assert schemas.validate(path) == [], f"{name} does not match the {kind} schema"
        assert json.loads(path.read_text())["provenance"]["command_line"] == ["trainforge", "--quiet", *command.split()]


def test_every_report_written_has_a_kind_and_every_kind_is_made(made):
    folder, _ = made
    written = sorted((folder / "build").rglob("*.json"))
    assert written, "no report written"
    kinds = {path.relative_to(folder).as_posix(): schemas.kind_of(path) for path in written}
    assert None not in kinds.values(), f"reports without a schema: {[p for p, k in kinds.items() if k is None]}"
    assert set(schemas.kinds()) - set(kinds.values()) == set(NOT_MADE)


@pytest.mark.parametrize("kind", [kind for kind in schemas.kinds()])
def test_schema_is_valid_and_documented(kind):
    schema = schemas.load(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["description"] and schema["title"]
    assert "provenance" in schema["required"]
    for name, field in schema["properties"].items():
        assert field.get("description") or "$ref" in field, f"{kind}: field {name} has no description"


def _report(made, name):
    folder, _ = made
    return json.loads((folder / "build" / name).read_text())


# (report, kind, what is broken, how): each must fail validation, naming the broken field.
BROKEN = [
    ("reports/hypar/fig12.json", "hypar_fig12", "paper/Gmean", lambda r: r["paper"]["Gmean"].pop("htree")),
    ("reports/hypar/fig8.json", "hypar_fig8", "ours/VGG-A/0",
     lambda r: r["ours"]["VGG-A"].__setitem__(0, "272.1")),
    ("reports/caterpillar/table2.json", "caterpillar_table2", "rows/0",
     lambda r: r["rows"][0].pop("paper_gflops_per_w")),
    ("reports/caterpillar/table2.json", "caterpillar_table2", "rows/0/gflops_per_w",
     lambda r: r["rows"][0].__setitem__("gflops_per_w", "201.5")),
    ("reports/tensordash/speedup.json", "tensordash_speedup", "(top)", lambda r: r.pop("wide_pe")),
    ("reports/neurotrainer/alexnet.json", "neurotrainer_alexnet", "rows/0/pass",
     lambda r: r["rows"][0].__setitem__("pass", "forward")),
    ("reports/dsm/fig11_training.json", "dsm_sweep", "summary/vgg16",
     lambda r: r["summary"]["vgg16"].pop("paper_optimization_gain")),
    ("reports/synth.json", "synth", "blocks/0", lambda r: r["blocks"][0].__setitem__("cells", -1)),
    ("reports/bench.json", "bench", "(top)", lambda r: r.pop("provenance")),
    ("verilog/manifest.json", "verilog_manifest", "blocks/0/ports/0/direction",
     lambda r: r["blocks"][0]["ports"][0].__setitem__("direction", "sideways")),
    ("reports/neurotrainer/lut_error.json", "neurotrainer_lut_error", "provenance/source",
     lambda r: r["provenance"].__setitem__("source", "abc")),
]


@pytest.mark.parametrize("name, kind, where, breaks", BROKEN, ids=[f"{k}:{w}" for _, k, w, _ in BROKEN])
def test_broken_report_fails(made, name, kind, where, breaks):
    report = _report(made, name)
    assert schemas.errors(report, kind) == [], "the unbroken report must be valid"
    broken = copy.deepcopy(report)
    breaks(broken)
    found = schemas.errors(broken, kind)
    assert found, f"{name} with {where} broken passed validation"
    assert any(line.startswith(f"{where}:") for line in found), found


def test_kind_of_paths():
    assert schemas.kind_of(pathlib.Path("build/reports/qor.json")) == "fpga"
    assert schemas.kind_of("out/caterpillar/my_study.json") == "caterpillar_study"
    assert schemas.kind_of("x/neurotrainer/scaling_alexnet.json") == "neurotrainer_scaling"
    assert schemas.kind_of("x/hypar/fig5.json") == "hypar_fig5"
    assert schemas.kind_of("x/hypar/unknown.json") is None
    with pytest.raises(LookupError):
        schemas.validate("x/hypar/unknown.json")
