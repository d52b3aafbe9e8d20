"""The counterfactual that explains ResNet50's feature-reuse gap (sim/dsm/feature_reuse.py)."""
import pytest

from trainforge.sim.dsm.arch import default_architecture
from trainforge.sim.dsm.explore import Optimizations, _Explorer
from trainforge.sim.dsm.feature_reuse import feature_reuse_study
from trainforge.sim.dsm.workload import resnet50

ONE_CHIP = default_architecture().with_changes(**{"system.chips_x": 1, "system.chips_y": 1})


def _fwd_writes(write_held_shortcuts, training=False):
    explorer = _Explorer(resnet50(1), ONE_CHIP, Optimizations(memory_reuse=True), training,
                         write_held_shortcuts=write_held_shortcuts)
    _, path = explorer.run()
    return {name: records["FWD"]["transfers"]["WriteOut"] for name, _, records in path}


def test_held_block_outputs_and_projections_are_not_written_in_the_counterfactual():
    written, held = _fwd_writes(True), _fwd_writes(False)
    # res2a_1x1b's output feeds res2b_1x1a (resident input) and res2b_1x1b's add (resident
    # shortcut); res2a_proj's output feeds only res2a_1x1b's add.
    for name in ("res2a_1x1b", "res2a_proj"):
        assert written[name] > 0
        assert held[name] == 0.0, name
    # The network's output is always written.
    assert held["fc1000"] == written["fc1000"] > 0


def test_training_ignores_the_counterfactual():
    # Training writes every activation back anyway (UPD reads it).
    assert _fwd_writes(True, training=True) == _fwd_writes(False, training=True)


def test_study_rows():
    points = {p["configuration"]: p for p in feature_reuse_study([1])["points"]}
    assert points["dsm"]["gain"] == 1.0
    assert points["held_shortcuts_not_written"]["cycles"] < points["feature_reuse"]["cycles"] < points["dsm"]["cycles"]
    assert points["held_shortcuts_not_written"]["write_cycles"] < points["feature_reuse"]["write_cycles"]
    assert points["both"]["gain"] > points["weights_free"]["gain"]
